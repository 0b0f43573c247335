//! Loans: memory a publisher lends for one message, in two typestates.
//!
//! [`LoanUninit`] is memory nobody has written; only [`Loan`] — what writing it
//! yields — can be published, so the compiler stops a publisher from sending
//! memory it never wrote (as iceoryx2's `SampleMutUninit` / `SampleMut`).

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

use freight_backend::WriteError;
use freight_msg::{BackendKind, DeviceView, Message};

use crate::delivery::Lent;
use crate::error::LoanError;

struct Parts<M> {
    msg: M,
    /// The frame and buffers, as the delivery layer lent them.
    lent: Lent,
    /// A write into a buffer that failed where the API returns no error
    /// ([`LoanUninit::write_from_fn`]): publishing refuses the loan with it, so
    /// a buffer that was not written is never sent.
    failed_write: Option<WriteError>,
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
    pub(crate) fn new(msg: M, lent: Lent) -> Self {
        LoanUninit { parts: Parts { msg, lent, failed_write: None } }
    }

    /// Number of buffers in the loan.
    pub fn buffer_count(&self) -> usize {
        self.parts.lent.buffer_count()
    }

    /// Length in bytes of buffer `i`.
    pub fn buffer_len(&self, i: usize) -> Option<usize> {
        self.parts.lent.buffer_len(i)
    }

    /// The backend the loan's buffers live in.
    pub fn backend(&self) -> BackendKind {
        self.parts.lent.backend()
    }

    /// Buffer `i` as uninitialised host memory, to write in place. `None` for
    /// device memory (write it with [`write_buffer_from_host`](Self::write_buffer_from_host),
    /// or with a kernel at its [`device_view`](Self::device_view)) and for an
    /// index out of range.
    pub fn buffer_uninit_mut(&mut self, i: usize) -> Option<&mut [MaybeUninit<u8>]> {
        self.parts.lent.buffer_uninit_mut(i)
    }

    /// Where a device addresses buffer `i`, for a kernel to write it: `cuda`
    /// device memory, or `cuda-host` shared memory mapped for the device.
    /// `None` for memory only the CPU reaches and for an index out of range.
    ///
    /// A kernel writing the buffer is work the compiler cannot see: name its
    /// stream with [`set_write_stream`](Self::set_write_stream), then declare
    /// the loan written with [`assume_init`](Self::assume_init). Publishing
    /// does not wait for the kernel; readers' streams do.
    ///
    /// ```no_run
    /// use freight::{BackendKind, Context, PublisherOptions, QoS};
    /// use freight::msgs::sensor_msgs::Image;
    /// # fn launch_render_kernel(dst: u64, len: usize, stream: u64) {}
    /// let node = Context::new()?.create_node("renderer")?;
    /// let options = PublisherOptions { backend: BackendKind::Cuda, ..Default::default() };
    /// let publisher = node.create_publisher_with_options::<Image>("image", QoS::sensor_data(), options)?;
    /// let stream: u64 = 0; // the CUstream your kernels run on (0: the default stream)
    ///
    /// let (w, h) = (3840, 2160);
    /// let mut loan = publisher.loan(w * h * 4)?;
    /// let dst = loan.device_view(0).expect("cuda memory has a device address");
    /// launch_render_kernel(dst.ptr, w * h * 4, stream);
    /// loan.set_write_stream(stream);
    /// // SAFETY: the kernel writes every byte of the buffer.
    /// let mut img = unsafe { loan.assume_init() };
    /// img.width = w as u32;
    /// img.height = h as u32;
    /// img.step = 4 * w as u32;
    /// img.encoding = "bgra8".into();
    /// publisher.publish(img)?; // readers' streams wait for `stream`; the host does not
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn device_view(&self, i: usize) -> Option<DeviceView> {
        self.parts.lent.device_view(i)
    }

    /// Names the stream (a `CUstream` handle; `0` the legacy default stream)
    /// that the kernels and copies writing this loan's buffers were submitted
    /// to. Publishing orders every reader after that stream's work, without
    /// blocking the host; call it again if the last writes went to another
    /// stream. Buffers the CPU writes ignore it. See
    /// [`device_view`](Self::device_view) for an example.
    pub fn set_write_stream(&mut self, stream: u64) {
        self.parts.lent.set_write_stream(stream);
    }

    /// Copies `src` into buffer `i` at `offset`, wherever the buffer lives.
    pub fn write_buffer_from_host(&mut self, i: usize, offset: usize, src: &[u8]) -> Result<(), LoanError> {
        self.parts.lent.write_buffer_from_host(i, offset, src)
    }

    /// Fills the single buffer with `src` (which must have its length).
    pub fn write_from_slice(mut self, src: &[u8]) -> Result<Loan<M>, LoanError> {
        if self.parts.lent.buffers.len() != 1 {
            return Err(LoanError::BufferCount {
                type_name: M::TYPE_NAME,
                expected: self.parts.lent.buffers.len(),
                given: 1,
            });
        }
        let len = self.parts.lent.buffers[0].block.len();
        if src.len() != len {
            return Err(LoanError::LengthMismatch { len, given: src.len() });
        }
        self.parts.lent.buffers[0].block.write_from_host(0, src)?;
        Ok(Loan { parts: self.parts })
    }

    /// Fills every buffer with `f(byte index)`.
    ///
    /// Device memory is written through a host copy; should that copy fail
    /// (the device is gone), [`Publisher::publish`](crate::Publisher::publish)
    /// refuses the loan with [`LoanError::Write`].
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> u8) -> Loan<M> {
        for b in &mut self.parts.lent.buffers {
            match b.block.host_mut() {
                Some(mem) => mem.iter_mut().enumerate().for_each(|(i, m)| {
                    m.write(f(i));
                }),
                None => {
                    let bytes: Vec<u8> = (0..b.block.len()).map(&mut f).collect();
                    if let Err(e) = b.block.write_from_host(0, &bytes) {
                        self.parts.failed_write.get_or_insert(e);
                    }
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
        let mem = self.parts.lent.buffers.get_mut(i)?.block.host_mut()?;
        // SAFETY: the typestate guarantees every byte was written, so the
        // memory is initialized `u8`s.
        Some(unsafe { &mut *(mem as *mut [MaybeUninit<u8>] as *mut [u8]) })
    }

    /// The backend the loan's buffers live in.
    pub fn backend(&self) -> BackendKind {
        self.parts.lent.backend()
    }

    /// Where a device addresses buffer `i` (see [`LoanUninit::device_view`]),
    /// for kernels that change it after it was first written.
    pub fn device_view(&self, i: usize) -> Option<DeviceView> {
        self.parts.lent.device_view(i)
    }

    /// Names the stream of the last device writes to this loan's buffers (see
    /// [`LoanUninit::set_write_stream`]): publishing orders every reader after
    /// that stream's work, without blocking the host.
    ///
    /// ```no_run
    /// use freight::{BackendKind, Context, PublisherOptions};
    /// use freight::msgs::std_msgs::UInt8MultiArray;
    /// # fn launch_postprocess(dst: u64, stream: u64) {}
    /// let node = Context::new()?.create_node("detector")?;
    /// let options = PublisherOptions { backend: BackendKind::Cuda, ..Default::default() };
    /// let publisher = node.create_publisher_with_options::<UInt8MultiArray>("masks", 5, options)?;
    /// let mut loan = publisher.loan(1 << 20)?.write_from_fn(|_| 0); // zeroed from the host
    /// let stream: u64 = 0;
    /// launch_postprocess(loan.device_view(0).unwrap().ptr, stream);   // then a kernel on `stream`
    /// loan.set_write_stream(stream);
    /// publisher.publish(loan)?;
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_write_stream(&mut self, stream: u64) {
        self.parts.lent.set_write_stream(stream);
    }

    /// The message and what was lent for it, or the error of a write into
    /// the loan that failed.
    pub(crate) fn into_parts(self) -> Result<(M, Lent), LoanError> {
        let p = self.parts;
        match p.failed_write {
            Some(e) => Err(e.into()),
            None => Ok((p.msg, p.lent)),
        }
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
