//! [`DevicePool`]: the operations of [`Backend`](crate::Backend) over a pool
//! (allocate, export with one hold per reader, import, release unimported,
//! reclaim dead readers, stats), each device backend's whole implementation,
//! and [`backend_over_pool!`], which makes a backend type its pool. It ties
//! the other files of the folder together: creating the pool file and its
//! mapping, resolving a descriptor against its pool, opening a block once per
//! allocation, and the pools of this process that a backend shares.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use memmap2::MmapRaw;

use super::block::PoolBlock;
use super::descriptor::{decode, encode, format_uuid, malformed, Handle};
use super::files::{create_pool_file, system};
use super::holds::{claim_slot, clear_dead_openers, count_off_hold, free_block};
use super::layout::{
    reader_slot, slot_pid, Mapping, EXPORTED, HEADER_LEN, H_CAPACITY, H_DATA_OFFSET, H_HANDLE_LEN, H_MAGIC,
    H_NEXT_GENERATION, H_RECORDS, H_VERSION, OPENER_SLOTS, PAGE, POOL_MAGIC, POOL_VERSION, READER_SLOTS, R_HANDLE,
    SLOT_IMPORTED, SLOT_OCCUPIED,
};
use super::memory::PoolMemory;
use super::options::PoolOptions;
use super::pool::{Allocator, Pool};
use super::reader::{no_hold, Hold, Opened, OpenerClaim, PoolStorage, ReaderCache, Resolved};
use crate::{AllocError, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError, ImportError};

fn unreachable<M: PoolMemory>(reason: impl Into<String>) -> ImportError {
    ImportError::Unreachable { backend: M::KIND, reason: reason.into() }
}

/// Pools created by this process, by name, for memory kinds that
/// [share within the process](PoolMemory::SHARE_WITHIN_PROCESS).
static LOCAL_POOLS: Mutex<Vec<(String, Weak<dyn Any + Send + Sync>)>> = Mutex::new(Vec::new());

fn local_pools() -> MutexGuard<'static, Vec<(String, Weak<dyn Any + Send + Sync>)>> {
    LOCAL_POOLS.lock().unwrap_or_else(|e| e.into_inner())
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
            // The table is written below, through the mapping: its pages are allocated
            // first, so that a full /dev/shm is this error rather than SIGBUS.
            crate::os::allocate(&file, 0, data_offset as u64).map_err(|e| {
                format!("allocating the pool's table in {}: {e} (is /dev/shm full? df -h /dev/shm)", path.display())
            })?;
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

    pub(crate) fn awaits(&self, descriptor: &[u8], reader: u32) -> bool {
        let Ok((_, r)) = self.resolve(descriptor) else { return false };
        let waiting = reader_slot(reader, r.generation);
        r.map.record(r.index).readers.iter().any(|s| s.load(Ordering::Acquire) == waiting)
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

            fn awaits(&self, descriptor: &[u8], reader: u32) -> bool {
                self.pool.awaits(descriptor, reader)
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
