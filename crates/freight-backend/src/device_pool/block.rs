//! [`PoolBlock`]: a block lent to its writer, from `allocate` to `export`.
//! The writer fills it through the memory (`write_from_host`, or kernels at
//! its device view); a block dropped unexported goes back to the pool.

use std::any::Any;
use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;

use freight_msg::DeviceView;

use super::holds::free_block;
use super::memory::PoolMemory;
use super::pool::Pool;
use crate::{WritableBlock, WriteError};

/// A block being written by its creator.
pub(super) struct PoolBlock<M: PoolMemory> {
    pub(super) pool: Arc<Pool<M>>,
    pub(super) index: u32,
    pub(super) len: usize,
    pub(super) memory: Arc<M::Block>,
    pub(super) write_stream: Option<u64>,
    pub(super) exported: bool,
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
