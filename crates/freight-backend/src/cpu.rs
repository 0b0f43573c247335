//! `cpu`: plain bytes inside the frame. A reader owns what it imports: bytes
//! from a shared frame are copied out (the one copy of the CPU fallback), bytes
//! in an in-process frame are shared read-only.

use std::sync::Arc;

use freight_msg::Buffer;

use crate::{in_frame, AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor};
use crate::{ExportError, Frame, FrameSlot, ImportError};

/// The `cpu` backend. Every endpoint accepts it.
///
/// ```
/// use freight_backend::{Backend, CpuBackend};
/// assert_eq!(CpuBackend::default().kind().name(), "cpu");
/// ```
#[derive(Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn in_frame(&self) -> bool {
        true
    }

    fn max_block_len(&self) -> usize {
        isize::MAX as usize
    }

    fn allocate(&self, len: usize, slot: Option<FrameSlot>) -> Result<BlockMut, AllocError> {
        in_frame::allocate(BackendKind::Cpu, len, slot)
    }

    fn export(&self, block: BlockMut, _readers: &[u32]) -> Result<Descriptor, ExportError> {
        in_frame::export(BackendKind::Cpu, block)
    }

    fn import(&self, frame: &Frame, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError> {
        if frame.is_process_local() {
            return in_frame::view(BackendKind::Cpu, frame, descriptor);
        }
        let (offset, len) = in_frame::region(BackendKind::Cpu, frame, descriptor)?;
        let copy = Buffer::from(frame.bytes()[offset..offset + len].to_vec());
        match copy.raw().storage() {
            Some(s) => Ok(s.clone()),
            // An empty copy has no storage: view the (empty) region instead.
            None => in_frame::view(BackendKind::Cpu, frame, descriptor),
        }
    }

    fn release_unimported(&self, _descriptor: &[u8], _reader: u32) -> Result<(), ImportError> {
        Ok(())
    }

    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }
}
