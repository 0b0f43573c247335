//! Loans: memory a publisher lends for one message, in two typestates.
//!
//! [`LoanUninit`] is memory nobody has written; only [`Loan`] — what writing it
//! yields — can be published, so the compiler stops a publisher from sending
//! memory it never wrote (as iceoryx2's `SampleMutUninit` / `SampleMut`).

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use freight_backend::{Backend, BlockMut, FrameSlot};
use freight_msg::{BackendKind, Message};

use crate::error::LoanError;
use crate::publisher::{FrameMut, Route};

/// One buffer of a loan.
pub(crate) struct LoanedBuffer {
    pub block: BlockMut,
    pub backend: Arc<dyn Backend>,
    /// The frame region for a host copy of a device buffer, when some
    /// subscriber needs one.
    pub host_copy: Option<FrameSlot>,
    /// Where the buffer's bytes are in host memory once written (its frame
    /// region, or its host copy's); read to serialize for the network.
    pub host_view: Option<(*const u8, usize)>,
}

// SAFETY: the pointer is into the frame of the same loan, which moves with it.
unsafe impl Send for LoanedBuffer {}

struct Parts<M> {
    msg: M,
    frame: FrameMut,
    buffers: Vec<LoanedBuffer>,
    route: Route,
    device_readers: Vec<u32>,
}

/// A loan whose buffers have not been written. Write them with
/// [`write_from_slice`](Self::write_from_slice),
/// [`write_from_fn`](Self::write_from_fn), or in place with
/// [`buffer_uninit_mut`](Self::buffer_uninit_mut) and then
/// [`assume_init`](Self::assume_init).
pub struct LoanUninit<M: Message> {
    parts: Parts<M>,
}

/// A written loan: set its small fields through `Deref<Target = M>`, then
/// [`Publisher::publish`](crate::Publisher::publish) it.
pub struct Loan<M: Message> {
    parts: Parts<M>,
}

impl<M: Message> LoanUninit<M> {
    pub(crate) fn new(
        msg: M,
        frame: FrameMut,
        buffers: Vec<LoanedBuffer>,
        route: Route,
        device_readers: Vec<u32>,
    ) -> Self {
        LoanUninit { parts: Parts { msg, frame, buffers, route, device_readers } }
    }

    /// Number of buffers in the loan.
    pub fn buffer_count(&self) -> usize {
        self.parts.buffers.len()
    }

    /// Length in bytes of buffer `i`.
    pub fn buffer_len(&self, i: usize) -> Option<usize> {
        self.parts.buffers.get(i).map(|b| b.block.len())
    }

    /// The backend the loan's buffers live in.
    pub fn backend(&self) -> BackendKind {
        self.parts.buffers.first().map_or(BackendKind::Cpu, |b| b.backend.kind())
    }

    /// Buffer `i` as uninitialised host memory, to write in place. `None` for
    /// device memory (write it with [`write_buffer_from_host`](Self::write_buffer_from_host)
    /// or, later, a device kernel) and for an index out of range.
    pub fn buffer_uninit_mut(&mut self, i: usize) -> Option<&mut [MaybeUninit<u8>]> {
        self.parts.buffers.get_mut(i)?.block.host_mut()
    }

    /// Copies `src` into buffer `i` at `offset`, wherever the buffer lives.
    pub fn write_buffer_from_host(&mut self, i: usize, offset: usize, src: &[u8]) -> Result<(), LoanError> {
        let count = self.parts.buffers.len();
        let b = self.parts.buffers.get_mut(i).ok_or(LoanError::NoSuchBuffer { index: i, count })?;
        Ok(b.block.write_from_host(offset, src)?)
    }

    /// Fills the single buffer with `src` (which must have its length).
    pub fn write_from_slice(mut self, src: &[u8]) -> Result<Loan<M>, LoanError> {
        if self.parts.buffers.len() != 1 {
            return Err(LoanError::BufferCount {
                type_name: M::TYPE_NAME,
                expected: self.parts.buffers.len(),
                given: 1,
            });
        }
        let len = self.parts.buffers[0].block.len();
        if src.len() != len {
            return Err(LoanError::LengthMismatch { len, given: src.len() });
        }
        self.parts.buffers[0].block.write_from_host(0, src)?;
        Ok(Loan { parts: self.parts })
    }

    /// Fills every buffer with `f(byte index)`.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> u8) -> Loan<M> {
        for b in &mut self.parts.buffers {
            match b.block.host_mut() {
                Some(mem) => mem.iter_mut().enumerate().for_each(|(i, m)| {
                    m.write(f(i));
                }),
                None => {
                    let bytes: Vec<u8> = (0..b.block.len()).map(&mut f).collect();
                    // The block has exactly `bytes.len()` bytes, so this cannot overrun.
                    let _ = b.block.write_from_host(0, &bytes);
                }
            }
        }
        Loan { parts: self.parts }
    }

    /// Declares every buffer written.
    ///
    /// # Safety
    /// Every byte of every buffer must have been written (subscribers read all
    /// of them). Shared memory that is never written holds zeros or an earlier
    /// message, never undefined values, but publishing it is a bug.
    pub unsafe fn assume_init(self) -> Loan<M> {
        Loan { parts: self.parts }
    }
}

impl<M: Message> Loan<M> {
    /// Buffer `i` as host memory, to change after writing; `None` for device memory.
    pub fn buffer_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let mem = self.parts.buffers.get_mut(i)?.block.host_mut()?;
        // SAFETY: the typestate guarantees every byte was written, so the
        // memory is initialized `u8`s.
        Some(unsafe { &mut *(mem as *mut [MaybeUninit<u8>] as *mut [u8]) })
    }

    /// The backend the loan's buffers live in.
    pub fn backend(&self) -> BackendKind {
        self.parts.buffers.first().map_or(BackendKind::Cpu, |b| b.backend.kind())
    }

    pub(crate) fn into_parts(self) -> (M, FrameMut, Vec<LoanedBuffer>, Route, Vec<u32>) {
        let p = self.parts;
        (p.msg, p.frame, p.buffers, p.route, p.device_readers)
    }
}

impl<M: Message> Deref for Loan<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.parts.msg
    }
}

impl<M: Message> DerefMut for Loan<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.parts.msg
    }
}

impl<M: Message> std::fmt::Debug for LoanUninit<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoanUninit<{}>({} buffers in {})", M::TYPE_NAME, self.buffer_count(), self.backend())
    }
}

impl<M: Message> std::fmt::Debug for Loan<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Loan<{}>({:?})", M::TYPE_NAME, self.parts.msg)
    }
}
