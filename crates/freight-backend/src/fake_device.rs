//! `fake-device`: a simulated device memory pool in an address space of its own.
//!
//! It imitates what a CUDA backend does with a VMM / IPC memory pool, so that
//! the protocol can be built and tested on any machine:
//!
//! * **export a handle**: the writer's pool hands out blocks; exporting one
//!   yields a descriptor that names the pool, the block and its generation.
//!   It is an opaque handle, never a host pointer;
//! * **import once and cache**: a reader opens the pool the first time a
//!   descriptor names it and keeps the mapping for later descriptors (as
//!   `cuMemImportFromShareableHandle` / `cudaIpcOpenMemHandle` results are cached);
//! * **holds per reader process**: `export(block, readers)` records one hold
//!   per entry of `readers` (a process id) in the block's reader slots. A
//!   reader's import claims one hold recorded for its own process, and
//!   dropping the buffer gives it back; `release_unimported` gives back a hold
//!   the reader will not import; the last hold frees the block to its pool. A
//!   process that was not named cannot import ([`ImportError::NotAReader`]),
//!   so it can never take (and later free) another reader's hold;
//! * **dead readers**: the creator releases the holds, imported or not, of
//!   readers whose process no longer exists ([`Backend::reclaim_dead_readers`],
//!   also run by [`Backend::stats`] and before `allocate` reports
//!   [`AllocError::Exhausted`]);
//! * **staleness by generation**: freeing a block bumps its generation, so a
//!   descriptor of a block that was freed (and perhaps reused) is refused with
//!   [`ImportError::Stale`];
//! * **dead pools**: creating a pool removes the pool files that processes of
//!   this user left behind when they died without dropping their backend.
//!
//! The "device memory" is the data area of a shared-memory file
//! (`/dev/shm/freight-fakedev-<uid>-<pid>-<random>`, mode 0600), which the CPU
//! does not address through the buffer: [`BufferStorage::host_bytes`] is `None`
//! and the bytes are reached with [`BufferStorage::copy_to_host`] (the imitation
//! of a device-to-host copy) and written with [`WritableBlock::write_from_host`].
//!
//! # Pool file layout
//!
//! All integers little-endian; every field of the header and of the block
//! records is accessed as an atomic, because other processes map the same file.
//!
//! ```text
//! header (64 bytes)
//!   0  u64  magic "FRFDPOOL"
//!   8  u32  layout version (2)
//!  12  u32  number of block records
//!  16  u64  capacity: bytes of the data area
//!  24  u64  offset of the data area in the file
//!  32  u64  next generation (a pool-wide counter)
//! block record i (168 bytes, at 64 + 168 * i)
//!   0  u32  state: 0 unused, 1 idle, 2 being written, 3 exported
//!   4  u32  holds: occupied reader slots, counted off after a slot is cleared
//!   8  u64  generation
//!  16  u64  length in bytes
//!  24  u64  offset of the block in the data area
//!  32  u64  bytes of the data area the block occupies (its size class)
//!  40  u64 × 16  reader slots, one per hold: 0 when empty, else
//!                  bits  0..32  process id of the reader
//!                  bit  32      1 (occupied, so that no hold reads as 0)
//!                  bit  33      imported: a buffer in that process holds it
//!                  bits 34..64  low 30 bits of the generation it was exported at
//! data area (capacity bytes, at a page-aligned offset)
//! ```
//!
//! Generations come from the pool-wide counter, so no two allocations (of any
//! block) ever share one: a descriptor whose block index is changed never
//! names a live block.
//!
//! # Holds
//!
//! Each hold lives in one reader slot, and is given back by whoever changes
//! that slot to 0 with a compare-exchange against the exact value it expects:
//!
//! | who | slot before | slot after |
//! |---|---|---|
//! | `export` | 0 | reader, generation |
//! | `import` by the reader | reader, generation | reader, generation, imported |
//! | dropping the imported buffer | reader, generation, imported | 0 |
//! | `release_unimported` for the reader | reader, generation | 0 |
//! | `reclaim_dead_readers`, reader gone | any value of a dead reader | 0 |
//!
//! Only the one compare-exchange that empties a slot succeeds, and only its
//! caller decrements `holds` (the one that reaches 0 frees the block), so each
//! hold is released exactly once, whichever of a dropping reader, a releasing
//! subscriber and the reclaiming creator comes first. The generation in the
//! slot keeps a descriptor or buffer of an earlier export of the block from
//! matching a slot of a later one. Every slot is empty when a block is freed.
//!
//! A reader is dead when `kill(pid, 0)` fails with `ESRCH`; a zombie counts as
//! alive until it is reaped. Process ids are those of the creator's pid
//! namespace: readers in another pid namespace (a container sharing `/dev/shm`
//! but not the pid namespace) must not share a pool.
//!
//! # Allocator
//!
//! Blocks are carved from the data area in power-of-two size classes (64 bytes
//! and up, capped at the capacity). A freed block stays with its class as an
//! idle block and is reused by the next allocation of that class; when no idle
//! block fits and the data area has no free range left, the idle blocks of
//! every class are trimmed (their ranges go back to the data area) and the
//! allocation is retried. Only the creating backend allocates; any process may
//! free (by dropping the last hold), and the creator notices freed blocks by
//! polling the records of the blocks it lent.
//!
//! # Pools of dead processes
//!
//! The creator holds an exclusive `flock` on its pool file as long as the pool
//! exists. Creating a pool removes every file of the pool directory with a pool
//! name that carries this user's uid, owned by this user, whose creator (the
//! pid in the name) does not exist and whose lock nobody holds: a process
//! killed before it dropped its backend leaves no file behind for long.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions, Permissions};
use std::hash::{BuildHasher, Hasher};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use freight_msg::BufferError;
use memmap2::MmapRaw;

use crate::{
    AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError, Frame, FrameSlot,
    ImportError, WritableBlock, WriteError,
};

const KIND: BackendKind = BackendKind::FakeDevice;

/// Prefix of every pool file name.
const NAME_PREFIX: &str = "freight-fakedev-";
/// Longest pool name a descriptor may carry.
const MAX_NAME_LEN: usize = 64;

const POOL_MAGIC: u64 = u64::from_le_bytes(*b"FRFDPOOL");
const POOL_VERSION: u32 = 2;
const HEADER_LEN: usize = 64;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_RECORDS: usize = 12;
const H_CAPACITY: usize = 16;
const H_DATA_OFFSET: usize = 24;
const H_NEXT_GENERATION: usize = 32;

const R_STATE: usize = 0;
const R_HOLDS: usize = 4;
const R_GENERATION: usize = 8;
const R_LEN: usize = 16;
const R_OFFSET: usize = 24;
const R_SLOT: usize = 32;
const R_READERS: usize = 40;
/// Reader slots of a block record: the most readers one export may name.
pub const READER_SLOTS: usize = 16;
const RECORD_LEN: usize = R_READERS + 8 * READER_SLOTS;

/// Set in every occupied reader slot.
const SLOT_OCCUPIED: u64 = 1 << 32;
/// Set in a reader slot whose hold a buffer of the reader's process has imported.
const SLOT_IMPORTED: u64 = 1 << 33;
/// The slot keeps the generation's bits from here up (its low 30 bits).
const SLOT_GENERATION_SHIFT: u32 = 34;

const UNUSED: u32 = 0;
const IDLE: u32 = 1;
const WRITING: u32 = 2;
const EXPORTED: u32 = 3;

const PAGE: usize = 4096;
/// Smallest size class: 2^6 = 64 bytes.
const MIN_CLASS: u32 = 6;

const DESCRIPTOR_MAGIC: [u8; 4] = *b"FRFD";
const DESCRIPTOR_VERSION: u8 = 1;
/// Length of every `fake-device` descriptor, in bytes.
const DESCRIPTOR_LEN: usize = 32 + MAX_NAME_LEN;

/// Directory of the pool files: `/dev/shm` where it exists, else the temporary directory.
fn pool_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether `name` is a pool name this backend writes:
/// `freight-fakedev-<uid>-<pid>-<16 lowercase hex digits>`. Anything else (a
/// path separator, `..`, another prefix, a longer name) is refused.
fn valid_pool_name(name: &str) -> bool {
    if name.len() > MAX_NAME_LEN {
        return false;
    }
    let Some(rest) = name.strip_prefix(NAME_PREFIX) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let decimal = |s: &str| (1..=10).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    parts.len() == 3 && decimal(parts[0]) && decimal(parts[1]) && hex(parts[2])
}

/// The value of an unimported reader slot: the hold of process `pid` on the
/// export of generation `generation`.
fn reader_slot(pid: u32, generation: u64) -> u64 {
    u64::from(pid) | SLOT_OCCUPIED | (generation << SLOT_GENERATION_SHIFT)
}

/// The reader process of an occupied slot.
fn slot_pid(slot: u64) -> u32 {
    slot as u32
}

/// Whether an occupied slot is a hold on the export of `generation`.
fn slot_of_generation(slot: u64, generation: u64) -> bool {
    slot != 0 && slot >> SLOT_GENERATION_SHIFT == generation & (u64::MAX >> SLOT_GENERATION_SHIFT)
}

/// Whether process `pid` is gone: `kill(pid, 0)` fails with `ESRCH`. A zombie is
/// not gone until it is reaped; a process of another user (`EPERM`) is not gone.
/// An id that no process can have (0, or one beyond `pid_t`) is gone.
fn process_gone(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists
    // and that we may signal it. No memory is touched.
    let r = unsafe { libc::kill(pid, 0) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

fn unreachable(reason: impl Into<String>) -> ImportError {
    ImportError::Unreachable { backend: KIND, reason: reason.into() }
}

fn malformed(reason: impl Into<String>) -> ImportError {
    ImportError::Malformed { backend: KIND, reason: reason.into() }
}

fn system(reason: impl Into<String>) -> AllocError {
    AllocError::System { backend: KIND, reason: reason.into() }
}

/// The atomics of one block record in a mapped pool.
struct Record<'a> {
    state: &'a AtomicU32,
    holds: &'a AtomicU32,
    generation: &'a AtomicU64,
    len: &'a AtomicU64,
    offset: &'a AtomicU64,
    slot: &'a AtomicU64,
    /// One hold per occupied slot (see the module documentation).
    readers: &'a [AtomicU64],
}

/// One pool file mapped into this process: the creator's, or one opened to import.
struct Mapping {
    name: String,
    map: MmapRaw,
    /// Bytes at the start of the map that hold atomics: the header and the records.
    meta_len: usize,
    records: u32,
    capacity: u64,
    data_offset: usize,
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("name", &self.name)
            .field("records", &self.records)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Mapping {
    fn new(name: String, map: MmapRaw) -> Result<Self, String> {
        if map.len() < HEADER_LEN || map.as_ptr().align_offset(8) != 0 {
            return Err(format!("mapping of {} bytes is too short or misaligned", map.len()));
        }
        Ok(Mapping { name, map, meta_len: HEADER_LEN, records: 0, capacity: 0, data_offset: 0 })
    }

    fn atomic_u64(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= self.meta_len, "atomic at {at} outside the pool metadata");
        // SAFETY: `at + 8 <= meta_len <= map.len()`, so the 8 bytes lie inside the
        // mapping, which lives as long as `&self`; the map is page aligned and `at`
        // a multiple of 8, so the address is aligned for AtomicU64. The metadata
        // is only ever accessed through atomics (here and in other processes), and
        // AtomicU64 has the size and bit validity of u64: any bytes are a valid value.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU64) }
    }

    /// `n` consecutive 8-byte atomics from `at`.
    fn atomic_u64s(&self, at: usize, n: usize) -> &[AtomicU64] {
        assert!(at.is_multiple_of(8) && at + 8 * n <= self.meta_len, "atomics at {at} outside the pool metadata");
        // SAFETY: as in `atomic_u64`, for `n` adjacent u64s: `at + 8 * n <= meta_len`
        // keeps them inside the mapping, and AtomicU64 has the layout of u64, so
        // they form an array of `n` atomics.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(at) as *const AtomicU64, n) }
    }

    fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= self.meta_len, "atomic at {at} outside the pool metadata");
        // SAFETY: as in `atomic_u64`, for 4 bytes at a multiple of 4.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU32) }
    }

    /// The record of block `index`; `index < self.records` (checked).
    fn record(&self, index: u32) -> Record<'_> {
        assert!(index < self.records, "block {index} out of the record table");
        let base = HEADER_LEN + index as usize * RECORD_LEN;
        Record {
            state: self.atomic_u32(base + R_STATE),
            holds: self.atomic_u32(base + R_HOLDS),
            generation: self.atomic_u64(base + R_GENERATION),
            len: self.atomic_u64(base + R_LEN),
            offset: self.atomic_u64(base + R_OFFSET),
            slot: self.atomic_u64(base + R_SLOT),
            readers: self.atomic_u64s(base + R_READERS, READER_SLOTS),
        }
    }

    /// A generation no allocation of this pool has had.
    fn next_generation(&self) -> u64 {
        self.atomic_u64(H_NEXT_GENERATION).fetch_add(1, Ordering::AcqRel)
    }

    /// Start of `len` bytes at `offset` of the data area, after checking they lie in it.
    fn data_ptr(&self, offset: u64, len: usize) -> *mut u8 {
        let end = offset.checked_add(len as u64);
        assert!(
            end.is_some_and(|e| e <= self.capacity),
            "{len} bytes at {offset} overrun a data area of {} bytes",
            self.capacity
        );
        // `data_offset + capacity == map.len()` (checked when mapped), so this
        // stays inside the mapping; `wrapping_add` keeps the arithmetic safe.
        self.map.as_mut_ptr().wrapping_add(self.data_offset + offset as usize)
    }

    /// Copies `src` to the data area at `offset` (the host-to-device copy).
    fn copy_in(&self, offset: u64, src: &[u8]) {
        let dst = self.data_ptr(offset, src.len());
        // SAFETY: `data_ptr` checked that the destination lies in the data area of
        // the live mapping. The data area is never referenced as a Rust slice, only
        // copied to and from, so no reference aliases it; `src` is our own memory
        // and cannot overlap the mapping's data area.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    }

    /// Copies the data area at `offset` to `dst` (the device-to-host copy).
    fn copy_out(&self, offset: u64, dst: &mut [u8]) {
        let src = self.data_ptr(offset, dst.len());
        // SAFETY: as in `copy_in`, with source and destination exchanged.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    }

    /// Reads and checks the header of a pool mapped to import from it.
    fn open(name: &str) -> Result<Mapping, String> {
        let path = pool_dir().join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let meta = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
        if !meta.file_type().is_file() {
            return Err(format!("{} is not a regular file", path.display()));
        }
        if meta.uid() != effective_uid() {
            return Err(format!("{} belongs to uid {}, not to this user", path.display(), meta.uid()));
        }
        if meta.mode() & 0o7777 != 0o600 {
            return Err(format!("{} has mode {:o}, not 600", path.display(), meta.mode() & 0o7777));
        }
        if meta.len() < HEADER_LEN as u64 {
            return Err(format!("{} is too short to be a pool", path.display()));
        }
        let map = MmapRaw::map_raw(&file).map_err(|e| format!("mapping {}: {e}", path.display()))?;
        let mut m = Mapping::new(name.to_owned(), map)?;
        let magic = m.atomic_u64(H_MAGIC).load(Ordering::Acquire);
        let version = m.atomic_u32(H_VERSION).load(Ordering::Acquire);
        if magic != POOL_MAGIC || version != POOL_VERSION {
            return Err(format!("{} is not a version {POOL_VERSION} pool", path.display()));
        }
        let records = m.atomic_u32(H_RECORDS).load(Ordering::Acquire);
        let capacity = m.atomic_u64(H_CAPACITY).load(Ordering::Acquire);
        let data_offset = m.atomic_u64(H_DATA_OFFSET).load(Ordering::Acquire);
        let meta_len = HEADER_LEN + records as usize * RECORD_LEN;
        let consistent = data_offset.is_multiple_of(PAGE as u64)
            && data_offset >= meta_len as u64
            && data_offset.checked_add(capacity) == Some(m.map.len() as u64);
        if !consistent {
            return Err(format!("{} has an inconsistent header", path.display()));
        }
        m.meta_len = meta_len;
        m.records = records;
        m.capacity = capacity;
        m.data_offset = data_offset as usize;
        Ok(m)
    }
}

/// Frees a block: a new generation makes its descriptors stale, then it is idle.
fn free_block(map: &Mapping, index: u32) {
    let rec = map.record(index);
    rec.generation.store(map.next_generation(), Ordering::Release);
    rec.state.store(IDLE, Ordering::Release);
}

/// Counts off the hold whose reader slot the caller has just emptied; the last
/// one frees the block.
fn count_off_hold(map: &Mapping, index: u32) {
    let rec = map.record(index);
    // `holds` is never 0 here (each occupied slot was counted at export, and is
    // counted off once); `checked_sub` only keeps a corrupted pool from wrapping.
    if rec.holds.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1)) == Ok(1) {
        free_block(map, index);
    }
}

/// Releases the hold in reader slot `slot` of block `index` if the slot still
/// holds exactly `expected`. `true` when this call released it; `false` when
/// the slot holds something else (the hold was released by someone else).
fn release_slot(map: &Mapping, index: u32, slot: usize, expected: u64) -> bool {
    let released =
        map.record(index).readers[slot].compare_exchange(expected, 0, Ordering::AcqRel, Ordering::Acquire).is_ok();
    if released {
        count_off_hold(map, index);
    }
    released
}

/// Finds a reader slot of block `index` holding exactly `from` and changes it
/// to `to` (0 to release the hold, the imported value to import it); returns it.
fn claim_slot(map: &Mapping, index: u32, from: u64, to: u64) -> Option<usize> {
    // Each slot is tried once: a failed compare-exchange means the slot holds
    // another value (another reader's hold, or one that was just claimed).
    map.record(index)
        .readers
        .iter()
        .position(|s| s.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire).is_ok())
}

/// Why process `pid` found no unclaimed hold of its own on a resolved block:
/// the block was freed (or its holds given back) since it was resolved, or the
/// process was not named as a reader, or has used every hold it was given.
fn no_hold(r: &Resolved, pid: u32) -> ImportError {
    let rec = r.map.record(r.index);
    let found = rec.generation.load(Ordering::Acquire);
    let held = rec.readers.iter().any(|s| slot_of_generation(s.load(Ordering::Acquire), r.generation));
    if found != r.generation || !held {
        ImportError::Stale { backend: KIND, block: r.index, expected: r.generation, found }
    } else {
        ImportError::NotAReader { backend: KIND, pid }
    }
}

/// The fields of a decoded descriptor.
struct Handle<'a> {
    name: &'a str,
    index: u32,
    generation: u64,
    len: u64,
}

/// Encodes a descriptor:
///
/// ```text
///  0  4  magic "FRFD"
///  4  1  version (1)
///  5  1  pool name length n, 1..=64
///  6  2  reserved, zero
///  8  4  block index, u32
/// 12  4  reserved, zero
/// 16  8  generation, u64
/// 24  8  length in bytes, u64
/// 32 64  pool name: n ASCII bytes, then zeros
/// ```
fn encode(h: &Handle<'_>) -> Vec<u8> {
    let mut d = vec![0u8; DESCRIPTOR_LEN];
    d[..4].copy_from_slice(&DESCRIPTOR_MAGIC);
    d[4] = DESCRIPTOR_VERSION;
    d[5] = h.name.len() as u8;
    d[8..12].copy_from_slice(&h.index.to_le_bytes());
    d[16..24].copy_from_slice(&h.generation.to_le_bytes());
    d[24..32].copy_from_slice(&h.len.to_le_bytes());
    d[32..32 + h.name.len()].copy_from_slice(h.name.as_bytes());
    d
}

fn decode(d: &[u8]) -> Result<Handle<'_>, ImportError> {
    if d.len() != DESCRIPTOR_LEN {
        return Err(malformed(format!("expected {DESCRIPTOR_LEN} bytes, got {}", d.len())));
    }
    if d[..4] != DESCRIPTOR_MAGIC {
        return Err(malformed("not a fake-device descriptor"));
    }
    if d[4] != DESCRIPTOR_VERSION {
        return Err(malformed(format!("unknown version {}", d[4])));
    }
    let name_len = usize::from(d[5]);
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(malformed(format!("pool name length {name_len}")));
    }
    if d[6..8] != [0, 0] || d[12..16] != [0; 4] || d[32 + name_len..].iter().any(|b| *b != 0) {
        return Err(malformed("reserved bytes are not zero"));
    }
    let name = std::str::from_utf8(&d[32..32 + name_len])
        .ok()
        .filter(|n| valid_pool_name(n))
        .ok_or_else(|| malformed("invalid pool name"))?;
    let u32_at = |at: usize| u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[at..at + 8]);
        u64::from_le_bytes(b)
    };
    Ok(Handle { name, index: u32_at(8), generation: u64_at(16), len: u64_at(24) })
}

/// The creator's view of its pool: the mapping, and which blocks are where.
#[derive(Debug)]
struct Pool {
    map: Arc<Mapping>,
    path: PathBuf,
    /// The pool file, open for as long as the pool exists: it carries the lock
    /// that tells other processes the pool is alive.
    _file: File,
    alloc: Mutex<Allocator>,
}

/// Bookkeeping only the creator keeps (other processes only free blocks).
#[derive(Debug)]
struct Allocator {
    /// Free ranges of the data area, `(offset, len)`, sorted and coalesced.
    free: Vec<(u64, u64)>,
    /// Records without memory.
    unused: Vec<u32>,
    /// Idle records with memory, by size class.
    idle: Vec<Vec<u32>>,
    /// Records lent out: being written, or exported and held by readers.
    lent: Vec<u32>,
    /// Size class of each record that has memory.
    class: Vec<u32>,
}

impl Allocator {
    fn take_range(&mut self, len: u64) -> Option<u64> {
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (offset, l) = self.free[i];
        if l == len {
            self.free.remove(i);
        } else {
            self.free[i] = (offset + len, l - len);
        }
        Some(offset)
    }

    fn give_range(&mut self, offset: u64, len: u64) {
        let i = self.free.partition_point(|&(o, _)| o < offset);
        self.free.insert(i, (offset, len));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, Allocator> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Size class of a block of `len` bytes.
    fn class_of(&self, len: usize) -> u32 {
        let top = self.map.capacity.next_power_of_two().trailing_zeros();
        (len as u64).next_power_of_two().trailing_zeros().clamp(MIN_CLASS, top.max(MIN_CLASS))
    }

    /// Bytes of the data area a block of `class` occupies.
    fn slot_len(&self, class: u32) -> u64 {
        (1u64 << class).min(self.map.capacity)
    }

    /// Moves lent blocks that readers (of any process) have freed to their class.
    fn reap(&self, a: &mut Allocator) {
        let map = &self.map;
        let Allocator { lent, idle, class, .. } = a;
        lent.retain(|&i| {
            if map.record(i).state.load(Ordering::Acquire) == IDLE {
                idle[class[i as usize] as usize].push(i);
                false
            } else {
                true
            }
        });
    }

    fn stats(&self, a: &Allocator) -> BackendStats {
        let bytes = a.lent.iter().map(|&i| self.map.record(i).slot.load(Ordering::Relaxed)).sum::<u64>();
        BackendStats { blocks_in_use: a.lent.len(), bytes_in_use: bytes as usize }
    }

    /// Gives the memory of every idle block back to the data area.
    fn trim(&self, a: &mut Allocator) {
        let idle: Vec<u32> = a.idle.iter_mut().flat_map(std::mem::take).collect();
        for i in idle {
            let rec = self.map.record(i);
            a.give_range(rec.offset.load(Ordering::Relaxed), rec.slot.load(Ordering::Relaxed));
            rec.slot.store(0, Ordering::Relaxed);
            rec.offset.store(0, Ordering::Relaxed);
            rec.state.store(UNUSED, Ordering::Release);
            a.unused.push(i);
        }
    }

    /// A record with fresh memory of `class`, trimming idle blocks if needed.
    fn carve(&self, a: &mut Allocator, class: u32) -> Option<u32> {
        let slot = self.slot_len(class);
        if a.unused.is_empty() || !a.free.iter().any(|&(_, l)| l >= slot) {
            self.trim(a);
        }
        let index = a.unused.pop()?;
        let Some(offset) = a.take_range(slot) else {
            a.unused.push(index);
            return None;
        };
        let rec = self.map.record(index);
        rec.offset.store(offset, Ordering::Relaxed);
        rec.slot.store(slot, Ordering::Relaxed);
        a.class[index as usize] = class;
        Some(index)
    }

    /// An idle block of `class`, or one with fresh memory.
    fn find(&self, a: &mut Allocator, class: u32) -> Option<u32> {
        a.idle[class as usize].pop().or_else(|| self.carve(a, class))
    }

    /// Releases the holds of readers whose process is gone, in every block
    /// lent and exported; returns how many. Freed blocks are left for `reap`.
    ///
    /// Runs under the allocator lock, so no block it looks at is lent again
    /// meanwhile; readers may release holds at the same time, and the
    /// compare-exchange on each slot decides who releases it.
    fn reclaim(&self, a: &Allocator) -> usize {
        // Liveness of each reader process met, so that each is asked once.
        let mut gone: Vec<(u32, bool)> = Vec::new();
        let mut is_gone = |pid: u32| match gone.iter().find(|(p, _)| *p == pid) {
            Some(&(_, g)) => g,
            None => {
                let g = process_gone(pid);
                gone.push((pid, g));
                g
            }
        };
        let mut released = 0;
        for &index in &a.lent {
            let rec = self.map.record(index);
            if rec.state.load(Ordering::Acquire) != EXPORTED {
                continue;
            }
            for (slot, value) in rec.readers.iter().enumerate() {
                let mut seen = value.load(Ordering::Acquire);
                // Retried while the slot changes under us (its reader importing
                // the hold) and still belongs to a dead reader.
                while seen != 0 && is_gone(slot_pid(seen)) {
                    if release_slot(&self.map, index, slot, seen) {
                        released += 1;
                        break;
                    }
                    seen = value.load(Ordering::Acquire);
                }
            }
        }
        released
    }

    /// Lends a block of `len` bytes, in state "being written". When the pool
    /// is full, the holds of dead readers are reclaimed and it is tried again.
    fn lend(&self, len: usize) -> Result<u32, AllocError> {
        let class = self.class_of(len);
        let mut a = self.lock();
        self.reap(&mut a);
        let mut found = self.find(&mut a, class);
        if found.is_none() && self.reclaim(&a) > 0 {
            self.reap(&mut a);
            found = self.find(&mut a, class);
        }
        let Some(index) = found else {
            let in_use = self.stats(&a).bytes_in_use;
            return Err(AllocError::Exhausted { backend: KIND, in_use, capacity: self.map.capacity as usize });
        };
        let rec = self.map.record(index);
        rec.len.store(len as u64, Ordering::Relaxed);
        rec.holds.store(0, Ordering::Relaxed);
        rec.generation.store(self.map.next_generation(), Ordering::Relaxed);
        rec.state.store(WRITING, Ordering::Release);
        a.lent.push(index);
        Ok(index)
    }
}

/// The `fake-device` backend: a pool of simulated device memory.
///
/// ```
/// use std::sync::Arc;
/// use freight_backend::{Backend, FakeDeviceBackend, Frame, HeapFrame};
///
/// let device = FakeDeviceBackend::new(1 << 20).unwrap();
/// let mut block = device.allocate(5, None).unwrap();
/// assert!(block.host_mut().is_none()); // device memory: no in-place CPU writes
/// block.write_from_host(0, b"hello").unwrap();
/// let descriptor = device.export(block, &[std::process::id()]).unwrap();
///
/// // The reader's side: the frame does not carry the bytes.
/// let frame: Frame = Arc::new(HeapFrame(Vec::new()));
/// let buffer = device.import(&frame, descriptor.as_bytes()).unwrap();
/// assert!(buffer.host_bytes().is_none());
/// let mut out = [0u8; 5];
/// buffer.copy_to_host(&mut out).unwrap();
/// assert_eq!(&out, b"hello");
///
/// drop(buffer); // the last hold: the block returns to the pool
/// assert_eq!(device.stats().blocks_in_use, 0);
/// ```
pub struct FakeDeviceBackend {
    pool: Arc<Pool>,
    /// Pools opened to import from, by name (this backend's own pool included).
    opened: Mutex<HashMap<String, Arc<Mapping>>>,
}

impl fmt::Debug for FakeDeviceBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeDeviceBackend")
            .field("pool", &self.pool.path)
            .field("capacity", &self.pool.map.capacity)
            .field("records", &self.pool.map.records)
            .finish()
    }
}

impl FakeDeviceBackend {
    /// Block records of a pool made by [`FakeDeviceBackend::new`]: at most this
    /// many blocks are in use or idle at once.
    pub const DEFAULT_MAX_BLOCKS: u32 = 1024;

    /// Creates a pool of `capacity` bytes of "device memory" with
    /// [`DEFAULT_MAX_BLOCKS`](Self::DEFAULT_MAX_BLOCKS) block records.
    pub fn new(capacity: usize) -> Result<Self, AllocError> {
        Self::with_max_blocks(capacity, Self::DEFAULT_MAX_BLOCKS)
    }

    /// Creates a pool of `capacity` bytes with room for `max_blocks` blocks.
    pub fn with_max_blocks(capacity: usize, max_blocks: u32) -> Result<Self, AllocError> {
        if capacity == 0 || max_blocks == 0 {
            return Err(system("a pool needs a positive capacity and block count"));
        }
        let meta_len = HEADER_LEN + max_blocks as usize * RECORD_LEN;
        let data_offset = meta_len.div_ceil(PAGE) * PAGE;
        let file_len = data_offset
            .checked_add(capacity)
            .filter(|l| *l <= isize::MAX as usize)
            .ok_or_else(|| system(format!("a pool of {capacity} bytes is too large")))?;
        let (name, path, file) = create_pool_file()?;
        let init = || -> Result<Mapping, String> {
            file.set_len(file_len as u64).map_err(|e| format!("sizing {}: {e}", path.display()))?;
            let map = MmapRaw::map_raw(&file).map_err(|e| format!("mapping {}: {e}", path.display()))?;
            let mut m = Mapping::new(name.clone(), map)?;
            m.meta_len = meta_len;
            m.records = max_blocks;
            m.capacity = capacity as u64;
            m.data_offset = data_offset;
            m.atomic_u32(H_VERSION).store(POOL_VERSION, Ordering::Relaxed);
            m.atomic_u32(H_RECORDS).store(max_blocks, Ordering::Relaxed);
            m.atomic_u64(H_CAPACITY).store(capacity as u64, Ordering::Relaxed);
            m.atomic_u64(H_DATA_OFFSET).store(data_offset as u64, Ordering::Relaxed);
            m.atomic_u64(H_NEXT_GENERATION).store(1, Ordering::Relaxed);
            m.atomic_u64(H_MAGIC).store(POOL_MAGIC, Ordering::Release);
            Ok(m)
        };
        let map = match init() {
            Ok(m) => Arc::new(m),
            Err(reason) => {
                let _ = std::fs::remove_file(&path);
                return Err(system(reason));
            }
        };
        let alloc = Allocator {
            free: vec![(0, capacity as u64)],
            unused: (0..max_blocks).rev().collect(),
            idle: vec![Vec::new(); 64],
            lent: Vec::new(),
            class: vec![0; max_blocks as usize],
        };
        let opened = Mutex::new(HashMap::from([(name, map.clone())]));
        let pool = Pool { map, path, _file: file, alloc: Mutex::new(alloc) };
        Ok(FakeDeviceBackend { pool: Arc::new(pool), opened })
    }

    /// Bytes of "device memory" in the pool.
    pub fn capacity(&self) -> usize {
        self.pool.map.capacity as usize
    }

    /// The pool's name, as descriptors carry it.
    pub fn pool_name(&self) -> &str {
        &self.pool.map.name
    }

    /// The pool's shared-memory file.
    pub fn pool_path(&self) -> &Path {
        &self.pool.path
    }

    /// The mapping of pool `name`, opened (and cached) on first use.
    fn mapping(&self, name: &str) -> Result<Arc<Mapping>, ImportError> {
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = opened.get(name) {
            return Ok(m.clone());
        }
        let m = Arc::new(Mapping::open(name).map_err(unreachable)?);
        opened.insert(name.to_owned(), m.clone());
        Ok(m)
    }

    /// Imports a block as process `pid`: claims one of the holds recorded for it.
    fn import_as(&self, descriptor: &[u8], pid: u32) -> Result<FakeDeviceStorage, ImportError> {
        let r = self.resolve(descriptor)?;
        let held = reader_slot(pid, r.generation);
        let claimed = held | SLOT_IMPORTED;
        // Claiming a slot of this generation shows the block is still at it (a
        // freed block has no occupied slot, and the generation a slot keeps
        // comes round again only after 2^30 allocations), so what `resolve`
        // read of the block still holds, and stays so while we hold it.
        let Some(slot) = claim_slot(&r.map, r.index, held, claimed) else {
            return Err(no_hold(&r, pid));
        };
        Ok(FakeDeviceStorage { map: r.map, index: r.index, slot, claimed, len: r.len, offset: r.offset })
    }

    /// Checks every field of a descriptor against the pool it names.
    fn resolve(&self, descriptor: &[u8]) -> Result<Resolved, ImportError> {
        let h = decode(descriptor)?;
        let map = self.mapping(h.name)?;
        if h.index >= map.records {
            return Err(malformed(format!("block {} of a pool of {} blocks", h.index, map.records)));
        }
        let rec = map.record(h.index);
        let state = rec.state.load(Ordering::Acquire);
        let found = rec.generation.load(Ordering::Acquire);
        let stale = ImportError::Stale { backend: KIND, block: h.index, expected: h.generation, found };
        if found != h.generation || state != EXPORTED || rec.holds.load(Ordering::Acquire) == 0 {
            return Err(stale);
        }
        let len = rec.len.load(Ordering::Relaxed);
        if len != h.len {
            return Err(malformed(format!("length {} but block {} holds {len} bytes", h.len, h.index)));
        }
        let offset = rec.offset.load(Ordering::Relaxed);
        let slot = rec.slot.load(Ordering::Relaxed);
        let fits = len <= slot && offset.checked_add(slot).is_some_and(|e| e <= map.capacity);
        if !fits {
            return Err(unreachable(format!("block {} lies outside the pool's data area", h.index)));
        }
        Ok(Resolved { map, index: h.index, generation: h.generation, len: len as usize, offset })
    }
}

impl Drop for FakeDeviceBackend {
    /// Removes the pool file; processes that mapped it keep their mappings.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pool.path);
    }
}

/// The uid and the creator's pid in a valid pool name.
fn pool_name_ids(name: &str) -> Option<(u32, u32)> {
    let mut parts = name.strip_prefix(NAME_PREFIX)?.split('-');
    let uid = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((uid, pid))
}

/// Takes the exclusive lock of a pool file without waiting: `Ok(false)` when
/// another open file (its creator's) holds it, an error when the file system
/// has no locks.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock only acts on the descriptor, which `file` keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether `path` still names the file that `meta` describes.
fn still_names(path: &Path, meta: &std::fs::Metadata) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}

/// Removes the pool files in `dir` that processes of this user left when they
/// died without dropping their backend: a pool name with our uid, a regular
/// file that we own, a creator (the pid in the name) that is gone, and a lock
/// that nobody holds (a creator in another pid namespace holds it). Returns
/// how many were removed. Errors only leave a file in place.
fn remove_dead_pools(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let uid = effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| valid_pool_name(n)) else {
            continue;
        };
        if !pool_name_ids(name).is_some_and(|(owner, creator)| owner == uid && process_gone(creator)) {
            continue;
        }
        let path = entry.path();
        // Not following a link, nor waiting on a FIFO that bears a pool name.
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path);
        let Ok(file) = opened else {
            continue;
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        // Unlink only the file that was checked, not one that replaced it since.
        if meta.file_type().is_file()
            && meta.uid() == uid
            && matches!(try_lock(&file), Ok(true))
            && still_names(&path, &meta)
        {
            removed += usize::from(std::fs::remove_file(&path).is_ok());
        }
    }
    removed
}

/// Creates a new pool file, owner read-write only, and takes its lock; first
/// removes the pool files of dead processes.
fn create_pool_file() -> Result<(String, PathBuf, File), AllocError> {
    let dir = pool_dir();
    remove_dead_pools(&dir);
    let mut last_error = None;
    for attempt in 0u64..8 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(attempt);
        hasher
            .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let name = format!("{NAME_PREFIX}{}-{}-{:016x}", effective_uid(), std::process::id(), hasher.finish());
        debug_assert!(valid_pool_name(&name), "{name}");
        let path = dir.join(&name);
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path);
        match opened {
            Ok(file) => {
                // The umask may have cleared bits of 0600; set them exactly.
                if let Err(e) = file.set_permissions(Permissions::from_mode(0o600)) {
                    let _ = std::fs::remove_file(&path);
                    return Err(system(format!("setting the mode of {}: {e}", path.display())));
                }
                // The lock tells `remove_dead_pools` of other processes that the
                // pool is alive (on a file system without locks, pools of dead
                // processes are never removed). Until it is taken only our pid,
                // which is alive, does: a process that sees our pid as gone (from
                // another pid namespace) may be removing the file. Then another
                // name is tried.
                let contended = matches!(try_lock(&file), Ok(false));
                if !contended && file.metadata().is_ok_and(|meta| still_names(&path, &meta)) {
                    return Ok((name, path, file));
                }
                let _ = std::fs::remove_file(&path);
                last_error = Some(std::io::Error::other("the new file was removed by another process"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(system(format!("creating {}: {e}", path.display()))),
        }
    }
    Err(system(format!("no unused pool name in {}: {last_error:?}", dir.display())))
}

/// A descriptor checked against the pool it names.
struct Resolved {
    map: Arc<Mapping>,
    index: u32,
    generation: u64,
    len: usize,
    offset: u64,
}

/// A block being written by its creator.
#[derive(Debug)]
struct FakeDeviceBlock {
    pool: Arc<Pool>,
    index: u32,
    len: usize,
    offset: u64,
    exported: bool,
}

impl WritableBlock for FakeDeviceBlock {
    fn len(&self) -> usize {
        self.len
    }

    fn host_mut(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
        None
    }

    fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), WriteError> {
        if offset.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return Err(WriteError { offset, len: src.len(), block_len: self.len });
        }
        self.pool.map.copy_in(self.offset + offset as u64, src);
        Ok(())
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl Drop for FakeDeviceBlock {
    /// A block dropped before export goes back to the pool.
    fn drop(&mut self) {
        if !self.exported {
            free_block(&self.pool.map, self.index);
        }
    }
}

/// A reader's hold on an exported block: the reader slot it claimed, and
/// the value it left there.
#[derive(Debug)]
struct FakeDeviceStorage {
    map: Arc<Mapping>,
    index: u32,
    slot: usize,
    claimed: u64,
    len: usize,
    offset: u64,
}

impl BufferStorage for FakeDeviceStorage {
    fn backend(&self) -> BackendKind {
        KIND
    }

    fn len(&self) -> usize {
        self.len
    }

    fn host_bytes(&self) -> Option<&[u8]> {
        None
    }

    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), BufferError> {
        if dst.len() != self.len {
            return Err(BufferError::LengthMismatch { len: self.len, dst: dst.len() });
        }
        self.map.copy_out(self.offset, dst);
        Ok(())
    }
}

impl Drop for FakeDeviceStorage {
    /// Gives the hold back, unless the creator reclaimed it first (it took
    /// this process for dead).
    fn drop(&mut self) {
        release_slot(&self.map, self.index, self.slot, self.claimed);
    }
}

impl Backend for FakeDeviceBackend {
    fn kind(&self) -> BackendKind {
        KIND
    }

    fn in_frame(&self) -> bool {
        false
    }

    fn max_block_len(&self) -> usize {
        self.capacity()
    }

    fn allocate(&self, len: usize, _slot: Option<FrameSlot>) -> Result<BlockMut, AllocError> {
        if len > self.capacity() {
            return Err(AllocError::TooLarge { backend: KIND, len, max: self.capacity() });
        }
        let index = self.pool.lend(len)?;
        let offset = self.pool.map.record(index).offset.load(Ordering::Relaxed);
        Ok(Box::new(FakeDeviceBlock { pool: self.pool.clone(), index, len, offset, exported: false }))
    }

    fn export(&self, block: BlockMut, readers: &[u32]) -> Result<Descriptor, ExportError> {
        let mut block = block.into_any().downcast::<FakeDeviceBlock>().map_err(|_| ExportError::ForeignBlock)?;
        if !Arc::ptr_eq(&block.pool, &self.pool) {
            return Err(ExportError::ForeignBlock);
        }
        if readers.len() > READER_SLOTS {
            // Dropping the unexported block returns it to the pool.
            return Err(ExportError::TooManyReaders { backend: KIND, readers: readers.len(), max: READER_SLOTS });
        }
        let map = &self.pool.map;
        let rec = map.record(block.index);
        let generation = rec.generation.load(Ordering::Relaxed);
        let handle = Handle { name: &map.name, index: block.index, generation, len: block.len as u64 };
        let descriptor = Descriptor::from_slice(&encode(&handle))?;
        block.exported = true;
        if readers.is_empty() {
            free_block(map, block.index);
        } else {
            // Every slot is empty: nobody can reach a block being written. The
            // release store of the state publishes the slots with it.
            let mut pids = readers.iter();
            for slot in rec.readers {
                slot.store(pids.next().map_or(0, |&pid| reader_slot(pid, generation)), Ordering::Relaxed);
            }
            rec.holds.store(readers.len() as u32, Ordering::Relaxed);
            rec.state.store(EXPORTED, Ordering::Release);
        }
        Ok(descriptor)
    }

    fn import(&self, _frame: &Frame, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError> {
        Ok(Arc::new(self.import_as(descriptor, std::process::id())?))
    }

    fn release_unimported(&self, descriptor: &[u8], reader: u32) -> Result<(), ImportError> {
        let r = self.resolve(descriptor)?;
        match claim_slot(&r.map, r.index, reader_slot(reader, r.generation), 0) {
            Some(_) => {
                count_off_hold(&r.map, r.index);
                Ok(())
            }
            None => Err(no_hold(&r, reader)),
        }
    }

    fn reclaim_dead_readers(&self) -> usize {
        let a = self.pool.lock();
        self.pool.reclaim(&a)
    }

    fn stats(&self) -> BackendStats {
        let mut a = self.pool.lock();
        self.pool.reclaim(&a);
        self.pool.reap(&mut a);
        self.pool.stats(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_are_checked_strictly() {
        assert!(valid_pool_name("freight-fakedev-1000-42-0123456789abcdef"));
        for bad in [
            "",
            "freight-fakedev-",
            "freight-fakedev-1000-42-0123456789abcde",
            "freight-fakedev-1000-42-0123456789ABCDEF",
            "freight-fakedev-1000-42-0123456789abcdef0",
            "freight-fakedev-1000/42-0123456789abcdef",
            "freight-fakedev-..-42-0123456789abcdef",
            "freight-fakedev-1000-42-0123456789abcdef/..",
            "other-1000-42-0123456789abcdef",
            "../freight-fakedev-1000-42-0123456789abcdef",
            "freight-fakedev-1000-42-13-0123456789abcdef",
            "freight-fakedev-12345678901-42-0123456789abcdef",
        ] {
            assert!(!valid_pool_name(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn descriptors_round_trip() {
        let name = "freight-fakedev-1000-42-0123456789abcdef";
        let d = encode(&Handle { name, index: 7, generation: 1 << 40, len: 12345 });
        assert_eq!(d.len(), DESCRIPTOR_LEN);
        let h = decode(&d).unwrap();
        assert_eq!((h.name, h.index, h.generation, h.len), (name, 7, 1 << 40, 12345));
    }

    #[test]
    fn free_ranges_coalesce() {
        let mut a = Allocator { free: vec![(0, 100)], unused: vec![], idle: vec![], lent: vec![], class: vec![] };
        let x = a.take_range(10).unwrap();
        let y = a.take_range(20).unwrap();
        let z = a.take_range(30).unwrap();
        assert_eq!((x, y, z), (0, 10, 30));
        assert_eq!(a.take_range(41), None);
        a.give_range(x, 10);
        a.give_range(z, 30);
        assert_eq!(a.free, vec![(0, 10), (30, 70)]);
        a.give_range(y, 20);
        assert_eq!(a.free, vec![(0, 100)]);
    }

    #[test]
    fn size_classes_are_powers_of_two_capped_at_capacity() {
        let d = FakeDeviceBackend::new(3000).unwrap();
        assert_eq!(d.pool.slot_len(d.pool.class_of(0)), 64);
        assert_eq!(d.pool.slot_len(d.pool.class_of(65)), 128);
        assert_eq!(d.pool.slot_len(d.pool.class_of(2048)), 2048);
        assert_eq!(d.pool.slot_len(d.pool.class_of(2049)), 3000);
        assert_eq!(d.pool.slot_len(d.pool.class_of(3000)), 3000);
    }

    #[test]
    fn idle_blocks_are_trimmed_for_another_class() {
        let d = FakeDeviceBackend::new(4096).unwrap();
        let small: Vec<BlockMut> = (0..4).map(|_| d.allocate(1000, None).unwrap()).collect();
        assert!(matches!(d.allocate(1, None), Err(AllocError::Exhausted { .. })));
        drop(small);
        assert_eq!(d.stats(), BackendStats::default());
        // Four idle 1 KiB blocks fill the pool; a 4 KiB block needs them trimmed.
        let big = d.allocate(4096, None).unwrap();
        assert_eq!(d.stats().bytes_in_use, 4096);
        drop(big);
    }

    #[test]
    fn reader_slots_keep_pid_flags_and_generation() {
        let generation = (1 << 40) + 12345;
        let v = reader_slot(4_194_304, generation);
        assert_ne!(reader_slot(0, 0), 0, "a hold of any reader is an occupied slot");
        assert_eq!(slot_pid(v), 4_194_304);
        assert_eq!(slot_pid(v | SLOT_IMPORTED), 4_194_304);
        assert!(slot_of_generation(v, generation) && slot_of_generation(v | SLOT_IMPORTED, generation));
        assert!(!slot_of_generation(v, generation + 1));
        assert!(slot_of_generation(v, generation + (1 << 30)), "the slot keeps 30 bits of the generation");
        assert!(!slot_of_generation(0, 0));
        assert_eq!(RECORD_LEN % 8, 0);
    }

    #[test]
    fn a_dropping_reader_and_the_reclaiming_creator_release_a_hold_once() {
        let d = FakeDeviceBackend::new(1 << 20).unwrap();
        let dead = crate::conformance::dead_pid();
        let frame: Frame = Arc::new(crate::HeapFrame(Vec::new()));
        for _ in 0..300 {
            let desc = d.export(d.allocate(64, None).unwrap(), &[dead, std::process::id()]).unwrap();
            // A buffer of the dead reader: as if imported before it died, or by
            // a process the creator takes for dead.
            let theirs = d.import_as(desc.as_bytes(), dead).unwrap();
            let index = theirs.index;
            let mine = d.import(&frame, desc.as_bytes()).unwrap();
            let start = std::sync::Barrier::new(2);
            let reclaimed = std::thread::scope(|s| {
                let creator = s.spawn(|| {
                    start.wait();
                    d.reclaim_dead_readers()
                });
                start.wait();
                drop(theirs);
                creator.join().unwrap()
            });
            assert!(reclaimed <= 1, "{reclaimed} holds reclaimed of one");
            assert_eq!(d.pool.map.record(index).holds.load(Ordering::Acquire), 1, "holds left to this process");
            assert_eq!(d.stats().blocks_in_use, 1, "the block was freed while this process holds it");
            drop(mine);
            assert_eq!(d.stats(), BackendStats::default());
        }
    }

    #[test]
    fn pools_of_dead_processes_are_removed_and_no_others() {
        let dir = std::env::temp_dir().join(format!("freight-fakedev-cleanup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let uid = effective_uid();
        let dead = crate::conformance::dead_pid();
        let pool = |uid: u32, pid: u32, n: u64| {
            let path = dir.join(format!("{NAME_PREFIX}{uid}-{pid}-{n:016x}"));
            std::fs::write(&path, b"pool").unwrap();
            path
        };
        let orphan = pool(uid, dead, 1);
        let living = pool(uid, std::process::id(), 2);
        let locked = pool(uid, dead, 3); // its creator lives in another pid namespace
        let lock = File::open(&locked).unwrap();
        assert!(try_lock(&lock).unwrap());
        let foreign = pool(uid.wrapping_add(1), dead, 4);
        let other = dir.join(format!("{NAME_PREFIX}{uid}-{dead}-not-a-pool"));
        std::fs::write(&other, b"").unwrap();
        assert_eq!(remove_dead_pools(&dir), 1);
        assert!(!orphan.exists(), "the pool of a dead process is still there");
        for kept in [&living, &locked, &foreign, &other] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        drop(lock);
        assert_eq!(remove_dead_pools(&dir), 1, "the pool whose lock was given up");
        assert!(!locked.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn record_table_exhaustion_is_reported() {
        let d = FakeDeviceBackend::with_max_blocks(1 << 20, 2).unwrap();
        let _a = d.allocate(1, None).unwrap();
        let _b = d.allocate(1, None).unwrap();
        assert!(matches!(d.allocate(1, None), Err(AllocError::Exhausted { .. })));
    }
}
