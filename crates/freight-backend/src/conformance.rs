//! The conformance suite: the behaviour every [`Backend`] must show, written
//! once and run against each backend (`tests/conformance.rs`: `cpu`, `shm`,
//! `fake-device`, and `cuda` and `cuda-host` where a GPU is present).
//!
//! A backend is tested through a [`Harness`], which supplies the backend and
//! builds message frames. Each check is a public function, named after the
//! behaviour it proves, that panics with a message naming the harness when the
//! backend misbehaves; [`CHECKS`] lists them. [`conformance_tests!`](crate::conformance_tests)
//! makes one `#[test]` per check for a backend, each on a harness of its own
//! (as iceoryx2-cal's conformance tests do), so a failure names the check;
//! [`run_all`] runs every check on one harness. Checks that only apply to pool
//! backends (`!in_frame()`) or to backends with a finite
//! [`Backend::max_block_len`] pass trivially on the others.
//!
//! ```
//! use freight_backend::conformance::{run_all, FrameKind, StandardHarness};
//! use freight_backend::CpuBackend;
//!
//! run_all(&StandardHarness::new(CpuBackend, FrameKind::Shared));
//! ```
//!
//! Every check leaves the backend's [`Backend::stats`] as it found them, so the
//! checks can run in any order on one backend.
//!
//! Readers are named by process id, as [`Backend::export`] takes them: the
//! test process itself where it imports, and the pid of a child process that
//! has exited and been reaped where a check needs a dead reader, its parent
//! where it needs another living one.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{
    AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError, Frame,
    FrameMemory, FrameSlot, HeapFrame, ImportError, WriteError, MAX_DESCRIPTOR_LEN,
};
use freight_msg::BufferError;

/// What the suite needs to test one backend.
pub trait Harness {
    /// The backend under test.
    fn backend(&self) -> &dyn Backend;

    /// Builds a frame of `len` bytes (small fields plus the bytes of in-frame buffers).
    fn frame_builder(&self, len: usize) -> Box<dyn FrameBuilder>;

    /// Names the harness in failure messages.
    fn label(&self) -> String {
        self.backend().kind().name().to_owned()
    }

    /// Length of the blocks the exhaustion check allocates until the pool is
    /// exhausted (pool backends only). The default lets at most four blocks fit.
    fn exhaustion_block_len(&self) -> usize {
        self.backend().max_block_len() / 4 + 1
    }
}

/// A frame under construction: writable bytes that become a readable [`Frame`].
///
/// # Safety
///
/// [`as_mut_ptr`](FrameBuilder::as_mut_ptr) must return the start of as many
/// writable bytes as the builder was made for, exclusively the builder's, at an
/// address that does not change until [`finish`](FrameBuilder::finish); the
/// frame `finish` returns must consist of those bytes, at that address, with
/// what was written through the pointer. (The suite hands regions of it to
/// in-frame backends as [`FrameSlot`]s, which write through the pointer.)
pub unsafe trait FrameBuilder {
    /// Start of the frame's bytes.
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Seals the frame for reading.
    fn finish(self: Box<Self>) -> Frame;
    /// Whether the sealed frame will be [`FrameMemory::is_process_local`].
    fn is_process_local(&self) -> bool;
}

/// A frame that another process could share: heap bytes that report
/// `is_process_local() == false`, so that backends take the paths they take
/// for shared-memory frames (e.g. `cpu` copies out of them).
#[derive(Debug)]
pub struct SharedFrame(pub Vec<u8>);

impl FrameMemory for SharedFrame {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

/// Which frames a [`StandardHarness`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// [`HeapFrame`]s: intra-process delivery.
    Heap,
    /// [`SharedFrame`]s: delivery through (simulated) shared memory.
    Shared,
}

/// Builds a [`HeapFrame`] or a [`SharedFrame`] over a zeroed vector.
#[derive(Debug)]
pub struct VecFrameBuilder {
    bytes: Vec<u8>,
    kind: FrameKind,
}

impl VecFrameBuilder {
    /// A builder of a zeroed frame of `len` bytes.
    pub fn new(len: usize, kind: FrameKind) -> Self {
        VecFrameBuilder { bytes: vec![0; len], kind }
    }
}

// SAFETY: the vector is allocated once and never resized, so its buffer stays
// at one address; moving the vector into the frame moves only its handle, and
// the frame then reads the same buffer.
unsafe impl FrameBuilder for VecFrameBuilder {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }
    fn finish(self: Box<Self>) -> Frame {
        match self.kind {
            FrameKind::Heap => Arc::new(HeapFrame(self.bytes)),
            FrameKind::Shared => Arc::new(SharedFrame(self.bytes)),
        }
    }
    fn is_process_local(&self) -> bool {
        matches!(self.kind, FrameKind::Heap)
    }
}

/// A harness over any backend, with frames from a [`VecFrameBuilder`].
#[derive(Debug)]
pub struct StandardHarness<B> {
    backend: B,
    frames: FrameKind,
}

impl<B: Backend> StandardHarness<B> {
    /// Tests `backend` with frames of kind `frames`.
    pub fn new(backend: B, frames: FrameKind) -> Self {
        StandardHarness { backend, frames }
    }

    /// The backend under test.
    pub fn inner(&self) -> &B {
        &self.backend
    }
}

impl<B: Backend> Harness for StandardHarness<B> {
    fn backend(&self) -> &dyn Backend {
        &self.backend
    }
    fn frame_builder(&self, len: usize) -> Box<dyn FrameBuilder> {
        Box::new(VecFrameBuilder::new(len, self.frames))
    }
    fn label(&self) -> String {
        let frames = match self.frames {
            FrameKind::Heap => "heap",
            FrameKind::Shared => "shared",
        };
        format!("{} over {frames} frames", self.backend.kind())
    }
}

/// A check of the suite.
pub type Check = fn(&dyn Harness);

/// Every check, by name, in the order [`run_all`] runs them.
pub const CHECKS: &[(&str, Check)] = &[
    ("round_trip_through_host_mut", round_trip_through_host_mut),
    ("round_trip_through_write_from_host", round_trip_through_write_from_host),
    ("descriptor_fits_in_limit", descriptor_fits_in_limit),
    ("two_readers_see_identical_contents", two_readers_see_identical_contents),
    ("garbage_descriptors_are_refused", garbage_descriptors_are_refused),
    ("descriptor_past_the_frame_is_refused", descriptor_past_the_frame_is_refused),
    ("oversized_allocation_is_refused", oversized_allocation_is_refused),
    ("out_of_bounds_write_is_refused", out_of_bounds_write_is_refused),
    ("block_returns_to_pool_when_every_reader_dropped", block_returns_to_pool_when_every_reader_dropped),
    ("export_to_no_readers_frees_at_once", export_to_no_readers_frees_at_once),
    ("unexported_block_returns_to_pool_on_drop", unexported_block_returns_to_pool_on_drop),
    ("release_unimported_gives_the_hold_back", release_unimported_gives_the_hold_back),
    ("awaits_names_the_holds_not_yet_imported", awaits_names_the_holds_not_yet_imported),
    ("descriptor_of_freed_or_reused_block_is_stale", descriptor_of_freed_or_reused_block_is_stale),
    ("exhausted_pool_recovers_after_release", exhausted_pool_recovers_after_release),
    ("holds_of_a_dead_reader_are_reclaimed", holds_of_a_dead_reader_are_reclaimed),
    ("a_process_that_is_not_a_reader_cannot_import", a_process_that_is_not_a_reader_cannot_import),
    ("export_records_every_reader_or_refuses", export_records_every_reader_or_refuses),
    ("racing_release_and_reclaim_release_a_hold_once", racing_release_and_reclaim_release_a_hold_once),
];

/// Runs every check of [`CHECKS`] against the harness, naming each on stderr.
pub fn run_all(h: &dyn Harness) {
    for (name, check) in CHECKS {
        eprintln!("conformance: {}: {name}", h.label());
        check(h);
    }
}

/// One `#[test]` per check of [`CHECKS`] for one backend, in a module named
/// `$module`: each builds a harness of its own with `$harness`, runs the
/// check, then `after(&harness)` when given (e.g. that the backend holds
/// nothing). With `if guard`, a test whose guard is false returns at once (a
/// backend that needs hardware the machine lacks; the guard says so).
///
/// ```
/// use freight_backend::conformance::{FrameKind, StandardHarness};
/// use freight_backend::{Backend, BackendStats, FakeDeviceBackend, ShmBackend};
///
/// freight_backend::conformance_tests!(
///     shm_over_shared_frames,
///     StandardHarness::new(ShmBackend::default(), FrameKind::Shared)
/// );
/// freight_backend::conformance_tests!(
///     fake_device_over_shared_frames,
///     StandardHarness::new(FakeDeviceBackend::new(1 << 26).unwrap(), FrameKind::Shared),
///     after |h: &StandardHarness<FakeDeviceBackend>| assert_eq!(h.inner().stats(), BackendStats::default())
/// );
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($module:ident, $harness:expr $(, if $guard:expr)? $(, after $after:expr)? $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            /// Runs `check` on a harness of its own.
            fn run(check: $crate::conformance::Check) {
                $( if !$guard { return; } )?
                let harness = $harness;
                check(&harness);
                $( ($after)(&harness); )?
            }

            $crate::conformance_tests!(@each run;
                round_trip_through_host_mut,
                round_trip_through_write_from_host,
                descriptor_fits_in_limit,
                two_readers_see_identical_contents,
                garbage_descriptors_are_refused,
                descriptor_past_the_frame_is_refused,
                oversized_allocation_is_refused,
                out_of_bounds_write_is_refused,
                block_returns_to_pool_when_every_reader_dropped,
                export_to_no_readers_frees_at_once,
                unexported_block_returns_to_pool_on_drop,
                release_unimported_gives_the_hold_back,
                awaits_names_the_holds_not_yet_imported,
                descriptor_of_freed_or_reused_block_is_stale,
                exhausted_pool_recovers_after_release,
                holds_of_a_dead_reader_are_reclaimed,
                a_process_that_is_not_a_reader_cannot_import,
                export_records_every_reader_or_refuses,
                racing_release_and_reclaim_release_a_hold_once,
            );
        }
    };
    (@each $run:ident; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                $run($crate::conformance::$check)
            }
        )*

        #[test]
        fn every_check_of_the_suite_is_a_test_here() {
            let suite: Vec<&str> = $crate::conformance::CHECKS.iter().map(|(name, _)| *name).collect();
            assert_eq!(suite, [$(stringify!($check)),*]);
        }
    };
}

/// The bytes the suite writes: `len` bytes of a pattern that depends on `seed`
/// and does not repeat with a short period.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_mul(7).wrapping_add(seed) ^ ((i / 251) as u8)).collect()
}

/// Bytes of small fields in front of the buffer region of a test frame.
const FRAME_HEAD: usize = 16;
/// Bytes behind it.
const FRAME_TAIL: usize = 8;
/// Lengths of the round-trip checks.
const ROUND_TRIP_LENS: [usize; 5] = [0, 1, 7, 4096, (1 << 20) + 3];

/// How a check writes a block.
#[derive(Clone, Copy, Debug)]
enum Via {
    HostMut,
    WriteFromHost,
}

/// A block written, exported and sealed in a frame.
struct Published {
    frame: Frame,
    descriptor: Descriptor,
    expected: Vec<u8>,
}

/// The id of this process, the reader of the blocks the checks import.
fn me() -> u32 {
    std::process::id()
}

/// The id of a process that no longer exists: a child that exited and was reaped.
pub fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawning `true`");
    child.wait().expect("reaping `true`");
    child.id()
}

/// As [`publish_for`], with this process as each of `readers` readers.
fn publish(h: &dyn Harness, len: usize, seed: u8, via: Via, readers: u32) -> Option<Published> {
    publish_for(h, len, seed, via, &vec![me(); readers as usize])
}

/// Allocates `len` bytes (in a frame region for in-frame backends), writes the
/// pattern of `seed` via `via`, exports for `readers` and seals the frame.
/// `None` when the block offers no `host_mut` (device memory) and `via` needs it.
fn publish_for(h: &dyn Harness, len: usize, seed: u8, via: Via, readers: &[u32]) -> Option<Published> {
    let b = h.backend();
    let label = h.label();
    let region = if b.in_frame() { len } else { 0 };
    let mut builder = h.frame_builder(FRAME_HEAD + region + FRAME_TAIL);
    let slot = b.in_frame().then(|| FrameSlot {
        offset: FRAME_HEAD,
        ptr: builder.as_mut_ptr().wrapping_add(FRAME_HEAD),
        len,
        process_local: builder.is_process_local(),
    });
    let mut block = b.allocate(len, slot).unwrap_or_else(|e| panic!("{label}: allocating {len} bytes failed: {e}"));
    assert_eq!(block.len(), len, "{label}: allocated block has the wrong length");
    assert_eq!(block.is_empty(), len == 0, "{label}: is_empty of a {len}-byte block");
    let expected = pattern(len, seed);
    match via {
        Via::HostMut => {
            let kind = b.kind();
            let Some(mem) = block.host_mut() else {
                assert!(!kind.is_host_memory(), "{label}: {kind} is host memory but host_mut() is None");
                return None;
            };
            assert_eq!(mem.len(), len, "{label}: host_mut() has the wrong length");
            for (d, s) in mem.iter_mut().zip(&expected) {
                *d = MaybeUninit::new(*s);
            }
        }
        Via::WriteFromHost => {
            // In two pieces, so that a non-zero offset is exercised.
            let mid = len / 2;
            block
                .write_from_host(mid, &expected[mid..])
                .unwrap_or_else(|e| panic!("{label}: write_from_host of the back half failed: {e}"));
            block
                .write_from_host(0, &expected[..mid])
                .unwrap_or_else(|e| panic!("{label}: write_from_host of the front half failed: {e}"));
        }
    }
    let descriptor = b.export(block, readers).unwrap_or_else(|e| panic!("{label}: export failed: {e}"));
    Some(Published { frame: builder.finish(), descriptor, expected })
}

/// Imports a published block, panicking with context on failure.
fn import(h: &dyn Harness, p: &Published) -> Arc<dyn BufferStorage> {
    h.backend()
        .import(&p.frame, p.descriptor.as_bytes())
        .unwrap_or_else(|e| panic!("{}: import of a valid descriptor failed: {e}", h.label()))
}

/// Checks an imported buffer's length, backend and bytes (host view and copy).
fn assert_contents(h: &dyn Harness, buf: &dyn BufferStorage, expected: &[u8], what: &str) {
    let label = h.label();
    let len = expected.len();
    assert_eq!(buf.len(), len, "{label}: {what}: len()");
    assert_eq!(buf.is_empty(), len == 0, "{label}: {what}: is_empty()");
    assert_eq!(buf.backend(), h.backend().kind(), "{label}: {what}: backend()");
    if let Some(bytes) = buf.host_bytes() {
        assert!(bytes == expected, "{label}: {what}: host_bytes() differ from what was written");
    }
    let mut copy = vec![0u8; len];
    buf.copy_to_host(&mut copy).unwrap_or_else(|e| panic!("{label}: {what}: copy_to_host failed: {e}"));
    assert!(copy == expected, "{label}: {what}: copy_to_host() differs from what was written");
    let mut wrong = vec![0u8; len + 1];
    assert_eq!(
        buf.copy_to_host(&mut wrong),
        Err(BufferError::LengthMismatch { len, dst: len + 1 }),
        "{label}: {what}: copy_to_host into a longer destination"
    );
}

fn assert_stats(h: &dyn Harness, expected: BackendStats, when: &str) {
    assert_eq!(h.backend().stats(), expected, "{}: stats {when}", h.label());
}

fn round_trip(h: &dyn Harness, via: Via) {
    let max = h.backend().max_block_len();
    let before = h.backend().stats();
    for (i, len) in ROUND_TRIP_LENS.into_iter().enumerate() {
        if len > max {
            continue;
        }
        let Some(p) = publish(h, len, i as u8 + 1, via, 1) else {
            return;
        };
        let buf = import(h, &p);
        assert_contents(h, buf.as_ref(), &p.expected, &format!("{len} bytes written via {via:?}"));
        drop(buf);
        assert_stats(h, before, &format!("after the reader of {len} bytes dropped"));
    }
}

/// Contents written through [`WritableBlock::host_mut`](crate::WritableBlock::host_mut)
/// read back intact (lengths 0, 1, 7, 4096, 1 MiB + 3), by `host_bytes()` when
/// the memory is host memory and always by `copy_to_host`. Backends that are
/// not host memory may have no `host_mut`; host-memory backends must.
pub fn round_trip_through_host_mut(h: &dyn Harness) {
    round_trip(h, Via::HostMut);
}

/// As [`round_trip_through_host_mut`], writing with
/// [`WritableBlock::write_from_host`](crate::WritableBlock::write_from_host) in two pieces.
pub fn round_trip_through_write_from_host(h: &dyn Harness) {
    round_trip(h, Via::WriteFromHost);
}

/// Descriptors are at most [`MAX_DESCRIPTOR_LEN`] bytes.
pub fn descriptor_fits_in_limit(h: &dyn Harness) {
    for len in [0, 4096] {
        let p = publish(h, len, 3, Via::WriteFromHost, 0).expect("write_from_host always works");
        let n = p.descriptor.as_bytes().len();
        assert!(n <= MAX_DESCRIPTOR_LEN, "{}: descriptor of {n} bytes", h.label());
    }
}

/// Two readers of one export see the same contents. `shm` readers view the
/// frame itself (one address, zero copy); `cpu` readers of a frame shared with
/// other processes get private copies (addresses outside the frame, one per
/// reader), and of a process-local frame a view of it.
pub fn two_readers_see_identical_contents(h: &dyn Harness) {
    let label = h.label();
    let before = h.backend().stats();
    let len = 4096;
    let p = publish(h, len, 5, Via::WriteFromHost, 2).expect("write_from_host always works");
    let a = import(h, &p);
    let b = import(h, &p);
    assert_contents(h, a.as_ref(), &p.expected, "first reader");
    assert_contents(h, b.as_ref(), &p.expected, "second reader");
    let in_frame = p.frame.bytes()[FRAME_HEAD..].as_ptr();
    let frame_range = p.frame.bytes().as_ptr_range();
    let addr = |s: &Arc<dyn BufferStorage>| s.host_bytes().map(<[u8]>::as_ptr);
    match h.backend().kind() {
        BackendKind::Shm => {
            assert_eq!(addr(&a), Some(in_frame), "{label}: shm reader does not view the frame");
            assert_eq!(addr(&b), Some(in_frame), "{label}: shm reader does not view the frame");
        }
        BackendKind::Cpu if !p.frame.is_process_local() => {
            let (pa, pb) = (addr(&a).expect("cpu is host memory"), addr(&b).expect("cpu is host memory"));
            assert!(!frame_range.contains(&pa), "{label}: cpu reader of a shared frame views the frame");
            assert!(!frame_range.contains(&pb), "{label}: cpu reader of a shared frame views the frame");
            assert_ne!(pa, pb, "{label}: cpu readers of a shared frame share one copy");
        }
        BackendKind::Cpu => {
            assert_eq!(addr(&a), Some(in_frame), "{label}: cpu reader of a local frame copies it");
            assert_eq!(addr(&b), Some(in_frame), "{label}: cpu reader of a local frame copies it");
        }
        _ => {}
    }
    drop((a, b));
    assert_stats(h, before, "after both readers dropped");
}

/// Garbage descriptors are refused with an [`ImportError`], without a panic and
/// without taking a hold: every truncation of a valid descriptor, the valid
/// descriptor with each byte flipped or one byte appended, empty, all-ones and
/// 4097-byte descriptors (and all-zero ones for pool backends). Pool backends
/// also refuse them in `release_unimported`. The valid descriptor still
/// imports afterwards.
pub fn garbage_descriptors_are_refused(h: &dyn Harness) {
    let label = h.label();
    let b = h.backend();
    let before = b.stats();
    // 4096 bytes 16 bytes into the frame: in-frame descriptors of offset and
    // length point past the frame whichever byte is flipped.
    let p = publish(h, 4096, 9, Via::WriteFromHost, 1).expect("write_from_host always works");
    let valid = p.descriptor.as_bytes();
    let mut garbage: Vec<(String, Vec<u8>)> = Vec::new();
    for cut in 0..valid.len() {
        garbage.push((format!("truncated to {cut} bytes"), valid[..cut].to_vec()));
    }
    for i in 0..valid.len() {
        let mut d = valid.to_vec();
        d[i] ^= 0xFF;
        garbage.push((format!("byte {i} flipped"), d));
    }
    let mut longer = valid.to_vec();
    longer.push(0);
    garbage.push(("one byte appended".into(), longer));
    if !b.in_frame() {
        // (For in-frame backends all zeros may well be a valid empty region.)
        garbage.push(("all zero".into(), vec![0; valid.len()]));
    }
    garbage.push(("all ones".into(), vec![0xFF; valid.len()]));
    garbage.push(("4097 bytes".into(), vec![0xA5; MAX_DESCRIPTOR_LEN + 1]));
    for (what, d) in &garbage {
        if let Ok(buf) = b.import(&p.frame, d) {
            panic!("{label}: descriptor {what} was imported ({} bytes in {})", buf.len(), buf.backend());
        }
        if !b.in_frame() {
            assert!(b.release_unimported(d, me()).is_err(), "{label}: descriptor {what} was released");
        }
    }
    let buf = import(h, &p);
    assert_contents(h, buf.as_ref(), &p.expected, "import after the garbage");
    drop(buf);
    assert_stats(h, before, "after the reader dropped");
}

/// In-frame backends refuse a descriptor whose region lies past the end of the
/// frame it came in with [`ImportError::OutOfFrame`].
pub fn descriptor_past_the_frame_is_refused(h: &dyn Harness) {
    let b = h.backend();
    if !b.in_frame() {
        return;
    }
    let len = 4096;
    let p = publish(h, len, 11, Via::WriteFromHost, 1).expect("write_from_host always works");
    for short in [0, FRAME_HEAD, FRAME_HEAD + len - 1] {
        let frame = h.frame_builder(short).finish();
        match b.import(&frame, p.descriptor.as_bytes()) {
            Err(ImportError::OutOfFrame { .. }) => {}
            other => panic!("{}: descriptor into a {short}-byte frame gave {other:?}", h.label()),
        }
    }
}

/// Allocating more than [`Backend::max_block_len`] fails with
/// [`AllocError::TooLarge`] (skipped when the limit is `isize::MAX` or more);
/// pool backends lend a block of exactly the limit.
pub fn oversized_allocation_is_refused(h: &dyn Harness) {
    let b = h.backend();
    let max = b.max_block_len();
    if max >= isize::MAX as usize {
        return;
    }
    match b.allocate(max + 1, None) {
        Err(AllocError::TooLarge { len, max: m, .. }) if len == max + 1 && m == max => {}
        other => panic!("{}: allocating {} bytes gave {other:?}", h.label(), max + 1),
    }
    if !b.in_frame() {
        let before = b.stats();
        let block = b.allocate(max, None).unwrap_or_else(|e| panic!("{}: allocating the maximum: {e}", h.label()));
        assert_eq!(block.len(), max);
        drop(block);
        assert_stats(h, before, "after the maximal block was dropped");
    }
}

/// [`WritableBlock::write_from_host`](crate::WritableBlock::write_from_host)
/// refuses writes that end past the block (including offsets that overflow)
/// with a [`WriteError`] describing them, and accepts an empty write at the end.
pub fn out_of_bounds_write_is_refused(h: &dyn Harness) {
    let label = h.label();
    let b = h.backend();
    let before = b.stats();
    for len in [0usize, 100] {
        let mut builder = h.frame_builder(FRAME_HEAD + len + FRAME_TAIL);
        let slot = b.in_frame().then(|| FrameSlot {
            offset: FRAME_HEAD,
            ptr: builder.as_mut_ptr().wrapping_add(FRAME_HEAD),
            len,
            process_local: builder.is_process_local(),
        });
        let mut block: BlockMut = b.allocate(len, slot).unwrap_or_else(|e| panic!("{label}: allocate: {e}"));
        let cases: [(usize, usize); 5] =
            [(len, 1), (0, len + 1), (len + 1, 0), (len.saturating_sub(1), 2), (usize::MAX, 2)];
        for (offset, n) in cases {
            let src = vec![0xEE; n];
            assert_eq!(
                block.write_from_host(offset, &src),
                Err(WriteError { offset, len: n, block_len: len, failure: None }),
                "{label}: write of {n} bytes at {offset} into {len} bytes"
            );
        }
        assert_eq!(block.write_from_host(len, &[]), Ok(()), "{label}: empty write at the end of {len} bytes");
        drop(block);
        drop(builder);
    }
    assert_stats(h, before, "after the written blocks were dropped");
}

/// Pool backends: a block exported for three readers stays in use until the
/// last of them drops its buffer, then returns to the pool.
pub fn block_returns_to_pool_when_every_reader_dropped(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let len = 1000;
    let p = publish(h, len, 13, Via::WriteFromHost, 3).expect("write_from_host always works");
    let held = b.stats();
    assert_eq!(held.blocks_in_use, before.blocks_in_use + 1, "{label}: blocks in use after export");
    assert!(held.bytes_in_use >= before.bytes_in_use + len, "{label}: bytes in use after export: {held:?}");
    let readers: Vec<_> = (0..3).map(|_| import(h, &p)).collect();
    for (i, r) in readers.into_iter().enumerate() {
        assert_contents(h, r.as_ref(), &p.expected, &format!("reader {i}"));
        assert_eq!(b.stats(), held, "{label}: stats after {i} of 3 readers dropped");
        drop(r);
    }
    assert_stats(h, before, "after every reader dropped");
}

/// Pool backends: `export(block, 0)` frees the block at once.
pub fn export_to_no_readers_frees_at_once(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let before = b.stats();
    let p = publish(h, 1000, 15, Via::WriteFromHost, 0).expect("write_from_host always works");
    assert_stats(h, before, "after an export to no readers");
    match b.import(&p.frame, p.descriptor.as_bytes()) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("{}: import of a block exported to no readers gave {other:?}", h.label()),
    }
}

/// Pool backends: a block allocated and dropped without export returns to the pool.
pub fn unexported_block_returns_to_pool_on_drop(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let before = b.stats();
    let block = b.allocate(1000, None).unwrap_or_else(|e| panic!("{}: allocate: {e}", h.label()));
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use + 1, "{}: blocks in use after allocate", h.label());
    drop(block);
    assert_stats(h, before, "after an unexported block was dropped");
}

/// Pool backends: `release_unimported` gives one reader's hold back, and fails
/// once no hold is left.
pub fn release_unimported_gives_the_hold_back(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let p = publish(h, 100, 17, Via::WriteFromHost, 3).expect("write_from_host always works");
    let d = p.descriptor.as_bytes();
    let reader = import(h, &p);
    b.release_unimported(d, me()).unwrap_or_else(|e| panic!("{label}: first release_unimported: {e}"));
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use + 1, "{label}: block freed while held");
    b.release_unimported(d, me()).unwrap_or_else(|e| panic!("{label}: second release_unimported: {e}"));
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use + 1, "{label}: block freed while imported");
    assert_contents(h, reader.as_ref(), &p.expected, "the reader that imported");
    drop(reader);
    assert_stats(h, before, "after every hold was given back");
    assert!(b.release_unimported(d, me()).is_err(), "{label}: release_unimported of a freed block succeeded");
}

/// `awaits` says whether a reader has a hold it has not imported: until its
/// last such hold is imported or given back, and never for a freed block, a
/// process that was not named, or an in-frame backend.
pub fn awaits_names_the_holds_not_yet_imported(h: &dyn Harness) {
    let b = h.backend();
    let label = h.label();
    let other = dead_pid();
    let p = publish_for(h, 100, 23, Via::WriteFromHost, &[me(), me()]).expect("write_from_host always works");
    let d = p.descriptor.as_bytes();
    if b.in_frame() {
        assert!(!b.awaits(d, me()), "{label}: an in-frame backend awaits a reader");
        return;
    }
    let before = b.stats();
    assert!(b.awaits(d, me()), "{label}: a reader named twice does not await the block");
    assert!(!b.awaits(d, other), "{label}: a process that was not named awaits the block");
    let reader = import(h, &p);
    assert!(b.awaits(d, me()), "{label}: with one of two holds imported, the other is not awaited");
    b.release_unimported(d, me()).unwrap_or_else(|e| panic!("{label}: release_unimported: {e}"));
    assert!(!b.awaits(d, me()), "{label}: awaited after one hold was imported and the other given back");
    drop(reader);
    assert!(!b.awaits(d, me()), "{label}: a freed block is awaited");
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use - 1, "{label}: the block was not freed");
}

/// Pool backends: the descriptor of a block that was freed, and then of one
/// that was allocated again (reusing its memory), is [`ImportError::Stale`].
pub fn descriptor_of_freed_or_reused_block_is_stale(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let len = 1000;
    let old = publish(h, len, 19, Via::WriteFromHost, 1).expect("write_from_host always works");
    drop(import(h, &old));
    let stale = |when: &str| match b.import(&old.frame, old.descriptor.as_bytes()) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("{label}: import of a descriptor {when} gave {other:?}"),
    };
    stale("of a freed block");
    match b.release_unimported(old.descriptor.as_bytes(), me()) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("{label}: release_unimported of a freed block gave {other:?}"),
    }
    let new = publish(h, len, 21, Via::WriteFromHost, 1).expect("write_from_host always works");
    stale("of a block allocated again");
    let buf = import(h, &new);
    assert_contents(h, buf.as_ref(), &new.expected, "the block allocated again");
    drop(buf);
    assert_stats(h, before, "after the reader dropped");
}

/// Pool backends: allocating while readers hold every block fails with
/// [`AllocError::Exhausted`]; once a reader gives its hold back, allocation
/// works again.
pub fn exhausted_pool_recovers_after_release(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let len = h.exhaustion_block_len();
    let mut held = Vec::new();
    let exhausted = loop {
        assert!(held.len() < 100_000, "{label}: no exhaustion after {} blocks of {len} bytes", held.len());
        match b.allocate(len, None) {
            Ok(block) => held.push(b.export(block, &[me()]).unwrap_or_else(|e| panic!("{label}: export: {e}"))),
            Err(e @ AllocError::Exhausted { .. }) => break e,
            Err(e) => panic!("{label}: allocating until exhausted gave {e:?}"),
        }
    };
    assert!(!held.is_empty(), "{label}: the pool lends not one block of {len} bytes: {exhausted}");
    let first = held.pop().expect("not empty");
    b.release_unimported(first.as_bytes(), me()).unwrap_or_else(|e| panic!("{label}: release_unimported: {e}"));
    let again = b.allocate(len, None).unwrap_or_else(|e| panic!("{label}: allocate after a release: {e}"));
    drop(again);
    for d in held {
        b.release_unimported(d.as_bytes(), me()).unwrap_or_else(|e| panic!("{label}: release_unimported: {e}"));
    }
    assert_stats(h, before, "after every block was released");
}

/// Pool backends: `reclaim_dead_readers` releases the holds of readers whose
/// process is gone, and no other: a block exported for a dead reader and this
/// process stays in use until this process drops its buffer; one exported for
/// two dead readers returns to the pool (its descriptor is then stale).
/// In-frame backends reclaim nothing.
pub fn holds_of_a_dead_reader_are_reclaimed(h: &dyn Harness) {
    let b = h.backend();
    let label = h.label();
    if b.in_frame() {
        assert_eq!(b.reclaim_dead_readers(), 0, "{label}: an in-frame backend reclaimed holds");
        return;
    }
    let before = b.stats();
    let dead = dead_pid();
    let live = publish_for(h, 1000, 23, Via::WriteFromHost, &[me()]).expect("write_from_host always works");
    assert_eq!(b.reclaim_dead_readers(), 0, "{label}: holds of a living reader were reclaimed");
    let shared = publish_for(h, 1000, 25, Via::WriteFromHost, &[dead, me()]).expect("write_from_host always works");
    let buf = import(h, &shared);
    assert_eq!(b.reclaim_dead_readers(), 1, "{label}: holds reclaimed of one dead reader");
    assert_eq!(
        b.stats().blocks_in_use,
        before.blocks_in_use + 2,
        "{label}: a block freed while a living reader holds it"
    );
    assert_contents(h, buf.as_ref(), &shared.expected, "a block whose other reader died");
    drop(buf);
    drop(import(h, &live));
    assert_stats(h, before, "after the living readers dropped");
    let orphan = publish_for(h, 1000, 27, Via::WriteFromHost, &[dead, dead]).expect("write_from_host always works");
    assert_eq!(b.reclaim_dead_readers(), 2, "{label}: holds reclaimed of a block held twice by a dead reader");
    assert_stats(h, before, "after the holds of a dead reader were reclaimed");
    match b.import(&orphan.frame, orphan.descriptor.as_bytes()) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("{label}: import of a block whose readers died gave {other:?}"),
    }
    assert_eq!(b.reclaim_dead_readers(), 0, "{label}: holds reclaimed twice");
}

/// Pool backends: a process can import or release only the holds it was
/// given. This process, not named at export (its parent is), is refused with
/// [`ImportError::NotAReader`] by `import` and by `release_unimported`, and
/// the named reader's hold is left in place; a process named once imports
/// once.
pub fn a_process_that_is_not_a_reader_cannot_import(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    // A living process other than this one, so that its hold is not reclaimed.
    let other = std::os::unix::process::parent_id();
    let p = publish_for(h, 1000, 29, Via::WriteFromHost, &[other]).expect("write_from_host always works");
    let d = p.descriptor.as_bytes();
    match b.import(&p.frame, d) {
        Err(ImportError::NotAReader { pid, .. }) if pid == me() => {}
        Err(e) => panic!("{label}: import by a process that is not a reader gave {e:?}"),
        Ok(_) => panic!("{label}: a process that is not a reader imported another reader's hold"),
    }
    match b.release_unimported(d, me()) {
        Err(ImportError::NotAReader { pid, .. }) if pid == me() => {}
        other => panic!("{label}: release_unimported by a process that is not a reader gave {other:?}"),
    }
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use + 1, "{label}: the reader's hold was taken");
    b.release_unimported(d, other).unwrap_or_else(|e| panic!("{label}: release_unimported for the reader: {e}"));
    assert_stats(h, before, "after the reader's hold was given back");

    let once = publish(h, 1000, 31, Via::WriteFromHost, 1).expect("write_from_host always works");
    let buf = import(h, &once);
    match b.import(&once.frame, once.descriptor.as_bytes()) {
        Err(ImportError::NotAReader { .. }) => {}
        other => panic!("{label}: a second import by a reader named once gave {other:?}"),
    }
    match b.release_unimported(once.descriptor.as_bytes(), me()) {
        Err(ImportError::NotAReader { .. }) => {}
        other => panic!("{label}: release_unimported of an imported hold gave {other:?}"),
    }
    assert_contents(h, buf.as_ref(), &once.expected, "the reader named once");
    drop(buf);
    assert_stats(h, before, "after the reader dropped");
}

/// Pool backends: an export for 64 readers records a hold for each of them,
/// or is refused with [`ExportError::TooManyReaders`] naming the backend's
/// limit (and the block returns to the pool); then an export for exactly that
/// limit records every hold. The block stays in use until the last is given back.
pub fn export_records_every_reader_or_refuses(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let export = |readers: usize| {
        let block = b.allocate(100, None).unwrap_or_else(|e| panic!("{label}: allocate: {e}"));
        b.export(block, &vec![me(); readers])
    };
    let mut readers = 64;
    let descriptor = match export(readers) {
        Ok(d) => d,
        Err(ExportError::TooManyReaders { readers: given, max, .. })
            if given == readers && (1..readers).contains(&max) =>
        {
            assert_stats(h, before, "after an export for too many readers");
            readers = max;
            export(max).unwrap_or_else(|e| panic!("{label}: export for the limit of {max} readers: {e}"))
        }
        Err(e) => panic!("{label}: export for {readers} readers gave {e:?}"),
    };
    for i in 0..readers {
        let in_use = b.stats().blocks_in_use;
        assert_eq!(
            in_use,
            before.blocks_in_use + 1,
            "{label}: blocks in use after {i} of {readers} holds were released"
        );
        b.release_unimported(descriptor.as_bytes(), me())
            .unwrap_or_else(|e| panic!("{label}: release_unimported of hold {i} of {readers}: {e}"));
    }
    assert_stats(h, before, "after every hold was given back");
}

/// Pool backends: each hold is released once when the reader gives it back
/// (`release_unimported` on one thread) while the creator reclaims it
/// because the reader's process is gone (`reclaim_dead_readers` in a loop on
/// another): over up to 256 blocks exported for a dead reader and this
/// process, the two together release exactly one hold per block, and no block
/// is freed while this process still holds it.
pub fn racing_release_and_reclaim_release_a_hold_once(h: &dyn Harness) {
    let b = h.backend();
    if b.in_frame() {
        return;
    }
    let label = h.label();
    let before = b.stats();
    let dead = dead_pid();
    let mut blocks = Vec::new();
    while blocks.len() < 256 {
        match b.allocate(64, None) {
            Ok(block) => blocks.push(block),
            Err(AllocError::Exhausted { .. }) if !blocks.is_empty() => break,
            Err(e) => panic!("{label}: allocate: {e}"),
        }
    }
    let descriptors: Vec<Descriptor> = blocks
        .into_iter()
        .map(|block| b.export(block, &[dead, me()]).unwrap_or_else(|e| panic!("{label}: export: {e}")))
        .collect();
    let n = descriptors.len();
    let done = AtomicBool::new(false);
    let (released, reclaimed) = std::thread::scope(|s| {
        let reclaimer = s.spawn(|| {
            let mut reclaimed = 0;
            while !done.load(Ordering::Acquire) {
                reclaimed += b.reclaim_dead_readers();
            }
            reclaimed + b.reclaim_dead_readers()
        });
        let released = descriptors
            .iter()
            .filter(|d| match b.release_unimported(d.as_bytes(), dead) {
                Ok(()) => true,
                Err(ImportError::NotAReader { .. }) => false,
                Err(e) => panic!("{label}: release_unimported for the dead reader: {e}"),
            })
            .count();
        done.store(true, Ordering::Release);
        (released, reclaimer.join().expect("the reclaiming thread panicked"))
    });
    assert_eq!(
        released + reclaimed,
        n,
        "{label}: {released} holds given back and {reclaimed} reclaimed of a dead reader named once in {n} blocks"
    );
    assert_eq!(b.stats().blocks_in_use, before.blocks_in_use + n, "{label}: a block was freed while held");
    for d in &descriptors {
        b.release_unimported(d.as_bytes(), me()).unwrap_or_else(|e| panic!("{label}: release_unimported: {e}"));
    }
    assert_stats(h, before, "after every hold was given back");
}
