//! The reader's side: a block opened in this process ([`Opened`], with its
//! opener slot), a hold claimed on it ([`Hold`]), the buffer a reader gets
//! ([`PoolStorage`], which gives its hold back once the memory says the
//! reader's work is done), a descriptor resolved against its pool
//! ([`Resolved`]), and the cache of other processes' pools and opened blocks
//! ([`ReaderCache`]), swept of what their creators trimmed, closed or left by
//! dying.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use freight_msg::{BufferError, DeviceView};

use super::files::pool_name_ids;
use super::holds::release_slot;
use super::layout::{slot_of_generation, Mapping, TRIM_WANTED};
use super::memory::{BlockView, PoolMemory};
use crate::os::process_gone;
use crate::{BackendKind, BufferStorage, ImportError};

/// A reader process's claim on an opener slot of a block.
pub(super) struct OpenerClaim {
    pub(super) map: Arc<Mapping>,
    pub(super) index: u32,
    pub(super) slot: usize,
    pub(super) value: u64,
}

/// A block opened in this process: by a reader of another process's pool
/// (cached, with an opener slot), or directly from a pool of this process.
pub(super) struct Opened<M: PoolMemory> {
    /// `Some` until dropped: closed before the opener slot is cleared.
    pub(super) view: Option<M::View>,
    pub(super) opener: Option<OpenerClaim>,
    pub(super) serial: u64,
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
pub(super) struct Hold {
    pub(super) map: Arc<Mapping>,
    pub(super) index: u32,
    pub(super) slot: usize,
    pub(super) claimed: u64,
}

impl Hold {
    /// Gives the hold back, unless the creator reclaimed it first (it took
    /// this process for dead).
    fn give_back(self) {
        release_slot(&self.map, self.index, self.slot, self.claimed);
    }
}

/// A reader's buffer in a pool block.
pub(super) struct PoolStorage<M: PoolMemory> {
    /// `Some` until dropped.
    pub(super) hold: Option<Hold>,
    pub(super) opened: Arc<Opened<M>>,
    pub(super) len: usize,
    /// The last stream the buffer was ordered on: its release waits for that
    /// stream's work.
    pub(super) last_stream: Mutex<Option<u64>>,
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
pub(super) struct Resolved {
    pub(super) map: Arc<Mapping>,
    pub(super) index: u32,
    pub(super) generation: u64,
    pub(super) len: usize,
    pub(super) location: u64,
    pub(super) slot: u64,
    pub(super) serial: u64,
}

/// Why process `pid` found no unclaimed hold of its own on a resolved block:
/// the block was freed (or its holds given back) since it was resolved, or the
/// process was not named as a reader, or has used every hold it was given.
pub(super) fn no_hold<M: PoolMemory>(r: &Resolved, pid: u32) -> ImportError {
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
pub(super) struct ReaderCache<M: PoolMemory> {
    pub(super) mappings: HashMap<String, Arc<Mapping>>,
    pub(super) opened: HashMap<(String, u32), Arc<Opened<M>>>,
}

impl<M: PoolMemory> ReaderCache<M> {
    /// Forgets opened blocks whose allocation changed or that their creator
    /// wants to trim, and the pools of creators that are gone. A forgotten
    /// block closes when the last buffer over it is dropped.
    pub(super) fn sweep(&mut self) {
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
