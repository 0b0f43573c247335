//! What `cpu`, `shm` and `cuda-host` share: buffer bytes inside the message frame, described
//! by their offset and length.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::{
    AllocError, BackendKind, BlockMut, BufferStorage, Descriptor, ExportError, Frame, FrameSlot, ImportError,
    WritableBlock, WriteError,
};

/// Length of a `cpu` / `shm` descriptor: offset and length, 8 bytes each.
pub const DESCRIPTOR_LEN: usize = 16;

/// A buffer's region of the frame being written.
#[derive(Debug)]
pub(crate) struct InFrameBlock {
    backend: BackendKind,
    slot: FrameSlot,
}

impl InFrameBlock {
    /// A block over `slot`, which must be `len` bytes long.
    pub(crate) fn new(backend: BackendKind, len: usize, slot: Option<FrameSlot>) -> Result<Self, AllocError> {
        match slot {
            Some(slot) if slot.len == len => Ok(InFrameBlock { backend, slot }),
            _ => Err(AllocError::MissingSlot { backend, len }),
        }
    }

    /// The frame region the block covers.
    pub(crate) fn slot(&self) -> &FrameSlot {
        &self.slot
    }
}

impl WritableBlock for InFrameBlock {
    fn len(&self) -> usize {
        self.slot.len
    }

    fn host_mut(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
        // SAFETY: the slot is an exclusive region of a frame the writer owns
        // until publish; `&mut self` makes this the only access.
        Some(unsafe { std::slice::from_raw_parts_mut(self.slot.ptr.cast::<MaybeUninit<u8>>(), self.slot.len) })
    }

    fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), WriteError> {
        let block_len = self.slot.len;
        let end = offset.checked_add(src.len()).filter(|e| *e <= block_len);
        let Some(_) = end else {
            return Err(WriteError { offset, len: src.len(), block_len, failure: None });
        };
        // SAFETY: `offset + src.len() <= len` was checked above; the region is
        // exclusively ours (see `host_mut`) and cannot overlap `src`, which the
        // caller borrows immutably.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.slot.ptr.add(offset), src.len()) };
        Ok(())
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

pub(crate) fn allocate(backend: BackendKind, len: usize, slot: Option<FrameSlot>) -> Result<BlockMut, AllocError> {
    Ok(Box::new(InFrameBlock::new(backend, len, slot)?))
}

pub(crate) fn export(backend: BackendKind, block: BlockMut) -> Result<Descriptor, ExportError> {
    let block = block.into_any().downcast::<InFrameBlock>().map_err(|_| ExportError::ForeignBlock)?;
    if block.backend != backend {
        return Err(ExportError::ForeignBlock);
    }
    describe(&block.slot)
}

/// The descriptor of a frame region: its offset and length.
pub(crate) fn describe(slot: &FrameSlot) -> Result<Descriptor, ExportError> {
    let mut d = [0u8; DESCRIPTOR_LEN];
    d[..8].copy_from_slice(&(slot.offset as u64).to_le_bytes());
    d[8..].copy_from_slice(&(slot.len as u64).to_le_bytes());
    Descriptor::from_slice(&d)
}

/// Checks a descriptor against the frame it came in and returns the region.
pub(crate) fn region(backend: BackendKind, frame: &Frame, descriptor: &[u8]) -> Result<(usize, usize), ImportError> {
    let d: &[u8; DESCRIPTOR_LEN] = descriptor.try_into().map_err(|_| ImportError::Malformed {
        backend,
        reason: format!("expected {DESCRIPTOR_LEN} bytes, got {}", descriptor.len()),
    })?;
    let offset = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(d[8..].try_into().expect("8 bytes"));
    let frame_len = frame.bytes().len();
    match offset.checked_add(len) {
        Some(end) if end <= frame_len as u64 => Ok((offset as usize, len as usize)),
        _ => Err(ImportError::OutOfFrame { backend, offset, end: offset.saturating_add(len), frame_len }),
    }
}

/// A buffer that views a region of a frame and keeps the frame alive.
#[derive(Debug)]
pub(crate) struct FrameView {
    pub(crate) backend: BackendKind,
    pub(crate) frame: Frame,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

impl BufferStorage for FrameView {
    fn backend(&self) -> BackendKind {
        self.backend
    }
    fn len(&self) -> usize {
        self.len
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        Some(&self.frame.bytes()[self.offset..self.offset + self.len])
    }
}

pub(crate) fn view(
    backend: BackendKind,
    frame: &Frame,
    descriptor: &[u8],
) -> Result<Arc<dyn BufferStorage>, ImportError> {
    let (offset, len) = region(backend, frame, descriptor)?;
    Ok(Arc::new(FrameView { backend, frame: frame.clone(), offset, len }))
}

/// A view of `len` bytes at `offset` of a process-local frame, as the `cpu`
/// backend imports frame memory; `None` when the region is not in the frame.
/// For handing a message over inside a process without describing its buffers.
///
/// ```
/// use std::sync::Arc;
/// use freight_backend::{frame_view, Frame, HeapFrame};
/// let frame: Frame = Arc::new(HeapFrame(vec![1, 2, 3, 4]));
/// assert_eq!(frame_view(&frame, 1, 2).unwrap().host_bytes(), Some(&[2u8, 3][..]));
/// assert!(frame_view(&frame, 3, 2).is_none());
/// ```
pub fn frame_view(frame: &Frame, offset: usize, len: usize) -> Option<Arc<dyn BufferStorage>> {
    let end = offset.checked_add(len)?;
    if end > frame.bytes().len() {
        return None;
    }
    Some(Arc::new(FrameView { backend: BackendKind::Cpu, frame: frame.clone(), offset, len }))
}
