//! The frame a publisher is writing, and which way it will leave.
//!
//! A loan holds its frame and route from `loan` to `publish`; the publisher
//! decides the route when it lends.

use std::mem::MaybeUninit;

use freight_backend::FrameSlot;

use crate::topic::Ipc;

type IoxSampleUninit = iceoryx2::sample_mut_uninit::SampleMutUninit<Ipc, [MaybeUninit<u8>], ()>;

/// Which way a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Heap frame, to in-process subscriptions only.
    Intra,
    /// iceoryx2 sample, to every subscription.
    Shm,
}

/// A frame being written.
pub(crate) enum FrameMut {
    Heap(Vec<u8>),
    /// The sample and the start of its payload, read once (iceoryx2's
    /// thread-safe samples lock on every `payload_mut()`).
    Shm(IoxSampleUninit, *mut u8),
}

// SAFETY: the raw pointer is the payload of the sample held beside it, which
// the thread-safe service lets move between threads; it is only used by the
// owner of the frame.
unsafe impl Send for FrameMut {}

impl FrameMut {
    fn base(&mut self) -> *mut u8 {
        match self {
            FrameMut::Heap(v) => v.as_mut_ptr(),
            FrameMut::Shm(_, base) => *base,
        }
    }

    pub(crate) fn slot(&mut self, offset: usize, len: usize) -> FrameSlot {
        // SAFETY: callers pass regions computed by `layout`, inside the frame.
        let process_local = matches!(self, FrameMut::Heap(_));
        FrameSlot { offset, ptr: unsafe { self.base().add(offset) }, len, process_local }
    }

    pub(crate) fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        // SAFETY: callers write inside the frame and over no block of a live
        // loan: the header and meta regions `layout` reserved, or a whole
        // frame copied into a new one.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(offset), bytes.len()) }
    }
}
