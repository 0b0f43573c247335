//! The layout of a pool file (see "Pool file layout" in the module
//! documentation): the offsets of the header and of a block record, the
//! states of a block, the encoding of reader and opener slots, and
//! [`Mapping`], a pool file mapped into this process, whose header and
//! records are only ever reached as atomics. Every `unsafe` of the pool's
//! shared memory is here.

use std::fmt;
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapRaw;

use super::files::{effective_uid, pool_dir};

pub(super) const POOL_MAGIC: u64 = u64::from_le_bytes(*b"FRFDPOOL");
pub(super) const POOL_VERSION: u32 = 4;
pub(super) const HEADER_LEN: usize = 64;
pub(super) const H_MAGIC: usize = 0;
pub(super) const H_VERSION: usize = 8;
pub(super) const H_RECORDS: usize = 12;
pub(super) const H_CAPACITY: usize = 16;
pub(super) const H_DATA_OFFSET: usize = 24;
pub(super) const H_NEXT_GENERATION: usize = 32;
const H_DEVICE: usize = 40;
pub(super) const H_HANDLE_LEN: usize = 56;
pub(super) const H_CLOSED: usize = 60;

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
pub(super) const OPENER_SLOTS: usize = 8;
pub(super) const R_HANDLE: usize = R_OPENERS + 8 * OPENER_SLOTS;

/// Set in every occupied reader or opener slot.
pub(super) const SLOT_OCCUPIED: u64 = 1 << 32;
/// Set in a reader slot whose hold a buffer of the reader's process has imported.
pub(super) const SLOT_IMPORTED: u64 = 1 << 33;
/// A slot keeps the generation (or serial) from here up (its low 30 bits).
const SLOT_GENERATION_SHIFT: u32 = 34;

pub(super) const UNUSED: u32 = 0;
pub(super) const IDLE: u32 = 1;
pub(super) const WRITING: u32 = 2;
pub(super) const EXPORTED: u32 = 3;
/// Idle, and the creator wants to give its memory back: openers should close it.
pub(super) const TRIM_WANTED: u32 = 4;

pub(super) const PAGE: usize = 4096;

/// The value of an unimported reader slot: the hold of process `pid` on the
/// export of generation `generation`. Opener slots use the same form with the
/// allocation serial.
pub(super) fn reader_slot(pid: u32, generation: u64) -> u64 {
    u64::from(pid) | SLOT_OCCUPIED | (generation << SLOT_GENERATION_SHIFT)
}

/// The reader process of an occupied slot.
pub(super) fn slot_pid(slot: u64) -> u32 {
    slot as u32
}

/// Whether an occupied slot is a hold on the export of `generation`.
pub(super) fn slot_of_generation(slot: u64, generation: u64) -> bool {
    slot != 0 && slot >> SLOT_GENERATION_SHIFT == generation & (u64::MAX >> SLOT_GENERATION_SHIFT)
}

/// The atomics of one block record in a mapped pool.
pub(super) struct Record<'a> {
    pub(super) state: &'a AtomicU32,
    pub(super) holds: &'a AtomicU32,
    pub(super) generation: &'a AtomicU64,
    pub(super) len: &'a AtomicU64,
    pub(super) location: &'a AtomicU64,
    pub(super) slot: &'a AtomicU64,
    pub(super) serial: &'a AtomicU64,
    pub(super) freed_at: &'a AtomicU64,
    /// One hold per occupied slot (see the module documentation).
    pub(super) readers: &'a [AtomicU64],
    /// One per process that has the block's memory open.
    pub(super) openers: &'a [AtomicU64],
    /// The block's handle, 8 bytes per atomic.
    handle: &'a [AtomicU64],
}

impl Record<'_> {
    /// Stores the handle of the block's memory.
    pub(super) fn set_handle(&self, bytes: &[u8]) {
        for (word, chunk) in self.handle.iter().zip(bytes.chunks_exact(8)) {
            word.store(u64::from_le_bytes(chunk.try_into().expect("chunks of 8")), Ordering::Relaxed);
        }
    }

    /// Whether `bytes` are the block's handle.
    pub(super) fn handle_is(&self, bytes: &[u8]) -> bool {
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
    pub(super) name: String,
    map: MmapRaw,
    /// Bytes at the start of the map that hold atomics: the header and the records.
    pub(super) meta_len: usize,
    pub(super) records: u32,
    /// Bytes of a record: the fixed fields and the memory's handle.
    pub(super) record_len: usize,
    pub(super) capacity: u64,
    pub(super) data_offset: usize,
    /// Bytes of the data area (0 for memory outside the file).
    pub(super) data_len: u64,
    pub(super) device: [u8; 16],
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
    pub(super) fn new(name: String, map: MmapRaw) -> Result<Self, String> {
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

    pub(super) fn atomic_u64(&self, at: usize) -> &AtomicU64 {
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

    pub(super) fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= self.meta_len, "atomic at {at} outside the pool metadata");
        // SAFETY: as in `atomic_u64`, for 4 bytes at a multiple of 4.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU32) }
    }

    /// Whether the creator dropped the pool.
    pub(super) fn closed(&self) -> bool {
        self.atomic_u32(H_CLOSED).load(Ordering::Acquire) != 0
    }

    /// The device UUID, read from (or written to) the header as two atomics.
    pub(super) fn device_words(&self) -> [&AtomicU64; 2] {
        [self.atomic_u64(H_DEVICE), self.atomic_u64(H_DEVICE + 8)]
    }

    /// The record of block `index`; `index < self.records` (checked).
    pub(super) fn record(&self, index: u32) -> Record<'_> {
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
    pub(super) fn next_generation(&self) -> u64 {
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
    pub(super) fn open(name: &str, handle_len: usize) -> Result<Mapping, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
