//! The device pool: the protocol that every backend with memory outside the
//! frame shares (`fake-device`, `cuda`), generic over the memory under its
//! blocks ([`PoolMemory`]).
//!
//! * **export a handle**: the writer's pool hands out blocks; exporting one
//!   yields a descriptor that names the pool, the block, its generation, the
//!   block's allocation, the device, and the handle bytes the memory needs to
//!   open it in another process. Never a host pointer;
//! * **import once and cache**: a reader maps the pool's records the first
//!   time a descriptor names the pool, and opens a block's memory once per
//!   allocation of the block (as `cuIpcOpenMemHandle` results are cached); a
//!   process importing from a pool of its own uses the block's memory directly;
//! * **holds per reader process**: `export(block, readers)` records one hold
//!   per entry of `readers` (a process id) in the block's reader slots. A
//!   reader's import claims one hold recorded for its own process, and
//!   dropping the buffer gives it back (once the memory says the reader's work
//!   on it is done); `release_unimported` gives back a hold the reader will not
//!   import; the last hold frees the block to its pool. A process that was not
//!   named cannot import ([`ImportError::NotAReader`]);
//! * **dead readers**: the creator releases the holds, imported or not, of
//!   readers whose process no longer exists ([`Backend::reclaim_dead_readers`](crate::Backend::reclaim_dead_readers),
//!   also run by `stats` and before `allocate` reports [`AllocError::Exhausted`]);
//! * **staleness by generation**: freeing a block bumps its generation, so a
//!   descriptor of a block that was freed (and perhaps reused) is refused with
//!   [`ImportError::Stale`];
//! * **devices by UUID**: a descriptor names the device its memory is on; a
//!   backend on another device refuses it with [`ImportError::Unreachable`]
//!   (the subscriber then takes host bytes);
//! * **bounded, and given back when idle**: blocks are carved up to the pool's
//!   capacity; a freed block is reused by the next allocation of its size
//!   class, and its memory is given back when nobody reused it for the idle
//!   time (1 s by default), checked by the next `allocate`, `stats` or
//!   `reclaim_dead_readers`;
//! * **dead pools**: creating a pool removes the pool files that processes of
//!   this user left behind when they died without dropping their backend: a
//!   living creator holds its file's `flock`, whatever its pid namespace.
//!
//! # Pool file layout
//!
//! The pool's records live in a shared-memory file
//! (`/dev/shm/<prefix><uid>-<pid>-<random>`, mode 0600). All integers
//! little-endian; every field of the header and of the block records is
//! accessed as an atomic, because other processes map the same file.
//!
//! ```text
//! header (64 bytes)
//!   0  u64  magic "FRFDPOOL"
//!   8  u32  layout version (4)
//!  12  u32  number of block records
//!  16  u64  capacity: bytes the pool may carve
//!  24  u64  offset of the data area in the file
//!  32  u64  next generation (a pool-wide counter)
//!  40  u8 × 16  the device's UUID
//!  56  u32  h: bytes of handle per block (a multiple of 8)
//!  60  u32  1 once the creator dropped the pool: readers close what they opened
//! block record i (248 + h bytes, at 64 + (248 + h) * i)
//!   0  u32  state: 0 unused, 1 idle, 2 being written, 3 exported, 4 idle and to be trimmed
//!   4  u32  holds: occupied reader slots, counted off after a slot is cleared
//!   8  u64  generation
//!  16  u64  length in bytes
//!  24  u64  location of the memory, as the memory names it (fake-device: offset in the data area)
//!  32  u64  bytes the block occupies (its size class)
//!  40  u64  allocation serial: changes whenever the block gets new memory
//!  48  u64  when the block was last freed (CLOCK_MONOTONIC, nanoseconds)
//!  56  u64 × 16  reader slots, one per hold: 0 when empty, else
//!                  bits  0..32  process id of the reader
//!                  bit  32      1 (occupied, so that no hold reads as 0)
//!                  bit  33      imported: a buffer in that process holds it
//!                  bits 34..64  low 30 bits of the generation it was exported at
//! 184  u64 × 8   opener slots, one per reader process that has the block's
//!                memory open (cached): pid, bit 32 set, low 30 bits of the
//!                allocation serial from bit 34
//! 248  u8 × h    the block's handle, as descriptors carry it
//! data area (memory kinds that keep the blocks in the file: capacity bytes,
//!            at a page-aligned offset; empty otherwise)
//! ```
//!
//! Generations and allocation serials come from the pool-wide counter, so no
//! two allocations (of any block) ever share one: a descriptor whose block
//! index is changed never names a live block.
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
//! # Opened blocks
//!
//! Device memory opened in another process must not be freed by its creator
//! while that process has it open (CUDA: "calling `cudaFree` on an exported
//! memory region before calling `cudaIpcCloseMemHandle` in the importing
//! context will result in undefined behavior"). So a reader that opens a
//! block records itself in an opener slot of the block first, and clears the
//! slot after it closed the block. The creator trims an idle block only when
//! no living process has it open; otherwise it marks the block "to be
//! trimmed" (state 4) and readers close their cached opening of it on their
//! next import from a pool of another process (or when their backend is
//! dropped, or their process ends). A reader that never imports again keeps
//! such a block's memory until it exits; the block stays reusable meanwhile.
//!
//! Dropping the pool is the same promise for every block at once: the creator
//! marks the pool closed in its header, so that readers forget all of its
//! blocks at their next import, and frees the memory of a block that a living
//! reader still has open only once that reader closed it or died (a thread of
//! the creator's process waits for that; should the creator exit first, its
//! memory goes with it, as the driver frees everything of a process).
//!
//! # Allocator
//!
//! Blocks are carved in power-of-two size classes (64 bytes and up, capped
//! at the capacity) while the bytes carved stay within the capacity. A freed
//! block stays with its class as an idle block and is reused by the next
//! allocation of that class; it is trimmed (its memory given back) once idle
//! for the pool's idle time, or at once when an allocation finds no room.
//! Only the creating backend allocates; any process may free (by dropping the
//! last hold), and the creator notices freed blocks by polling the records of
//! the blocks it lent.
//!
//! # Pools of dead processes
//!
//! The creator holds an exclusive `flock` on its pool file as long as the pool
//! exists. Creating a pool removes every file of the pool directory with a pool
//! name of its kind that carries this user's uid, owned by this user, whose
//! creator (the pid in the name) does not exist and whose lock nobody holds.

use std::any::Any;
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
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use freight_msg::{BufferError, DeviceView};
use memmap2::MmapRaw;

use crate::os::{monotonic_ns, process_gone};
use crate::{
    AllocError, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError, ImportError,
    WritableBlock, WriteError,
};

/// Longest pool name a descriptor may carry.
const MAX_NAME_LEN: usize = 64;

const POOL_MAGIC: u64 = u64::from_le_bytes(*b"FRFDPOOL");
const POOL_VERSION: u32 = 4;
const HEADER_LEN: usize = 64;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_RECORDS: usize = 12;
const H_CAPACITY: usize = 16;
const H_DATA_OFFSET: usize = 24;
const H_NEXT_GENERATION: usize = 32;
const H_DEVICE: usize = 40;
const H_HANDLE_LEN: usize = 56;
const H_CLOSED: usize = 60;

const R_STATE: usize = 0;
const R_HOLDS: usize = 4;
const R_GENERATION: usize = 8;
const R_LEN: usize = 16;
const R_LOCATION: usize = 24;
const R_SLOT: usize = 32;
const R_SERIAL: usize = 40;
const R_FREED_AT: usize = 48;
const R_READERS: usize = 56;
/// Reader slots of a block record: the most readers one export may name.
pub const READER_SLOTS: usize = 16;
const R_OPENERS: usize = R_READERS + 8 * READER_SLOTS;
/// Opener slots of a block record: the most reader processes that may have
/// one allocation of a block open at once.
const OPENER_SLOTS: usize = 8;
const R_HANDLE: usize = R_OPENERS + 8 * OPENER_SLOTS;

/// Set in every occupied reader or opener slot.
const SLOT_OCCUPIED: u64 = 1 << 32;
/// Set in a reader slot whose hold a buffer of the reader's process has imported.
const SLOT_IMPORTED: u64 = 1 << 33;
/// A slot keeps the generation (or serial) from here up (its low 30 bits).
const SLOT_GENERATION_SHIFT: u32 = 34;

const UNUSED: u32 = 0;
const IDLE: u32 = 1;
const WRITING: u32 = 2;
const EXPORTED: u32 = 3;
/// Idle, and the creator wants to give its memory back: openers should close it.
const TRIM_WANTED: u32 = 4;

const PAGE: usize = 4096;
/// Smallest size class: 2^6 = 64 bytes.
const MIN_CLASS: u32 = 6;

/// Bytes of a descriptor in front of the memory's handle bytes.
const DESCRIPTOR_HEAD: usize = 56 + MAX_NAME_LEN;
const DESCRIPTOR_VERSION: u8 = 2;

/// How long an idle block keeps its memory by default.
pub const DEFAULT_IDLE_TIME: Duration = Duration::from_secs(1);

/// The memory under the blocks of a device pool: what `fake-device` and
/// `cuda` differ in. The pool calls it to back a block with memory when the
/// block is carved (and drops the block to give the memory back), to write the
/// handle bytes of an export, and to open a block named by a descriptor.
pub(crate) trait PoolMemory: Send + Sync + Sized + 'static {
    /// The backend.
    const KIND: BackendKind;
    /// Prefix of the pool file names of this kind: `<prefix><uid>-<pid>-<hex>`.
    const NAME_PREFIX: &'static str;
    /// First bytes of every descriptor.
    const MAGIC: [u8; 4];
    /// Bytes of handle a descriptor carries for its block (a multiple of 8:
    /// records keep it as 8-byte atomics).
    const HANDLE_LEN: usize;
    /// Whether the blocks' memory is the data area of the pool file (so the
    /// file has `capacity` bytes of it).
    const DATA_IN_FILE: bool;
    /// Whether another backend of this kind in the same process reads a
    /// pool's blocks directly rather than opening them as a peer would (CUDA
    /// refuses to IPC-open memory of its own process).
    const SHARE_WITHIN_PROCESS: bool;

    /// The memory of one carved block, as its creator holds it. Dropping it
    /// gives the memory back.
    type Block: Send + Sync + 'static;
    /// A block as a reader reaches it.
    type View: BlockView;

    /// The UUID of the device the memory is on.
    fn device_uuid(&self) -> [u8; 16];

    /// Backs a block of `slot_len` bytes with memory; `Ok(None)` when there
    /// is no room (the pool then gives back idle blocks and asks again).
    /// Returns the block and its location (stored in the record).
    fn carve(&self, map: &Arc<Mapping>, slot_len: u64) -> Result<Option<(Self::Block, u64)>, String>;

    /// Copies `src` into the block at `offset` (checked to lie in the block).
    fn write(&self, map: &Mapping, block: &Self::Block, offset: usize, src: &[u8]) -> Result<(), String>;

    /// Where a device addresses the block, for its writer.
    fn block_device_view(&self, block: &Self::Block) -> Option<DeviceView>;

    /// Seals a written block for export: orders readers after the writer's
    /// work on `write_stream` (the legacy default stream when `None`).
    fn seal(&self, block: &Self::Block, write_stream: Option<u64>) -> Result<(), String>;

    /// Writes the handle bytes of `block` (`HANDLE_LEN` of them) that a
    /// descriptor carries.
    fn handle(&self, block: &Self::Block, out: &mut [u8]);

    /// A view of a block of a pool of this process.
    fn local_view(&self, map: &Arc<Mapping>, block: &Arc<Self::Block>) -> Self::View;

    /// Opens a block of another process's pool from the handle bytes of its
    /// descriptor (already checked against the record's allocation serial;
    /// the bytes themselves are the peer's and must be checked).
    fn open(&self, map: &Arc<Mapping>, location: u64, slot_len: u64, handle: &[u8]) -> Result<Self::View, String>;
}

/// A block as a reader reaches it. Dropping a view of another process's block
/// closes it.
pub(crate) trait BlockView: Send + Sync + 'static {
    /// Copies the first `dst.len()` bytes of the block to `dst`, after the
    /// writer's work on it.
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String>;
    /// Where this process's device addresses the block.
    fn device_view(&self) -> Option<DeviceView> {
        None
    }
    /// Orders work later submitted to `stream` after the writer's work.
    fn order_on_stream(&self, stream: u64) -> Result<(), String> {
        let _ = stream;
        Ok(())
    }
    /// Calls `give_back` once the reader's work on the block is done: work
    /// submitted to `stream` (the last stream the buffer was ordered on)
    /// before now. Must not block the calling thread on the device.
    fn release_after(&self, stream: Option<u64>, give_back: Box<dyn FnOnce() + Send>) {
        let _ = stream;
        give_back();
    }
}

/// How a pool is sized and when it gives idle memory back.
///
/// ```
/// use std::time::Duration;
/// use freight_backend::PoolOptions;
///
/// let options = PoolOptions::new(64 << 20).max_blocks(256).idle_time(Duration::from_millis(200));
/// assert_eq!(options.capacity, 64 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    /// Bytes the pool may have carved at once (in use or idle).
    pub capacity: usize,
    /// Block records: at most this many blocks are in use or idle at once.
    pub max_blocks: u32,
    /// How long a freed block keeps its memory for reuse before it is given back.
    pub idle_time: Duration,
}

impl PoolOptions {
    /// Block records by default.
    pub const DEFAULT_MAX_BLOCKS: u32 = 1024;

    /// A pool of `capacity` bytes, [`DEFAULT_MAX_BLOCKS`](Self::DEFAULT_MAX_BLOCKS)
    /// records, idle blocks given back after one second.
    pub fn new(capacity: usize) -> Self {
        PoolOptions { capacity, max_blocks: Self::DEFAULT_MAX_BLOCKS, idle_time: DEFAULT_IDLE_TIME }
    }

    /// With room for `n` blocks.
    pub fn max_blocks(self, n: u32) -> Self {
        PoolOptions { max_blocks: n, ..self }
    }

    /// Giving idle blocks back after `t`.
    pub fn idle_time(self, t: Duration) -> Self {
        PoolOptions { idle_time: t, ..self }
    }
}

/// Formats a UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn format_uuid(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// Directory of the pool files: `/dev/shm` where it exists, else the temporary directory.
fn pool_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether `name` is a pool name of `prefix`:
/// `<prefix><uid>-<pid>-<16 lowercase hex digits>`. Anything else (a path
/// separator, `..`, another prefix, a longer name) is refused.
fn valid_pool_name(prefix: &str, name: &str) -> bool {
    if name.len() > MAX_NAME_LEN {
        return false;
    }
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let decimal = |s: &str| (1..=10).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    parts.len() == 3 && decimal(parts[0]) && decimal(parts[1]) && hex(parts[2])
}

/// The uid and the creator's pid in a valid pool name of `prefix`.
fn pool_name_ids(prefix: &str, name: &str) -> Option<(u32, u32)> {
    let mut parts = name.strip_prefix(prefix)?.split('-');
    let uid = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((uid, pid))
}

/// The value of an unimported reader slot: the hold of process `pid` on the
/// export of generation `generation`. Opener slots use the same form with the
/// allocation serial.
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

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

fn unreachable<M: PoolMemory>(reason: impl Into<String>) -> ImportError {
    ImportError::Unreachable { backend: M::KIND, reason: reason.into() }
}

fn malformed<M: PoolMemory>(reason: impl Into<String>) -> ImportError {
    ImportError::Malformed { backend: M::KIND, reason: reason.into() }
}

pub(crate) fn system(backend: BackendKind, reason: impl Into<String>) -> AllocError {
    AllocError::System { backend, reason: reason.into() }
}

/// The atomics of one block record in a mapped pool.
struct Record<'a> {
    state: &'a AtomicU32,
    holds: &'a AtomicU32,
    generation: &'a AtomicU64,
    len: &'a AtomicU64,
    location: &'a AtomicU64,
    slot: &'a AtomicU64,
    serial: &'a AtomicU64,
    freed_at: &'a AtomicU64,
    /// One hold per occupied slot (see the module documentation).
    readers: &'a [AtomicU64],
    /// One per process that has the block's memory open.
    openers: &'a [AtomicU64],
    /// The block's handle, 8 bytes per atomic.
    handle: &'a [AtomicU64],
}

impl Record<'_> {
    /// Stores the handle of the block's memory.
    fn set_handle(&self, bytes: &[u8]) {
        for (word, chunk) in self.handle.iter().zip(bytes.chunks_exact(8)) {
            word.store(u64::from_le_bytes(chunk.try_into().expect("chunks of 8")), Ordering::Relaxed);
        }
    }

    /// Whether `bytes` are the block's handle.
    fn handle_is(&self, bytes: &[u8]) -> bool {
        bytes.len() == 8 * self.handle.len()
            && self
                .handle
                .iter()
                .zip(bytes.chunks_exact(8))
                .all(|(word, chunk)| word.load(Ordering::Acquire).to_le_bytes() == chunk)
    }
}

/// One pool file mapped into this process: the creator's, or one opened to import.
pub(crate) struct Mapping {
    name: String,
    map: MmapRaw,
    /// Bytes at the start of the map that hold atomics: the header and the records.
    meta_len: usize,
    records: u32,
    /// Bytes of a record: the fixed fields and the memory's handle.
    record_len: usize,
    capacity: u64,
    data_offset: usize,
    /// Bytes of the data area (0 for memory outside the file).
    data_len: u64,
    device: [u8; 16],
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
        Ok(Mapping {
            name,
            map,
            meta_len: HEADER_LEN,
            records: 0,
            record_len: R_HANDLE,
            capacity: 0,
            data_offset: 0,
            data_len: 0,
            device: [0; 16],
        })
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

    /// The device UUID, read from (or written to) the header as two atomics.
    /// Whether the creator dropped the pool.
    fn closed(&self) -> bool {
        self.atomic_u32(H_CLOSED).load(Ordering::Acquire) != 0
    }

    fn device_words(&self) -> [&AtomicU64; 2] {
        [self.atomic_u64(H_DEVICE), self.atomic_u64(H_DEVICE + 8)]
    }

    /// The record of block `index`; `index < self.records` (checked).
    fn record(&self, index: u32) -> Record<'_> {
        assert!(index < self.records, "block {index} out of the record table");
        let base = HEADER_LEN + index as usize * self.record_len;
        Record {
            state: self.atomic_u32(base + R_STATE),
            holds: self.atomic_u32(base + R_HOLDS),
            generation: self.atomic_u64(base + R_GENERATION),
            len: self.atomic_u64(base + R_LEN),
            location: self.atomic_u64(base + R_LOCATION),
            slot: self.atomic_u64(base + R_SLOT),
            serial: self.atomic_u64(base + R_SERIAL),
            freed_at: self.atomic_u64(base + R_FREED_AT),
            readers: self.atomic_u64s(base + R_READERS, READER_SLOTS),
            openers: self.atomic_u64s(base + R_OPENERS, OPENER_SLOTS),
            handle: self.atomic_u64s(base + R_HANDLE, (self.record_len - R_HANDLE) / 8),
        }
    }

    /// A generation (or allocation serial) no allocation of this pool has had.
    fn next_generation(&self) -> u64 {
        self.atomic_u64(H_NEXT_GENERATION).fetch_add(1, Ordering::AcqRel)
    }

    /// Start of `len` bytes at `offset` of the data area, after checking they lie in it.
    fn data_ptr(&self, offset: u64, len: usize) -> *mut u8 {
        let end = offset.checked_add(len as u64);
        assert!(
            end.is_some_and(|e| e <= self.data_len),
            "{len} bytes at {offset} overrun a data area of {} bytes",
            self.data_len
        );
        // `data_offset + data_len == map.len()` (checked when mapped), so this
        // stays inside the mapping; `wrapping_add` keeps the arithmetic safe.
        self.map.as_mut_ptr().wrapping_add(self.data_offset + offset as usize)
    }

    /// Whether `len` bytes at `offset` lie in the data area.
    pub(crate) fn data_holds(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|e| e <= self.data_len)
    }

    /// Copies `src` to the data area at `offset`.
    pub(crate) fn copy_in(&self, offset: u64, src: &[u8]) {
        let dst = self.data_ptr(offset, src.len());
        // SAFETY: `data_ptr` checked that the destination lies in the data area of
        // the live mapping. The data area is never referenced as a Rust slice, only
        // copied to and from, so no reference aliases it; `src` is our own memory
        // and cannot overlap the mapping's data area.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    }

    /// Copies the data area at `offset` to `dst`.
    pub(crate) fn copy_out(&self, offset: u64, dst: &mut [u8]) {
        let src = self.data_ptr(offset, dst.len());
        // SAFETY: as in `copy_in`, with source and destination exchanged.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    }

    /// Reads and checks the header of a pool mapped to import from it.
    fn open(name: &str, handle_len: usize) -> Result<Mapping, String> {
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
        if m.atomic_u32(H_HANDLE_LEN).load(Ordering::Acquire) as usize != handle_len {
            return Err(format!("{} keeps handles of another length", path.display()));
        }
        let record_len = R_HANDLE + handle_len;
        let meta_len = (records as usize).checked_mul(record_len).and_then(|r| r.checked_add(HEADER_LEN));
        let Some(meta_len) = meta_len else {
            return Err(format!("{} has an inconsistent header", path.display()));
        };
        let map_len = m.map.len() as u64;
        let consistent = data_offset.is_multiple_of(PAGE as u64)
            && data_offset >= meta_len as u64
            && data_offset <= map_len
            && capacity > 0;
        if !consistent {
            return Err(format!("{} has an inconsistent header", path.display()));
        }
        m.meta_len = meta_len;
        m.record_len = record_len;
        let [lo, hi] = m.device_words();
        let (lo, hi) = (lo.load(Ordering::Acquire), hi.load(Ordering::Acquire));
        m.device[..8].copy_from_slice(&lo.to_le_bytes());
        m.device[8..].copy_from_slice(&hi.to_le_bytes());
        m.records = records;
        m.capacity = capacity;
        m.data_offset = data_offset as usize;
        m.data_len = map_len - data_offset;
        Ok(m)
    }
}

/// Frees a block: a new generation makes its descriptors stale, then it is idle.
fn free_block(map: &Mapping, index: u32) {
    let rec = map.record(index);
    rec.freed_at.store(monotonic_ns(), Ordering::Relaxed);
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

/// Empties the opener slots of block `index` whose process is gone; returns
/// whether a living process still has the block open.
fn clear_dead_openers(map: &Mapping, index: u32) -> bool {
    let mut open = false;
    for opener in map.record(index).openers {
        let seen = opener.load(Ordering::Acquire);
        if seen == 0 {
            continue;
        }
        if process_gone(slot_pid(seen)) {
            // A failed exchange means the slot changed meanwhile: its (living)
            // owner cleared it, or another process claimed it.
            let _ = opener.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire);
        } else {
            open = true;
        }
    }
    open
}

/// The fields of a descriptor.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Handle<'a> {
    pub(crate) name: &'a str,
    pub(crate) index: u32,
    pub(crate) generation: u64,
    pub(crate) len: u64,
    pub(crate) serial: u64,
    pub(crate) device: [u8; 16],
    pub(crate) handle: &'a [u8],
}

/// Length of every descriptor of memory `M`.
pub(crate) const fn descriptor_len<M: PoolMemory>() -> usize {
    DESCRIPTOR_HEAD + M::HANDLE_LEN
}

/// Encodes a descriptor:
///
/// ```text
///   0  4  magic (the memory's)
///   4  1  version (2)
///   5  1  pool name length n, 1..=64
///   6  2  handle length, u16 (the memory's)
///   8  4  block index, u32
///  12  4  reserved, zero
///  16  8  generation, u64
///  24  8  length in bytes, u64
///  32  8  allocation serial, u64
///  40 16  device UUID
///  56 64  pool name: n ASCII bytes, then zeros
/// 120  h  handle bytes
/// ```
pub(crate) fn encode<M: PoolMemory>(h: &Handle<'_>) -> Vec<u8> {
    let mut d = vec![0u8; descriptor_len::<M>()];
    d[..4].copy_from_slice(&M::MAGIC);
    d[4] = DESCRIPTOR_VERSION;
    d[5] = h.name.len() as u8;
    d[6..8].copy_from_slice(&(M::HANDLE_LEN as u16).to_le_bytes());
    d[8..12].copy_from_slice(&h.index.to_le_bytes());
    d[16..24].copy_from_slice(&h.generation.to_le_bytes());
    d[24..32].copy_from_slice(&h.len.to_le_bytes());
    d[32..40].copy_from_slice(&h.serial.to_le_bytes());
    d[40..56].copy_from_slice(&h.device);
    d[56..56 + h.name.len()].copy_from_slice(h.name.as_bytes());
    d[DESCRIPTOR_HEAD..].copy_from_slice(h.handle);
    d
}

/// Decodes a descriptor, checking every field that can be checked without
/// the pool: length, magic, version, name, reserved bytes.
pub(crate) fn decode<M: PoolMemory>(d: &[u8]) -> Result<Handle<'_>, ImportError> {
    let expected = descriptor_len::<M>();
    if d.len() != expected {
        return Err(malformed::<M>(format!("expected {expected} bytes, got {}", d.len())));
    }
    if d[..4] != M::MAGIC {
        return Err(malformed::<M>(format!("not a {} descriptor", M::KIND)));
    }
    if d[4] != DESCRIPTOR_VERSION {
        return Err(malformed::<M>(format!("unknown version {}", d[4])));
    }
    let name_len = usize::from(d[5]);
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(malformed::<M>(format!("pool name length {name_len}")));
    }
    let handle_len = usize::from(u16::from_le_bytes([d[6], d[7]]));
    if handle_len != M::HANDLE_LEN {
        return Err(malformed::<M>(format!("handle of {handle_len} bytes, expected {}", M::HANDLE_LEN)));
    }
    if d[12..16] != [0; 4] || d[56 + name_len..DESCRIPTOR_HEAD].iter().any(|b| *b != 0) {
        return Err(malformed::<M>("reserved bytes are not zero"));
    }
    let name = std::str::from_utf8(&d[56..56 + name_len])
        .ok()
        .filter(|n| valid_pool_name(M::NAME_PREFIX, n))
        .ok_or_else(|| malformed::<M>("invalid pool name"))?;
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let mut device = [0u8; 16];
    device.copy_from_slice(&d[40..56]);
    Ok(Handle {
        name,
        index: u32::from_le_bytes([d[8], d[9], d[10], d[11]]),
        generation: u64_at(16),
        len: u64_at(24),
        serial: u64_at(32),
        device,
        handle: &d[DESCRIPTOR_HEAD..],
    })
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

/// Removes the pool files of `prefix` in `dir` that processes of this user
/// left when they died without dropping their backend: a pool name with our
/// uid, a regular file that we own, a creator (the pid in the name) that is
/// gone, and a lock that nobody holds (a creator in another pid namespace
/// holds it). Returns how many were removed. Errors only leave a file in place.
/// How long a new pool file may be without its creator's lock.
const LOCK_GRACE: Duration = Duration::from_secs(10);

fn remove_dead_pools(prefix: &str, dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let uid = effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| valid_pool_name(prefix, n)) else {
            continue;
        };
        let Some((_, creator)) = pool_name_ids(prefix, name).filter(|&(owner, _)| owner == uid) else {
            continue;
        };
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
        // The name's pid is the creator's in its own pid namespace: in another
        // one it may name a living process here (pid 1 of a container is init),
        // so a pool whose lock is free is dead anyway once it is older than a
        // creator takes to lock it.
        let old = meta.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > LOCK_GRACE);
        // Unlink only the file that was checked, not one that replaced it since.
        if meta.file_type().is_file()
            && meta.uid() == uid
            && (old || process_gone(creator))
            && matches!(try_lock(&file), Ok(true))
            && still_names(&path, &meta)
        {
            removed += usize::from(std::fs::remove_file(&path).is_ok());
        }
    }
    removed
}

/// Creates a new pool file of `prefix`, owner read-write only, and takes its
/// lock; first removes the pool files of dead processes.
fn create_pool_file(kind: BackendKind, prefix: &str) -> Result<(String, PathBuf, File), AllocError> {
    let dir = pool_dir();
    remove_dead_pools(prefix, &dir);
    let mut last_error = None;
    for attempt in 0u64..8 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(attempt);
        hasher
            .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let name = format!("{prefix}{}-{}-{:016x}", effective_uid(), std::process::id(), hasher.finish());
        debug_assert!(valid_pool_name(prefix, &name), "{name}");
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
                    return Err(system(kind, format!("setting the mode of {}: {e}", path.display())));
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
            Err(e) => return Err(system(kind, format!("creating {}: {e}", path.display()))),
        }
    }
    Err(system(kind, format!("no unused pool name in {}: {last_error:?}", dir.display())))
}

/// Pools created by this process, by name, for memory kinds that
/// [share within the process](PoolMemory::SHARE_WITHIN_PROCESS).
static LOCAL_POOLS: Mutex<Vec<(String, Weak<dyn Any + Send + Sync>)>> = Mutex::new(Vec::new());

fn local_pools() -> MutexGuard<'static, Vec<(String, Weak<dyn Any + Send + Sync>)>> {
    LOCAL_POOLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The creator's view of its pool: the memory, the mapping, and which blocks are where.
struct Pool<M: PoolMemory> {
    memory: M,
    map: Arc<Mapping>,
    path: PathBuf,
    /// The pool file, open for as long as the pool exists: it carries the lock
    /// that tells other processes the pool is alive.
    _file: File,
    idle_time: Duration,
    alloc: Mutex<Allocator<M>>,
}

impl<M: PoolMemory> Drop for Pool<M> {
    /// Marks the pool closed and gives back the memory of its blocks, but not
    /// that of a block another living process still has open (CUDA: memory
    /// freed before its importers close it is undefined behaviour): a thread
    /// keeps those until their openers closed them or died.
    fn drop(&mut self) {
        self.map.atomic_u32(H_CLOSED).store(1, Ordering::Release);
        let memory = &mut self.alloc.get_mut().unwrap_or_else(|e| e.into_inner()).memory;
        let open: Vec<(u32, Arc<M::Block>)> = memory
            .iter_mut()
            .enumerate()
            .filter_map(|(i, m)| Some((i as u32, m.take()?)))
            .filter(|(i, _)| clear_dead_openers(&self.map, *i))
            .collect();
        if open.is_empty() {
            return;
        }
        let map = self.map.clone();
        let keep = move || {
            let mut open = open;
            while !open.is_empty() {
                std::thread::sleep(CLOSE_POLL);
                open.retain(|(i, _)| clear_dead_openers(&map, *i));
            }
        };
        // Without a thread the memory is freed now, as before this promise.
        let _ = std::thread::Builder::new().name("freight-pool-close".into()).spawn(keep);
    }
}

/// How often a dropped pool looks whether readers closed its blocks.
const CLOSE_POLL: Duration = Duration::from_millis(100);

impl<M: PoolMemory> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("map", &self.map).field("path", &self.path).finish()
    }
}

/// Bookkeeping only the creator keeps (other processes only free blocks).
struct Allocator<M: PoolMemory> {
    /// Bytes carved: blocks in use and idle.
    carved: u64,
    /// Records without memory.
    unused: Vec<u32>,
    /// Idle records with memory, by size class.
    idle: Vec<Vec<u32>>,
    /// Records lent out: being written, or exported and held by readers.
    lent: Vec<u32>,
    /// Size class of each record that has memory.
    class: Vec<u32>,
    /// The memory of each record that has some.
    memory: Vec<Option<Arc<M::Block>>>,
}

impl<M: PoolMemory> Pool<M> {
    fn lock(&self) -> MutexGuard<'_, Allocator<M>> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Size class of a block of `len` bytes.
    fn class_of(&self, len: usize) -> u32 {
        let top = self.map.capacity.next_power_of_two().trailing_zeros();
        (len as u64).next_power_of_two().trailing_zeros().clamp(MIN_CLASS, top.max(MIN_CLASS))
    }

    /// Bytes a block of `class` occupies.
    fn slot_len(&self, class: u32) -> u64 {
        (1u64 << class).min(self.map.capacity)
    }

    /// Moves lent blocks that readers (of any process) have freed to their class.
    fn reap(&self, a: &mut Allocator<M>) {
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

    fn stats(&self, a: &Allocator<M>) -> BackendStats {
        let bytes = a.lent.iter().map(|&i| self.map.record(i).slot.load(Ordering::Relaxed)).sum::<u64>();
        BackendStats { blocks_in_use: a.lent.len(), bytes_in_use: bytes as usize }
    }

    /// Gives the memory of idle blocks back: those idle for the idle time, or
    /// every one with `all`. A block that a living reader process still has
    /// open keeps its memory and is marked for its openers to close.
    fn trim(&self, a: &mut Allocator<M>, all: bool) {
        let now = monotonic_ns();
        let idle_ns = u64::try_from(self.idle_time.as_nanos()).unwrap_or(u64::MAX);
        for class in 0..a.idle.len() {
            let mut i = 0;
            while i < a.idle[class].len() {
                let index = a.idle[class][i];
                let rec = self.map.record(index);
                if !all && now.saturating_sub(rec.freed_at.load(Ordering::Relaxed)) < idle_ns {
                    i += 1;
                    continue;
                }
                if clear_dead_openers(&self.map, index) {
                    rec.state.store(TRIM_WANTED, Ordering::Release);
                    i += 1;
                    continue;
                }
                a.idle[class].swap_remove(i);
                let slot = rec.slot.load(Ordering::Relaxed);
                rec.slot.store(0, Ordering::Relaxed);
                rec.location.store(0, Ordering::Relaxed);
                rec.serial.store(0, Ordering::Relaxed);
                rec.state.store(UNUSED, Ordering::Release);
                // Dropping the last reference gives the memory back; a view of
                // this process that still holds one keeps it until it drops.
                a.memory[index as usize] = None;
                a.carved -= slot;
                a.unused.push(index);
            }
        }
    }

    /// Blocks idle now.
    fn idle_count(&self, a: &Allocator<M>) -> usize {
        a.idle.iter().map(Vec::len).sum()
    }

    /// A record with fresh memory of `class`, trimming idle blocks if needed.
    fn carve(&self, a: &mut Allocator<M>, class: u32) -> Result<Option<u32>, AllocError> {
        let slot = self.slot_len(class);
        for attempt in 0..2 {
            if attempt == 1 {
                self.trim(a, true);
            }
            if a.carved + slot > self.map.capacity {
                continue;
            }
            let Some(index) = a.unused.pop() else {
                continue;
            };
            let (memory, location) = match self.memory.carve(&self.map, slot) {
                Ok(Some(carved)) => carved,
                Ok(None) => {
                    a.unused.push(index);
                    continue;
                }
                Err(reason) => {
                    a.unused.push(index);
                    return Err(system(M::KIND, reason));
                }
            };
            let rec = self.map.record(index);
            rec.location.store(location, Ordering::Relaxed);
            rec.slot.store(slot, Ordering::Relaxed);
            rec.serial.store(self.map.next_generation(), Ordering::Relaxed);
            let mut handle = vec![0u8; M::HANDLE_LEN];
            self.memory.handle(&memory, &mut handle);
            rec.set_handle(&handle);
            a.class[index as usize] = class;
            a.memory[index as usize] = Some(Arc::new(memory));
            a.carved += slot;
            return Ok(Some(index));
        }
        Ok(None)
    }

    /// An idle block of `class`, or one with fresh memory.
    fn find(&self, a: &mut Allocator<M>, class: u32) -> Result<Option<u32>, AllocError> {
        match a.idle[class as usize].pop() {
            Some(index) => Ok(Some(index)),
            None => self.carve(a, class),
        }
    }

    /// Releases the holds of readers whose process is gone, in every block
    /// lent and exported; returns how many. Freed blocks are left for `reap`.
    ///
    /// Runs under the allocator lock, so no block it looks at is lent again
    /// meanwhile; readers may release holds at the same time, and the
    /// compare-exchange on each slot decides who releases it.
    fn reclaim(&self, a: &Allocator<M>) -> usize {
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

    /// Reclaims dead readers' holds, notices freed blocks and gives back the
    /// memory of blocks idle for the idle time: the housekeeping of every
    /// `allocate`, `stats` and `reclaim_dead_readers`. Returns the holds reclaimed.
    fn tidy(&self, a: &mut Allocator<M>) -> usize {
        let reclaimed = self.reclaim(a);
        self.reap(a);
        self.trim(a, false);
        reclaimed
    }

    /// Lends a block of `len` bytes, in state "being written".
    fn lend(&self, len: usize) -> Result<(u32, Arc<M::Block>), AllocError> {
        let class = self.class_of(len);
        let mut a = self.lock();
        self.tidy(&mut a);
        let Some(index) = self.find(&mut a, class)? else {
            let in_use = self.stats(&a).bytes_in_use;
            return Err(AllocError::Exhausted { backend: M::KIND, in_use, capacity: self.map.capacity as usize });
        };
        let memory = a.memory[index as usize].clone().expect("idle and freshly carved records have memory");
        let rec = self.map.record(index);
        rec.len.store(len as u64, Ordering::Relaxed);
        rec.holds.store(0, Ordering::Relaxed);
        rec.generation.store(self.map.next_generation(), Ordering::Relaxed);
        rec.state.store(WRITING, Ordering::Release);
        a.lent.push(index);
        Ok((index, memory))
    }

    /// The memory of block `index` if it is still at allocation `serial`.
    fn block_memory(&self, index: u32, serial: u64) -> Option<Arc<M::Block>> {
        let a = self.lock();
        let memory = a.memory.get(index as usize)?.clone()?;
        (self.map.record(index).serial.load(Ordering::Acquire) == serial).then_some(memory)
    }
}

/// A block being written by its creator.
struct PoolBlock<M: PoolMemory> {
    pool: Arc<Pool<M>>,
    index: u32,
    len: usize,
    memory: Arc<M::Block>,
    write_stream: Option<u64>,
    exported: bool,
}

impl<M: PoolMemory> fmt::Debug for PoolBlock<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBlock")
            .field("backend", &M::KIND)
            .field("pool", &self.pool.map.name)
            .field("index", &self.index)
            .field("len", &self.len)
            .finish()
    }
}

impl<M: PoolMemory> WritableBlock for PoolBlock<M> {
    fn len(&self) -> usize {
        self.len
    }

    fn host_mut(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
        None
    }

    fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), WriteError> {
        let error = |failure| WriteError { offset, len: src.len(), block_len: self.len, failure };
        if offset.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return Err(error(None));
        }
        if src.is_empty() {
            return Ok(());
        }
        self.pool.memory.write(&self.pool.map, &self.memory, offset, src).map_err(|e| error(Some(e)))
    }

    fn device_view(&self) -> Option<DeviceView> {
        self.pool.memory.block_device_view(&self.memory)
    }

    fn set_write_stream(&mut self, stream: u64) {
        self.write_stream = Some(stream);
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

impl<M: PoolMemory> Drop for PoolBlock<M> {
    /// A block dropped before export goes back to the pool.
    fn drop(&mut self) {
        if !self.exported {
            free_block(&self.pool.map, self.index);
        }
    }
}

/// A reader process's claim on an opener slot of a block.
struct OpenerClaim {
    map: Arc<Mapping>,
    index: u32,
    slot: usize,
    value: u64,
}

/// A block opened in this process: by a reader of another process's pool
/// (cached, with an opener slot), or directly from a pool of this process.
struct Opened<M: PoolMemory> {
    /// `Some` until dropped: closed before the opener slot is cleared.
    view: Option<M::View>,
    opener: Option<OpenerClaim>,
    serial: u64,
}

impl<M: PoolMemory> Opened<M> {
    fn view(&self) -> &M::View {
        self.view.as_ref().expect("a view is only taken when it is dropped")
    }
}

impl<M: PoolMemory> Drop for Opened<M> {
    /// Closes the block, then tells its creator this process no longer has it open.
    fn drop(&mut self) {
        drop(self.view.take());
        if let Some(o) = &self.opener {
            let rec = o.map.record(o.index);
            let _ = rec.openers[o.slot].compare_exchange(o.value, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

/// A reader's hold on an exported block: the reader slot it claimed, and
/// the value it left there.
struct Hold {
    map: Arc<Mapping>,
    index: u32,
    slot: usize,
    claimed: u64,
}

impl Hold {
    /// Gives the hold back, unless the creator reclaimed it first (it took
    /// this process for dead).
    fn give_back(self) {
        release_slot(&self.map, self.index, self.slot, self.claimed);
    }
}

/// A reader's buffer in a pool block.
struct PoolStorage<M: PoolMemory> {
    /// `Some` until dropped.
    hold: Option<Hold>,
    opened: Arc<Opened<M>>,
    len: usize,
    /// The last stream the buffer was ordered on: its release waits for that
    /// stream's work.
    last_stream: Mutex<Option<u64>>,
}

impl<M: PoolMemory> fmt::Debug for PoolStorage<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolStorage").field("backend", &M::KIND).field("len", &self.len).finish()
    }
}

impl<M: PoolMemory> BufferStorage for PoolStorage<M> {
    fn backend(&self) -> BackendKind {
        M::KIND
    }

    fn len(&self) -> usize {
        self.len
    }

    fn host_bytes(&self) -> Option<&[u8]> {
        None
    }

    fn device_view(&self) -> Option<DeviceView> {
        self.opened.view().device_view()
    }

    fn order_on_stream(&self, stream: u64) -> Result<(), BufferError> {
        self.opened
            .view()
            .order_on_stream(stream)
            .map_err(|reason| BufferError::Backend { backend: M::KIND, reason })?;
        *self.last_stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(stream);
        Ok(())
    }

    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), BufferError> {
        if dst.len() != self.len {
            return Err(BufferError::LengthMismatch { len: self.len, dst: dst.len() });
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.opened.view().copy_to_host(dst).map_err(|reason| BufferError::Backend { backend: M::KIND, reason })
    }
}

impl<M: PoolMemory> Drop for PoolStorage<M> {
    /// Gives the hold back once the memory says the reader's work is done;
    /// the opened block stays open until then.
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        let stream = *self.last_stream.lock().unwrap_or_else(|e| e.into_inner());
        let opened = self.opened.clone();
        self.opened.view().release_after(
            stream,
            Box::new(move || {
                hold.give_back();
                drop(opened);
            }),
        );
    }
}

/// A descriptor checked against the pool it names.
struct Resolved {
    map: Arc<Mapping>,
    index: u32,
    generation: u64,
    len: usize,
    location: u64,
    slot: u64,
    serial: u64,
}

/// Why process `pid` found no unclaimed hold of its own on a resolved block:
/// the block was freed (or its holds given back) since it was resolved, or the
/// process was not named as a reader, or has used every hold it was given.
fn no_hold<M: PoolMemory>(r: &Resolved, pid: u32) -> ImportError {
    let rec = r.map.record(r.index);
    let found = rec.generation.load(Ordering::Acquire);
    let held = rec.readers.iter().any(|s| slot_of_generation(s.load(Ordering::Acquire), r.generation));
    if found != r.generation || !held {
        ImportError::Stale { backend: M::KIND, block: r.index, expected: r.generation, found }
    } else {
        ImportError::NotAReader { backend: M::KIND, pid }
    }
}

/// What a reader keeps of other pools: their mappings and opened blocks.
struct ReaderCache<M: PoolMemory> {
    mappings: HashMap<String, Arc<Mapping>>,
    opened: HashMap<(String, u32), Arc<Opened<M>>>,
}

impl<M: PoolMemory> ReaderCache<M> {
    /// Forgets opened blocks whose allocation changed or that their creator
    /// wants to trim, and the pools of creators that are gone. A forgotten
    /// block closes when the last buffer over it is dropped.
    fn sweep(&mut self) {
        let mut creators: Vec<(u32, bool)> = Vec::new();
        let mut creator_gone = |name: &str| {
            let Some((_, pid)) = pool_name_ids(M::NAME_PREFIX, name) else {
                return true;
            };
            match creators.iter().find(|(p, _)| *p == pid) {
                Some(&(_, g)) => g,
                None => {
                    let g = process_gone(pid);
                    creators.push((pid, g));
                    g
                }
            }
        };
        self.mappings.retain(|name, map| !map.closed() && !creator_gone(name));
        let mappings = &self.mappings;
        self.opened.retain(|(name, index), o| {
            let Some(claim) = &o.opener else {
                return false;
            };
            let rec = claim.map.record(*index);
            mappings.contains_key(name)
                && rec.serial.load(Ordering::Acquire) == o.serial
                && rec.state.load(Ordering::Acquire) != TRIM_WANTED
        });
    }
}

/// A device pool: the creator's pool of blocks and the reader's caches of
/// other pools. Each pool backend is one of these over its memory.
pub(crate) struct DevicePool<M: PoolMemory> {
    pool: Arc<Pool<M>>,
    readers: Mutex<ReaderCache<M>>,
}

impl<M: PoolMemory> fmt::Debug for DevicePool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevicePool")
            .field("backend", &M::KIND)
            .field("pool", &self.pool.path)
            .field("capacity", &self.pool.map.capacity)
            .field("records", &self.pool.map.records)
            .field("device", &format_uuid(&self.pool.memory.device_uuid()))
            .finish()
    }
}

impl<M: PoolMemory> DevicePool<M> {
    /// The backend this pool serves.
    pub(crate) fn kind(&self) -> BackendKind {
        M::KIND
    }

    /// The UUID of the device whose memory the pool lends.
    pub(crate) fn device_uuid(&self) -> [u8; 16] {
        self.memory().device_uuid()
    }

    /// Creates a pool over `memory`.
    pub(crate) fn new(memory: M, options: PoolOptions) -> Result<Self, AllocError> {
        let PoolOptions { capacity, max_blocks, idle_time } = options;
        if capacity == 0 || max_blocks == 0 {
            return Err(system(M::KIND, "a pool needs a positive capacity and block count"));
        }
        if !M::HANDLE_LEN.is_multiple_of(8) {
            return Err(system(M::KIND, "handles must be a multiple of 8 bytes"));
        }
        let record_len = R_HANDLE + M::HANDLE_LEN;
        let meta_len = HEADER_LEN + max_blocks as usize * record_len;
        let data_offset = meta_len.div_ceil(PAGE) * PAGE;
        let data_len = if M::DATA_IN_FILE { capacity } else { 0 };
        let file_len = data_offset
            .checked_add(data_len)
            .filter(|l| *l <= isize::MAX as usize)
            .ok_or_else(|| system(M::KIND, format!("a pool of {capacity} bytes is too large")))?;
        let (name, path, file) = create_pool_file(M::KIND, M::NAME_PREFIX)?;
        let device = memory.device_uuid();
        let init = || -> Result<Mapping, String> {
            file.set_len(file_len as u64).map_err(|e| format!("sizing {}: {e}", path.display()))?;
            let map = MmapRaw::map_raw(&file).map_err(|e| format!("mapping {}: {e}", path.display()))?;
            let mut m = Mapping::new(name.clone(), map)?;
            m.meta_len = meta_len;
            m.record_len = record_len;
            m.records = max_blocks;
            m.capacity = capacity as u64;
            m.data_offset = data_offset;
            m.data_len = data_len as u64;
            m.device = device;
            m.atomic_u32(H_VERSION).store(POOL_VERSION, Ordering::Relaxed);
            m.atomic_u32(H_RECORDS).store(max_blocks, Ordering::Relaxed);
            m.atomic_u32(H_HANDLE_LEN).store(M::HANDLE_LEN as u32, Ordering::Relaxed);
            m.atomic_u64(H_CAPACITY).store(capacity as u64, Ordering::Relaxed);
            m.atomic_u64(H_DATA_OFFSET).store(data_offset as u64, Ordering::Relaxed);
            m.atomic_u64(H_NEXT_GENERATION).store(1, Ordering::Relaxed);
            let [lo, hi] = m.device_words();
            lo.store(u64::from_le_bytes(device[..8].try_into().expect("8 bytes")), Ordering::Relaxed);
            hi.store(u64::from_le_bytes(device[8..].try_into().expect("8 bytes")), Ordering::Relaxed);
            m.atomic_u64(H_MAGIC).store(POOL_MAGIC, Ordering::Release);
            Ok(m)
        };
        let map = match init() {
            Ok(m) => Arc::new(m),
            Err(reason) => {
                let _ = std::fs::remove_file(&path);
                return Err(system(M::KIND, reason));
            }
        };
        let alloc = Allocator {
            carved: 0,
            unused: (0..max_blocks).rev().collect(),
            idle: vec![Vec::new(); 64],
            lent: Vec::new(),
            class: vec![0; max_blocks as usize],
            memory: (0..max_blocks).map(|_| None).collect(),
        };
        let pool = Arc::new(Pool { memory, map, path, _file: file, idle_time, alloc: Mutex::new(alloc) });
        if M::SHARE_WITHIN_PROCESS {
            let mut local = local_pools();
            local.retain(|(_, p)| p.strong_count() > 0);
            let any: Arc<dyn Any + Send + Sync> = pool.clone();
            local.push((name, Arc::downgrade(&any)));
        }
        let readers = ReaderCache { mappings: HashMap::new(), opened: HashMap::new() };
        Ok(DevicePool { pool, readers: Mutex::new(readers) })
    }

    /// The memory under the pool.
    pub(crate) fn memory(&self) -> &M {
        &self.pool.memory
    }

    /// Bytes the pool may carve.
    pub(crate) fn capacity(&self) -> usize {
        self.pool.map.capacity as usize
    }

    /// The pool's name, as descriptors carry it.
    pub(crate) fn name(&self) -> &str {
        &self.pool.map.name
    }

    /// The pool's shared-memory file.
    pub(crate) fn path(&self) -> &Path {
        &self.pool.path
    }

    /// Blocks that keep memory while lent to nobody, after the housekeeping
    /// that gives back the memory of those idle for the idle time.
    pub(crate) fn idle_blocks(&self) -> usize {
        let mut a = self.pool.lock();
        self.pool.tidy(&mut a);
        self.pool.idle_count(&a)
    }

    pub(crate) fn allocate(&self, len: usize) -> Result<BlockMut, AllocError> {
        if len > self.capacity() {
            return Err(AllocError::TooLarge { backend: M::KIND, len, max: self.capacity() });
        }
        let (index, memory) = self.pool.lend(len)?;
        Ok(Box::new(PoolBlock { pool: self.pool.clone(), index, len, memory, write_stream: None, exported: false }))
    }

    pub(crate) fn export(&self, block: BlockMut, readers: &[u32]) -> Result<Descriptor, ExportError> {
        let mut block = block.into_any().downcast::<PoolBlock<M>>().map_err(|_| ExportError::ForeignBlock)?;
        if !Arc::ptr_eq(&block.pool, &self.pool) {
            return Err(ExportError::ForeignBlock);
        }
        if readers.len() > READER_SLOTS {
            // Dropping the unexported block returns it to the pool.
            return Err(ExportError::TooManyReaders { backend: M::KIND, readers: readers.len(), max: READER_SLOTS });
        }
        self.pool
            .memory
            .seal(&block.memory, block.write_stream)
            .map_err(|reason| ExportError::Device { backend: M::KIND, reason })?;
        let mut handle = vec![0u8; M::HANDLE_LEN];
        self.pool.memory.handle(&block.memory, &mut handle);
        let map = &self.pool.map;
        let rec = map.record(block.index);
        let generation = rec.generation.load(Ordering::Relaxed);
        let descriptor = Descriptor::from_slice(&encode::<M>(&Handle {
            name: &map.name,
            index: block.index,
            generation,
            len: block.len as u64,
            serial: rec.serial.load(Ordering::Relaxed),
            device: map.device,
            handle: &handle,
        }))?;
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

    pub(crate) fn import(&self, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError> {
        self.import_as(descriptor, std::process::id())
    }

    pub(crate) fn release_unimported(&self, descriptor: &[u8], reader: u32) -> Result<(), ImportError> {
        let (_, r) = self.resolve(descriptor)?;
        match claim_slot(&r.map, r.index, reader_slot(reader, r.generation), 0) {
            Some(_) => {
                count_off_hold(&r.map, r.index);
                Ok(())
            }
            None => Err(no_hold::<M>(&r, reader)),
        }
    }

    pub(crate) fn reclaim_dead_readers(&self) -> usize {
        let mut a = self.pool.lock();
        self.pool.tidy(&mut a)
    }

    pub(crate) fn stats(&self) -> BackendStats {
        let mut a = self.pool.lock();
        self.pool.tidy(&mut a);
        self.pool.stats(&a)
    }

    /// Bytes of the blocks that hold at least one hold for process `reader`.
    pub(crate) fn held_for(&self, reader: u32) -> usize {
        let a = self.pool.lock();
        let map = &self.pool.map;
        let held = a.lent.iter().filter(|&&i| {
            map.record(i).readers.iter().any(|s| {
                let v = s.load(Ordering::Acquire);
                v & SLOT_OCCUPIED != 0 && slot_pid(v) == reader
            })
        });
        held.map(|&i| map.record(i).slot.load(Ordering::Relaxed)).sum::<u64>() as usize
    }

    fn readers(&self) -> MutexGuard<'_, ReaderCache<M>> {
        self.readers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pool of this process, by name: our own, or (for memory shared
    /// within the process) another backend's.
    fn local_pool(&self, name: &str) -> Option<Arc<Pool<M>>> {
        if name == self.pool.map.name {
            return Some(self.pool.clone());
        }
        if !M::SHARE_WITHIN_PROCESS {
            return None;
        }
        let any = local_pools().iter().find(|(n, _)| n == name)?.1.upgrade()?;
        any.downcast::<Pool<M>>().ok()
    }

    /// The mapping of pool `name`, opened (and cached) on first use.
    fn mapping(&self, name: &str) -> Result<Arc<Mapping>, ImportError> {
        if let Some(pool) = self.local_pool(name) {
            return Ok(pool.map.clone());
        }
        let mut readers = self.readers();
        if let Some(m) = readers.mappings.get(name) {
            return Ok(m.clone());
        }
        let m = Arc::new(Mapping::open(name, M::HANDLE_LEN).map_err(unreachable::<M>)?);
        readers.mappings.insert(name.to_owned(), m.clone());
        Ok(m)
    }

    /// Imports a block as process `pid`: claims one of the holds recorded for
    /// it, and opens the block's memory (or takes the cached opening).
    pub(crate) fn import_as(&self, descriptor: &[u8], pid: u32) -> Result<Arc<dyn BufferStorage>, ImportError> {
        let (h, r) = self.resolve(descriptor)?;
        let held = reader_slot(pid, r.generation);
        let claimed = held | SLOT_IMPORTED;
        // Claiming a slot of this generation shows the block is still at it (a
        // freed block has no occupied slot, and the generation a slot keeps
        // comes round again only after 2^30 allocations), so what `resolve`
        // read of the block still holds, and stays so while we hold it: a held
        // block is never trimmed, so its allocation does not change either.
        let Some(slot) = claim_slot(&r.map, r.index, held, claimed) else {
            return Err(no_hold::<M>(&r, pid));
        };
        let opened = match self.open_block(&h, &r) {
            Ok(o) => o,
            Err(e) => {
                // The hold is left unimported, as it was: the reader may still
                // release it (or the creator reclaim it), as for any refused import.
                let _ = r.map.record(r.index).readers[slot].compare_exchange(
                    claimed,
                    held,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                return Err(e);
            }
        };
        let hold = Hold { map: r.map.clone(), index: r.index, slot, claimed };
        Ok(Arc::new(PoolStorage { hold: Some(hold), opened, len: r.len, last_stream: Mutex::new(None) }))
    }

    /// The block a resolved descriptor names, opened in this process.
    fn open_block(&self, h: &Handle<'_>, r: &Resolved) -> Result<Arc<Opened<M>>, ImportError> {
        if let Some(pool) = self.local_pool(h.name) {
            let Some(memory) = pool.block_memory(r.index, r.serial) else {
                return Err(unreachable::<M>(format!("block {} of this process has no memory", r.index)));
            };
            let view = self.pool.memory.local_view(&r.map, &memory);
            return Ok(Arc::new(Opened { view: Some(view), opener: None, serial: r.serial }));
        }
        let mut readers = self.readers();
        readers.sweep();
        let key = (h.name.to_owned(), r.index);
        if let Some(o) = readers.opened.get(&key).filter(|o| o.serial == r.serial) {
            return Ok(o.clone());
        }
        // A cached opening of an earlier allocation is forgotten (it closes
        // when the buffers over it are gone).
        readers.opened.remove(&key);
        let me = std::process::id();
        let value = reader_slot(me, r.serial);
        let rec = r.map.record(r.index);
        clear_dead_openers(&r.map, r.index);
        let Some(opener) =
            rec.openers.iter().position(|s| s.compare_exchange(0, value, Ordering::AcqRel, Ordering::Acquire).is_ok())
        else {
            return Err(unreachable::<M>(format!(
                "block {} is open in {OPENER_SLOTS} reader processes already",
                r.index
            )));
        };
        let claim = OpenerClaim { map: r.map.clone(), index: r.index, slot: opener, value };
        let view = match self.pool.memory.open(&r.map, r.location, r.slot, h.handle) {
            Ok(v) => v,
            Err(reason) => {
                let _ = rec.openers[opener].compare_exchange(value, 0, Ordering::AcqRel, Ordering::Acquire);
                return Err(unreachable::<M>(reason));
            }
        };
        let opened = Arc::new(Opened { view: Some(view), opener: Some(claim), serial: r.serial });
        readers.opened.insert(key, opened.clone());
        Ok(opened)
    }

    /// Checks every field of a descriptor against the pool it names.
    fn resolve<'d>(&self, descriptor: &'d [u8]) -> Result<(Handle<'d>, Resolved), ImportError> {
        let h = decode::<M>(descriptor)?;
        let ours = self.pool.memory.device_uuid();
        if h.device != ours {
            return Err(unreachable::<M>(format!(
                "the block is on device {}, this backend is on device {}",
                format_uuid(&h.device),
                format_uuid(&ours)
            )));
        }
        let map = self.mapping(h.name)?;
        if map.device != h.device {
            return Err(malformed::<M>(format!(
                "descriptor names device {}, its pool is on device {}",
                format_uuid(&h.device),
                format_uuid(&map.device)
            )));
        }
        if h.index >= map.records {
            return Err(malformed::<M>(format!("block {} of a pool of {} blocks", h.index, map.records)));
        }
        let rec = map.record(h.index);
        let state = rec.state.load(Ordering::Acquire);
        let found = rec.generation.load(Ordering::Acquire);
        let stale = ImportError::Stale { backend: M::KIND, block: h.index, expected: h.generation, found };
        if found != h.generation || state != EXPORTED || rec.holds.load(Ordering::Acquire) == 0 {
            return Err(stale);
        }
        let len = rec.len.load(Ordering::Relaxed);
        if len != h.len {
            return Err(malformed::<M>(format!("length {} but block {} holds {len} bytes", h.len, h.index)));
        }
        let serial = rec.serial.load(Ordering::Relaxed);
        if serial != h.serial {
            return Err(malformed::<M>(format!(
                "allocation {} but block {} is at allocation {serial}",
                h.serial, h.index
            )));
        }
        if !rec.handle_is(h.handle) {
            return Err(malformed::<M>(format!("the handle is not that of block {}", h.index)));
        }
        let location = rec.location.load(Ordering::Relaxed);
        let slot = rec.slot.load(Ordering::Relaxed);
        if len > slot || slot > map.capacity {
            return Err(unreachable::<M>(format!("block {} is larger than its pool", h.index)));
        }
        let resolved =
            Resolved { map, index: h.index, generation: h.generation, len: len as usize, location, slot, serial };
        Ok((h, resolved))
    }
}

impl<M: PoolMemory> Drop for DevicePool<M> {
    /// Removes the pool file; processes that mapped it keep their mappings.
    /// The blocks' memory goes when the last block, buffer or view of this
    /// process over it is dropped; readers in other processes must be done
    /// with it by then (as when the creating process exits).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pool.path);
    }
}

/// Implements [`Backend`] for a public backend type whose field `pool` is a
/// [`DevicePool`]: every device backend is its pool, under its own name.
macro_rules! backend_over_pool {
    ($backend:ty) => {
        impl $crate::Backend for $backend {
            fn kind(&self) -> $crate::BackendKind {
                self.pool.kind()
            }

            fn in_frame(&self) -> bool {
                false
            }

            fn max_block_len(&self) -> usize {
                self.pool.capacity()
            }

            fn allocate(
                &self,
                len: usize,
                _slot: Option<$crate::FrameSlot>,
            ) -> Result<$crate::BlockMut, $crate::AllocError> {
                self.pool.allocate(len)
            }

            fn export(
                &self,
                block: $crate::BlockMut,
                readers: &[u32],
            ) -> Result<$crate::Descriptor, $crate::ExportError> {
                self.pool.export(block, readers)
            }

            fn import(
                &self,
                _frame: &$crate::Frame,
                descriptor: &[u8],
            ) -> Result<std::sync::Arc<dyn $crate::BufferStorage>, $crate::ImportError> {
                self.pool.import(descriptor)
            }

            fn release_unimported(&self, descriptor: &[u8], reader: u32) -> Result<(), $crate::ImportError> {
                self.pool.release_unimported(descriptor, reader)
            }

            fn device_uuid(&self) -> Option<[u8; 16]> {
                Some(self.pool.device_uuid())
            }

            fn held_for(&self, reader: u32) -> usize {
                self.pool.held_for(reader)
            }

            fn reclaim_dead_readers(&self) -> usize {
                self.pool.reclaim_dead_readers()
            }

            fn stats(&self) -> $crate::BackendStats {
                self.pool.stats()
            }
        }
    };
}
pub(crate) use backend_over_pool;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_are_checked_strictly() {
        let p = "freight-fakedev-";
        assert!(valid_pool_name(p, "freight-fakedev-1000-42-0123456789abcdef"));
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
            "freight-cuda-1000-42-0123456789abcdef",
            "../freight-fakedev-1000-42-0123456789abcdef",
            "freight-fakedev-1000-42-13-0123456789abcdef",
            "freight-fakedev-12345678901-42-0123456789abcdef",
        ] {
            assert!(!valid_pool_name(p, bad), "{bad:?} accepted");
        }
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
        assert_eq!(R_HANDLE % 8, 0);
    }

    #[test]
    fn uuids_are_formatted_as_usual() {
        let u = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(format_uuid(&u), "12345678-9abc-def0-0102-030405060708");
    }

    #[test]
    fn pools_of_dead_processes_are_removed_and_no_others() {
        let prefix = "freight-fakedev-";
        let private = freight_testkit::PrivateDir::new("freight-pool-cleanup");
        let dir = private.path().to_path_buf();
        let uid = effective_uid();
        let dead = crate::conformance::dead_pid();
        let pool = |prefix: &str, uid: u32, pid: u32, n: u64| {
            let path = dir.join(format!("{prefix}{uid}-{pid}-{n:016x}"));
            std::fs::write(&path, b"pool").unwrap();
            path
        };
        let orphan = pool(prefix, uid, dead, 1);
        let living = pool(prefix, uid, std::process::id(), 2);
        let locked = pool(prefix, uid, dead, 3); // its creator lives in another pid namespace
        let lock = File::open(&locked).unwrap();
        assert!(try_lock(&lock).unwrap());
        let foreign = pool(prefix, uid.wrapping_add(1), dead, 4);
        let other_kind = pool("freight-cuda-", uid, dead, 5);
        let other = dir.join(format!("{prefix}{uid}-{dead}-not-a-pool"));
        std::fs::write(&other, b"").unwrap();
        // Named by a pid of another namespace that is alive here (init), its
        // lock free: dead once older than a creator takes to lock its file.
        let init_new = pool(prefix, uid, 1, 6);
        let init_old = pool(prefix, uid, 1, 7);
        let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(&init_old).unwrap().set_modified(an_hour_ago).unwrap();
        assert_eq!(remove_dead_pools(prefix, &dir), 2);
        assert!(!orphan.exists(), "the pool of a dead process is still there");
        assert!(!init_old.exists(), "an old pool whose lock is free is still there");
        for kept in [&living, &locked, &foreign, &other, &other_kind, &init_new] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        drop(lock);
        assert_eq!(remove_dead_pools(prefix, &dir), 1, "the pool whose lock was given up");
        assert!(!locked.exists());
        assert_eq!(remove_dead_pools("freight-cuda-", &dir), 1, "the dead pool of the other kind");
    }
}
