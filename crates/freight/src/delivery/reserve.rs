//! The tmpfs pages behind a loan, allocated before anything writes them.
//!
//! iceoryx2 sizes a publisher's data segment for every sample it may ever have out
//! (queues, held samples, history, loans) and creates it sparse: `/dev/shm` is a tmpfs,
//! which allocates a page when it is first written. Where the tmpfs is smaller than what
//! gets written — Docker gives a container 64 MB — the write that finds no page left
//! gets `SIGBUS` and the process dies. So before a loan is handed out, its range of the
//! segment file is allocated (`fallocate`): no room is `ENOSPC`, an error of the loan,
//! never a signal. A range once allocated stays so (iceoryx2 reuses its chunks, and the
//! tmpfs keeps a file's pages until it is removed), so a publisher in its steady state
//! makes no system call here.
//!
//! iceoryx2 writes a sample's header itself, at the loan, in the chunk's first page.
//! Once `/dev/shm` has had less than [`SLACK`] free after a reservation, every loan first
//! checks that it still has: the header's page never finds the tmpfs full (unless
//! another process fills it in between).

use std::fs::File;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use freight_backend::{maps, os};

use crate::sync::lock;

/// Free space `/dev/shm` keeps for the pages iceoryx2 writes itself.
const SLACK: u64 = 1 << 20;
/// Segments remembered per publisher.
const MAX_SEGMENTS: usize = 64;

/// A loan's pages could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoRoom {
    /// Bytes the loan needed allocated.
    pub(crate) needed: u64,
    /// Bytes free on the file system of the segment (`/dev/shm`), if known.
    pub(crate) free: Option<u64>,
    /// Its size, if known.
    pub(crate) size: Option<u64>,
}

/// One mapped segment file of a publisher.
struct Segment {
    /// The mapping's addresses in this process.
    mapped: Range<usize>,
    /// Offset of the mapping in the file.
    offset: u64,
    /// `None` where the file cannot be reserved in (not a tmpfs, or not openable): its
    /// pages are left as they are.
    file: Option<File>,
    /// File ranges already allocated, sorted and disjoint.
    reserved: Vec<Range<u64>>,
}

/// The reservations of one publisher's loans.
#[derive(Default)]
pub(crate) struct Reservations {
    segments: Mutex<Segments>,
    /// Set once the file system had less than [`SLACK`] free after a reservation.
    tight: AtomicBool,
}

#[derive(Default)]
struct Segments {
    list: Vec<Segment>,
    /// The largest loan so far: a larger one may come from a new segment, mapped where
    /// an old one was, so the list is read again from `/proc/self/maps`.
    largest: usize,
}

impl Reservations {
    /// Before a loan of `len` bytes: whether `/dev/shm` still has [`SLACK`] free,
    /// once it was found tight (a statvfs call then; nothing before).
    pub(crate) fn check_room(&self, len: usize) -> Result<(), NoRoom> {
        if !self.tight.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (free, size) = free_and_total(os::space(std::path::Path::new("/dev/shm")));
        match free {
            Some(f) if f < SLACK => Err(NoRoom { needed: len as u64, free, size }),
            _ => Ok(()),
        }
    }

    /// Allocates the file pages behind `len` bytes at `ptr`, a loan of a mapped segment.
    pub(crate) fn reserve(&self, ptr: *const u8, len: usize) -> Result<(), NoRoom> {
        if len == 0 {
            return Ok(());
        }
        let addr = ptr as usize;
        let mut segments = lock(&self.segments);
        if len > segments.largest {
            segments.largest = len;
            segments.list.clear();
        }
        let at = match segments.list.iter().position(|s| s.mapped.contains(&addr)) {
            Some(i) => i,
            None => {
                // A publisher maps a handful of segments; more means stale entries.
                if segments.list.len() >= MAX_SEGMENTS {
                    segments.list.clear();
                }
                segments.list.push(Segment::of(addr));
                segments.list.len() - 1
            }
        };
        let segment = &mut segments.list[at];
        let Some(file) = &segment.file else { return Ok(()) };
        let start = segment.offset + (addr - segment.mapped.start) as u64;
        let range = start..start + len as u64;
        if segment.reserved.iter().any(|r| r.start <= range.start && range.end <= r.end) {
            return Ok(());
        }
        match os::allocate(file, range.start, len as u64) {
            Ok(true) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                self.tight.store(true, Ordering::Relaxed);
                let (free, size) = free_and_total(os::space_of(file));
                return Err(NoRoom { needed: len as u64, free, size });
            }
            // A file system that does not allocate ahead, or another refusal: its pages
            // stay as they are, as before freight reserved them.
            Ok(false) | Err(_) => {
                segment.file = None;
                return Ok(());
            }
        }
        insert(&mut segment.reserved, range);
        if os::space_of(file).is_ok_and(|s| s.free < SLACK) {
            self.tight.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Segment {
    /// The segment that maps `addr`, read from `/proc/self/maps`. A mapping that is not
    /// a shared file (or one this process cannot open) has no pages to reserve.
    fn of(addr: usize) -> Segment {
        match maps::find_own(addr) {
            Ok(Some(e)) => {
                let file = (e.shared && e.writable && e.path.starts_with('/'))
                    .then(|| std::fs::OpenOptions::new().read(true).write(true).open(&e.path).ok())
                    .flatten();
                Segment { mapped: e.start..e.end, offset: e.offset, file, reserved: Vec::new() }
            }
            // Unreadable maps: nothing is reserved for this address.
            _ => Segment { mapped: addr..addr + 1, offset: 0, file: None, reserved: Vec::new() },
        }
    }
}

/// Adds `range` to the sorted, disjoint `ranges`, merging what touches it.
fn insert(ranges: &mut Vec<Range<u64>>, mut range: Range<u64>) {
    ranges.retain(|r| {
        if r.end < range.start || range.end < r.start {
            return true;
        }
        range = range.start.min(r.start)..range.end.max(r.end);
        false
    });
    let at = ranges.partition_point(|r| r.start < range.start);
    ranges.insert(at, range);
}

/// Largest file [`allocate_file_at`] allocates: iceoryx2's dynamic configs are a few
/// pages, and an address that turned out to be in a data segment must not make the
/// whole segment resident.
const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Allocates every page of the small shared file mapped at `addr` (an iceoryx2
/// dynamic config), before a port is made that writes into it. iceoryx2 creates
/// the file sparse and writes a new port into one of its slots, and a slot's page
/// the tmpfs never allocated gets `SIGBUS` once `/dev/shm` is full. Only a full
/// file system is an error: where the file cannot be found or allocated for
/// another reason (not a tmpfs, no `/proc`), the port is made as it would be
/// without this precaution.
pub(crate) fn allocate_file_at(addr: usize) -> Result<(), NoRoom> {
    let Ok(Some(entry)) = maps::find_own(addr) else { return Ok(()) };
    if !(entry.shared && entry.path.starts_with('/')) {
        return Ok(());
    }
    let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(&entry.path) else { return Ok(()) };
    let len = match file.metadata() {
        Ok(m) if m.len() <= MAX_CONFIG_FILE => m.len(),
        _ => return Ok(()),
    };
    match os::allocate(&file, 0, len) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
            let (free, size) = free_and_total(os::space_of(&file));
            Err(NoRoom { needed: len, free, size })
        }
        _ => Ok(()),
    }
}

/// Free and total bytes, each `None` when unknown.
fn free_and_total(space: std::io::Result<os::Space>) -> (Option<u64>, Option<u64>) {
    space.map_or((None, None), |s| (Some(s.free), Some(s.total)))
}

/// What a publisher's QoS asks of `/dev/shm`, said before any loan fails: `None`
/// when frames of `frame` bytes fit `shm_size` however far its subscriptions fall
/// behind, else the warning. Each of `readers` subscriptions may have `depth`
/// frames queued (a slow one, a stopped one), the publisher keeps `history` for
/// late joiners and has one loan out; what subscriptions hold after taking comes
/// on top. `spills`: the publisher sends what finds no room over DDS (`spill.rs`)
/// rather than refuse the loan.
pub(crate) fn foresight(
    frame: usize,
    depth: usize,
    readers: usize,
    history: usize,
    shm_size: u64,
    spills: bool,
) -> Option<String> {
    let frames = (depth as u64).saturating_mul(readers as u64).saturating_add(history as u64).saturating_add(1);
    let need = (frame as u64).saturating_mul(frames);
    if need <= shm_size {
        return None;
    }
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    // A size to suggest: what is needed, rounded up to 256 MiB.
    let suggest = need.div_ceil(256 << 20).saturating_mul(256);
    let then = if spills {
        "the frames that find no room go over DDS, a copy to each subscriber"
    } else {
        "loans will fail (SharedMemoryFull)"
    };
    Some(format!(
        "frames of {:.1} MiB, up to {depth} queued for each of {readers} subscription(s) and {history} kept for \
         late joiners, may take {:.1} MiB of /dev/shm, which holds {:.1} MiB: when subscriptions fall behind or \
         hold frames, {then}; give /dev/shm more (docker run --shm-size={suggest}m, or --ipc=host) or use a \
         smaller depth",
        mib(frame as u64),
        mib(need),
        mib(shm_size)
    ))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn foresight_warns_when_the_qos_asks_more_than_dev_shm_holds() {
        // The case: 4K bgra8 frames at depth 10 to one subscription, 64 MB.
        let frame = 3840 * 2160 * 4 + 200;
        let warning = foresight(frame, 10, 1, 1, 64 << 20, false).expect("a warning");
        assert!(warning.starts_with("frames of 31.6 MiB, up to 10 queued for each of 1 subscription(s)"), "{warning}");
        assert!(warning.contains("may take 379.7 MiB of /dev/shm, which holds 64.0 MiB"), "{warning}");
        assert!(warning.contains("--shm-size=512m"), "{warning}");
        assert!(warning.contains("loans will fail (SharedMemoryFull)"), "{warning}");
        let spilling = foresight(frame, 10, 1, 1, 64 << 20, true).expect("a warning");
        assert!(spilling.contains("hold frames, the frames that find no room go over DDS"), "{spilling}");
        // A desktop's /dev/shm (half the memory) holds it.
        assert_eq!(foresight(frame, 10, 1, 1, 12 << 30, false), None);
        // Small frames never warn; sizes near the limits do not overflow.
        assert_eq!(foresight(1 << 10, 16, 16, 1, 64 << 20, true), None);
        assert!(foresight(usize::MAX, usize::MAX, usize::MAX, usize::MAX, u64::MAX - 1, false).is_some());
    }

    #[test]
    fn reserved_ranges_merge_and_stay_sorted() {
        let mut r = Vec::new();
        insert(&mut r, 10..20);
        insert(&mut r, 40..50);
        insert(&mut r, 0..5);
        assert_eq!(r, [0..5, 10..20, 40..50]);
        insert(&mut r, 18..42);
        assert_eq!(r, [0..5, 10..50]);
        insert(&mut r, 5..10);
        assert_eq!(r, vec![0..50]);
    }

    #[test]
    fn a_loan_of_a_shared_file_mapping_is_reserved_once() {
        let dir = std::env::temp_dir().join(format!("freight-reserve-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&dir).unwrap();
        file.set_len(1 << 20).unwrap();
        // SAFETY: a fresh shared mapping of a file this test owns, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                1 << 20,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let r = Reservations::default();
        let ptr = base.cast::<u8>().wrapping_add(4096);
        r.reserve(ptr, 8192).unwrap();
        r.reserve(ptr, 4096).unwrap();
        let list = &lock(&r.segments).list;
        assert_eq!(list.len(), 1);
        // A tmpfs or ext4 reserves; anything else leaves the pages as they were.
        if list[0].file.is_some() {
            assert_eq!(list[0].reserved, vec![4096..12288]);
        }
        // SAFETY: mapped above with this length.
        unsafe { libc::munmap(base, 1 << 20) };
        let _ = std::fs::remove_file(&dir);
    }
}
