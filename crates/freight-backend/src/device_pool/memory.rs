//! The seam between the pool and the memory under its blocks: [`PoolMemory`]
//! (what `fake-device` and `cuda` implement: carve, write, seal, describe and
//! open a block) and [`BlockView`] (a block as a reader reaches it). The pool
//! is generic over these two traits; nothing in it calls a device.

use std::sync::Arc;

use freight_msg::DeviceView;

use super::layout::Mapping;
use crate::BackendKind;

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
