//! `freight_publisher` and `freight_loan`: sending messages.
//!
//! A message crosses as its small fields in CDR (buffer fields written as
//! their ordinals, `freight/cdr.hpp`'s `OrdinalSink`) plus its buffers.

use std::ffi::c_char;

use freight_msg::BackendKind;

use crate::error::{destroy, guard, hand_out, handle, nth_buffer, str_arg, write_range, Failure, Status};
use crate::node::{endpoint_args, FreightNode};
use crate::qos::FreightQos;
use crate::types::{AnyLoan, AnyPublisher};

/// A publisher (`freight_publisher` in C).
pub struct FreightPublisher(Box<dyn AnyPublisher>);

/// A loan (`freight_loan` in C): buffers lent by a publisher, to be written
/// and then published, or destroyed.
pub struct FreightLoan(pub(crate) AnyLoan);

/// A buffer given to [`freight_publisher_publish_copy`] (`freight_buffer` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightBuffer {
    /// The first byte; may be null when `len` is 0.
    pub data: *const u8,
    /// Its length in bytes.
    pub len: usize,
}

/// The bytes `data`..`data + len` from C, checked for null.
///
/// # Safety
/// `data` is null or valid for reads of `len` bytes for `'a`.
pub(crate) unsafe fn bytes<'a>(data: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Failure::new(Status::InvalidArgument, format!("{what} is a null pointer with length {len}")));
    }
    // SAFETY: non-null and readable for `len` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// The memory of `buffers[0..count]` from C, each checked for null.
///
/// # Safety
/// `buffers` is null or points to `count` `freight_buffer`s, each readable
/// for `'a`.
pub(crate) unsafe fn buffer_slices<'a>(buffers: *const FreightBuffer, count: usize) -> Result<Vec<&'a [u8]>, Failure> {
    let buffers: &[FreightBuffer] = if count == 0 {
        &[]
    } else if buffers.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the buffers are a null pointer"));
    } else {
        // SAFETY: non-null, `count` long by the caller's contract.
        unsafe { std::slice::from_raw_parts(buffers, count) }
    };
    // SAFETY: each readable by the caller's contract.
    buffers.iter().map(|b| unsafe { bytes(b.data, b.len, "a buffer") }).collect()
}

/// A message as a C call gives it: its small fields `fields[0..fields_len]`
/// and its buffers `buffers[0..count]`.
///
/// # Safety
/// `fields` is null or readable for `fields_len` bytes; `buffers` as in
/// [`buffer_slices`].
pub(crate) unsafe fn message_args<'a>(
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
) -> Result<(&'a [u8], Vec<&'a [u8]>), Failure> {
    // SAFETY (both): as the caller promised.
    Ok((unsafe { bytes(fields, fields_len, "the fields") }?, unsafe { buffer_slices(buffers, count) }?))
}

/// Creates a publisher of `type_name` (`"sensor_msgs/msg/Image"`, a built-in
/// type or a registered one) on `topic` with `qos` (null: keep last 10,
/// reliable).
///
/// # Safety
/// `node` is null or live; `type_name` and `topic` are null or
/// NUL-terminated; `qos` is null or points to a `freight_qos`; `out` is null
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_create(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    out: *mut *mut FreightPublisher,
) -> Status {
    // SAFETY: as the caller promised; shm is the default backend.
    unsafe { freight_publisher_create_with_backend(node, type_name, topic, qos, c"shm".as_ptr(), out) }
}

/// Creates a publisher as [`freight_publisher_create`] does, whose loans
/// lend memory of `backend` (`"shm"`, the default; `"cuda"`, `"cuda-host"`,
/// `"fake-device"`). Fails with `FREIGHT_ERROR_CREATE`, saying why, when this
/// process cannot use the backend (no driver, no device).
///
/// # Safety
/// As [`freight_publisher_create`]; `backend` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_create_with_backend(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    backend: *const c_char,
    out: *mut *mut FreightPublisher,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let (node, maker, topic, qos) = unsafe { endpoint_args(node, type_name, topic, qos) }?;
        let backend = backend_arg(unsafe { str_arg(backend, "the backend") }?)?;
        let options = freight::PublisherOptions { backend, ..Default::default() };
        let publisher = maker.publisher(node.node(), topic, qos, options)?;
        unsafe { hand_out(out, FreightPublisher(publisher)) }
    })
}

/// The backend named `name`, or an error that lists the names.
pub(crate) fn backend_arg(name: &str) -> Result<BackendKind, Failure> {
    BackendKind::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
        Failure::new(Status::InvalidArgument, format!("no backend is named {name:?}: one of {}", names.join(", ")))
    })
}

/// Publishes a message whose small fields are the CDR `fields` (buffer
/// fields as ordinals) and whose buffers are `buffers[0..count]`, each copied
/// once, from the caller's memory into the frame (shared memory), and
/// serialized for network readers, as Rust's `publish_copy` does; a loan
/// copies nothing.
///
/// # Safety
/// `publisher` is null or live; `fields` is readable for `fields_len` bytes;
/// `buffers` is null or points to `count` `freight_buffer`s, each readable.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_publish_copy(
    publisher: *const FreightPublisher,
    fields: *const u8,
    fields_len: usize,
    buffers: *const FreightBuffer,
    count: usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let publisher = unsafe { handle(publisher, "the publisher") }?;
        let (fields, buffers) = unsafe { message_args(fields, fields_len, buffers, count) }?;
        publisher.0.publish_copy(fields, &buffers)
    })
}

/// Lends `lens[i]` bytes for each of the message's `count` buffer fields;
/// `*out` receives the loan, whose memory [`freight_loan_buffer`] gives.
///
/// # Safety
/// `publisher` is null or live; `lens` is null or points to `count` sizes;
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_loan(
    publisher: *const FreightPublisher,
    lens: *const usize,
    count: usize,
    out: *mut *mut FreightLoan,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let publisher = unsafe { handle(publisher, "the publisher") }?;
        let loan = publisher.0.loan(unsafe { lens_arg(lens, count) }?)?;
        unsafe { hand_out(out, FreightLoan(loan)) }
    })
}

/// The `count` buffer lengths at `lens` of a C call.
///
/// # Safety
/// `lens` is null or points to `count` `size_t`s.
pub(crate) unsafe fn lens_arg<'a>(lens: *const usize, count: usize) -> Result<&'a [usize], Failure> {
    if count == 0 {
        return Ok(&[]);
    }
    if lens.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the lengths are a null pointer"));
    }
    // SAFETY: as the caller promised.
    Ok(unsafe { std::slice::from_raw_parts(lens, count) })
}

/// Takes over the loan C hands back to send it: freed on every path after.
///
/// # Safety
/// `loan` is null or a live loan, not used again by the caller.
pub(crate) unsafe fn take_loan(loan: *mut FreightLoan) -> Result<Box<FreightLoan>, Failure> {
    if loan.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the loan is a null pointer"));
    }
    // SAFETY: as the caller promised.
    Ok(unsafe { Box::from_raw(loan) })
}

/// Buffer `index` of `loan`: its first byte (null where the memory is a
/// device's, which the CPU cannot write) and length. Memory a loan lends is
/// not initialised: write all of it before publishing.
///
/// # Safety
/// `loan` is null or live; `data` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_loan_buffer(
    loan: *const FreightLoan,
    index: usize,
    data: *mut *mut u8,
    len: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let loan = unsafe { handle(loan, "the loan") }?;
        let buffer = nth_buffer(&loan.0.buffers, index, "loan")?;
        unsafe { write_range(data, len, (buffer.data, buffer.len)) }
    })
}

/// Buffer `index` of `loan` as a device addresses it (a `CUdeviceptr`: the
/// device memory of a `cuda` loan, or `cuda-host` memory mapped for the
/// device) and its length: for kernels and copies that write it. Fails with
/// `FREIGHT_ERROR_LOAN` for memory no device reaches.
///
/// # Safety
/// `loan` is null or live; `device_ptr` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_loan_device_buffer(
    loan: *const FreightLoan,
    index: usize,
    device_ptr: *mut u64,
    len: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let loan = unsafe { handle(loan, "the loan") }?;
        let buffer = nth_buffer(&loan.0.buffers, index, "loan")?;
        let device = buffer.device.ok_or_else(|| {
            Failure::new(
                Status::Loan,
                format!("buffer {index} is {} memory, which no device addresses", loan.0.backend),
            )
        })?;
        unsafe { write_range(device_ptr, len, (device, buffer.len)) }
    })
}

/// Names the stream (a `CUstream`, or a `cudaStream_t` cast to an integer;
/// 0 the legacy default stream) that the kernels and copies writing the
/// loan's device buffers went to: publishing orders every reader after that
/// stream's work without blocking the host. Buffers the CPU writes ignore it.
///
/// # Safety
/// `loan` is null or live and not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn freight_loan_set_write_stream(loan: *mut FreightLoan, stream: u64) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let loan = unsafe { loan.as_mut() }
            .ok_or_else(|| Failure::new(Status::InvalidArgument, "the loan is a null pointer"))?;
        loan.0.loan.set_write_stream(stream);
        Ok(())
    })
}

/// The name of the memory `loan` lends (`"shm"`, `"cpu"` for a heap frame of
/// an in-process hand-over, `"cuda"`, ...); a static string, null for a null loan.
///
/// # Safety
/// `loan` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_loan_backend(loan: *const FreightLoan) -> *const c_char {
    // SAFETY: as the caller promised.
    unsafe { loan.as_ref() }.map_or(std::ptr::null(), |l| crate::subscription::backend_name(l.0.backend))
}

/// Publishes `loan`, written by the caller, with the small fields `fields`
/// (CDR, buffer fields as ordinals). The loan is consumed whatever the
/// outcome: do not use or destroy it after this call.
///
/// # Safety
/// `publisher` is null or live; `loan` is null or a live loan of this
/// publisher whose every buffer byte was written; `fields` is readable for
/// `fields_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_publish_loan(
    publisher: *const FreightPublisher,
    loan: *mut FreightLoan,
    fields: *const u8,
    fields_len: usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised; the loan is taken over
        // first, so it is freed on every path below.
        let loan = unsafe { take_loan(loan) }?;
        let publisher = unsafe { handle(publisher, "the publisher") }?;
        let fields = unsafe { bytes(fields, fields_len, "the fields") }?;
        publisher.0.publish(loan.0, fields)
    })
}

/// Gives an unpublished loan's memory back (null is ignored).
///
/// # Safety
/// `loan` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_loan_destroy(loan: *mut FreightLoan) {
    // SAFETY: as the caller promised.
    unsafe { destroy(loan) }
}

/// How many subscriptions match the publisher (in this process, on this
/// host and over the network); 0 for a null handle.
///
/// # Safety
/// `publisher` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_subscription_count(publisher: *const FreightPublisher) -> usize {
    // SAFETY: as the caller promised.
    unsafe { publisher.as_ref() }.map_or(0, |p| p.0.subscription_count())
}

/// Frees a publisher (null is ignored).
///
/// # Safety
/// `publisher` is null or live, not used again; no loan of it is used after.
#[no_mangle]
pub unsafe extern "C" fn freight_publisher_destroy(publisher: *mut FreightPublisher) {
    // SAFETY: as the caller promised.
    unsafe { destroy(publisher) }
}
