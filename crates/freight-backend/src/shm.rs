//! `shm`: bytes inside a shared-memory frame (an iceoryx2 sample). Readers get
//! read-only views of the sample itself; no byte is copied for any number of
//! readers, and the sample returns to its publisher when the last view is gone.

use std::sync::Arc;

use crate::{in_frame, AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor};
use crate::{ExportError, Frame, FrameSlot, ImportError};

/// The `shm` backend.
///
/// ```
/// use freight_backend::{Backend, ShmBackend};
/// let shm = ShmBackend::with_max_block_len(1 << 30);
/// assert_eq!(shm.max_block_len(), 1 << 30);
/// ```
#[derive(Debug)]
pub struct ShmBackend {
    max_block_len: usize,
}

impl ShmBackend {
    /// Default limit for one buffer: 4 GiB.
    pub const DEFAULT_MAX_BLOCK_LEN: usize = 4 << 30;

    /// A backend lending at most `max` bytes per buffer.
    pub fn with_max_block_len(max: usize) -> Self {
        ShmBackend { max_block_len: max }
    }
}

impl Default for ShmBackend {
    fn default() -> Self {
        Self::with_max_block_len(Self::DEFAULT_MAX_BLOCK_LEN)
    }
}

impl Backend for ShmBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Shm
    }

    fn in_frame(&self) -> bool {
        true
    }

    fn max_block_len(&self) -> usize {
        self.max_block_len
    }

    fn allocate(&self, len: usize, slot: Option<FrameSlot>) -> Result<BlockMut, AllocError> {
        if len > self.max_block_len {
            return Err(AllocError::TooLarge { backend: BackendKind::Shm, len, max: self.max_block_len });
        }
        in_frame::allocate(BackendKind::Shm, len, slot)
    }

    fn export(&self, block: BlockMut, _readers: &[u32]) -> Result<Descriptor, ExportError> {
        in_frame::export(BackendKind::Shm, block)
    }

    fn import(&self, frame: &Frame, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError> {
        in_frame::view(BackendKind::Shm, frame, descriptor)
    }

    fn release_unimported(&self, _descriptor: &[u8], _reader: u32) -> Result<(), ImportError> {
        Ok(())
    }

    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }
}
