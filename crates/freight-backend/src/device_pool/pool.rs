//! The creator's side of a pool: [`Pool`], its mapping and memory, and the
//! [`Allocator`] only the creator keeps (see "Allocator" in the module
//! documentation): size classes, idle blocks reused and trimmed, freed blocks
//! noticed by polling, the reclaim of the holds of dead readers, and the
//! closing of the pool when it is dropped, which waits for readers that still
//! have a block open.

use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::files::system;
use super::holds::{clear_dead_openers, release_slot};
use super::layout::{slot_pid, Mapping, EXPORTED, H_CLOSED, IDLE, TRIM_WANTED, UNUSED, WRITING};
use super::memory::PoolMemory;
use crate::os::{monotonic_ns, process_gone};
use crate::{AllocError, BackendStats};

/// Smallest size class: 2^6 = 64 bytes.
const MIN_CLASS: u32 = 6;

/// The creator's view of its pool: the memory, the mapping, and which blocks are where.
pub(super) struct Pool<M: PoolMemory> {
    pub(super) memory: M,
    pub(super) map: Arc<Mapping>,
    pub(super) path: PathBuf,
    /// The pool file, open for as long as the pool exists: it carries the lock
    /// that tells other processes the pool is alive.
    pub(super) _file: File,
    pub(super) idle_time: Duration,
    pub(super) alloc: Mutex<Allocator<M>>,
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
pub(super) struct Allocator<M: PoolMemory> {
    /// Bytes carved: blocks in use and idle.
    pub(super) carved: u64,
    /// Records without memory.
    pub(super) unused: Vec<u32>,
    /// Idle records with memory, by size class.
    pub(super) idle: Vec<Vec<u32>>,
    /// Records lent out: being written, or exported and held by readers.
    pub(super) lent: Vec<u32>,
    /// Size class of each record that has memory.
    pub(super) class: Vec<u32>,
    /// The memory of each record that has some.
    pub(super) memory: Vec<Option<Arc<M::Block>>>,
}

impl<M: PoolMemory> Pool<M> {
    pub(super) fn lock(&self) -> MutexGuard<'_, Allocator<M>> {
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

    pub(super) fn stats(&self, a: &Allocator<M>) -> BackendStats {
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
    pub(super) fn idle_count(&self, a: &Allocator<M>) -> usize {
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
    pub(super) fn tidy(&self, a: &mut Allocator<M>) -> usize {
        let reclaimed = self.reclaim(a);
        self.reap(a);
        self.trim(a, false);
        reclaimed
    }

    /// Lends a block of `len` bytes, in state "being written".
    pub(super) fn lend(&self, len: usize) -> Result<(u32, Arc<M::Block>), AllocError> {
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
    pub(super) fn block_memory(&self, index: u32, serial: u64) -> Option<Arc<M::Block>> {
        let a = self.lock();
        let memory = a.memory.get(index as usize)?.clone()?;
        (self.map.record(index).serial.load(Ordering::Acquire) == serial).then_some(memory)
    }
}
