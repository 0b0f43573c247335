//! `freight_subscription` and `freight_sample`: receiving messages.
//!
//! A sample gives its message as its small fields in CDR (buffer fields
//! written as their ordinals) plus its buffers, read-only, valid while the
//! sample lives: `freight/cdr.hpp`'s `OrdinalSource` reads them into a C++
//! message whose buffers are views of that memory.

use std::ffi::c_char;
use std::time::Duration;

use freight_msg::{BackendKind, BackendSet};

use crate::error::{destroy, guard, hand_out, handle, nth_buffer, str_arg, write_range, Failure, Status};
use crate::node::{endpoint_args, FreightNode};
use crate::publisher::backend_arg;
use crate::qos::FreightQos;
use crate::types::{AnySample, AnySubscription};

/// A subscription (`freight_subscription` in C).
pub struct FreightSubscription(Box<dyn AnySubscription>);

/// A received message (`freight_sample` in C).
pub struct FreightSample(pub(crate) AnySample);

/// How a message came (`freight_message_info` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightMessageInfo {
    /// The publisher's id, unique on the host.
    pub publisher_id: u64,
    /// The publisher's sequence number of the message.
    pub sequence: u64,
    /// When it was published: `CLOCK_MONOTONIC`, nanoseconds (the same clock
    /// on every process of a host).
    pub publish_time_ns: u64,
    /// `"intra"`, `"shm"` or `"network"`: a static string.
    pub transport: *const c_char,
    /// The memory its buffers are in (`"shm"`, `"cpu"`, `"cuda"`, ...): a static string.
    pub backend: *const c_char,
}

/// A backend's name as a static C string.
pub(crate) fn backend_name(kind: BackendKind) -> *const c_char {
    match kind {
        BackendKind::Cpu => c"cpu",
        BackendKind::Shm => c"shm",
        BackendKind::Cuda => c"cuda",
        BackendKind::CudaHost => c"cuda-host",
        BackendKind::FakeDevice => c"fake-device",
        // A backend added later: its name is still known to Rust.
        _ => c"other",
    }
    .as_ptr()
}

/// Creates a subscription of `type_name` (one of the built-in types) on
/// `topic` with `qos` (null: keep last 10, reliable).
///
/// # Safety
/// As [`crate::freight_publisher_create`].
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_create(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    out: *mut *mut FreightSubscription,
) -> Status {
    // SAFETY: as the caller promised; no backends is the default.
    unsafe { freight_subscription_create_accepting(node, type_name, topic, qos, std::ptr::null(), 0, out) }
}

/// Creates a subscription as [`freight_subscription_create`] does, which
/// takes the memory of each of `backends[0..count]` as it is (`"cuda"`:
/// device memory of publishers on this process's device, `"cuda-host"`,
/// `"fake-device"`; `"cpu"` is always taken; none: `cpu` and `shm`, as
/// [`freight_subscription_create`]); for any other it receives a host copy.
/// Fails with `FREIGHT_ERROR_CREATE`, saying why, when this process cannot
/// use one of them.
///
/// # Safety
/// As [`freight_subscription_create`]; `backends` is null or points to
/// `count` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_create_accepting(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    backends: *const *const c_char,
    count: usize,
    out: *mut *mut FreightSubscription,
) -> Status {
    guard(|| {
        // SAFETY (both): as the caller promised.
        let (_, subscription) = unsafe { make_subscription(node, type_name, topic, qos, backends, count) }?;
        unsafe { hand_out(out, FreightSubscription(subscription)) }
    })
}

/// The subscription a C call asks for, and its node: of `type_name` on
/// `topic` with `qos`, accepting `backends[0..count]`.
///
/// # Safety
/// As [`freight_subscription_create_accepting`].
pub(crate) unsafe fn make_subscription<'a>(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    backends: *const *const c_char,
    count: usize,
) -> Result<(&'a FreightNode, Box<dyn AnySubscription>), Failure> {
    // SAFETY (both): as the caller promised.
    let (node, maker, topic, qos) = unsafe { endpoint_args(node, type_name, topic, qos) }?;
    let options = unsafe { accepting(backends, count) }?;
    Ok((node, (maker.subscription)(node.node(), topic, qos, options)?))
}

/// The options of a subscription that accepts `backends[0..count]` (none:
/// the default, `cpu` and `shm`).
///
/// # Safety
/// `backends` is null or points to `count` NUL-terminated strings.
unsafe fn accepting(backends: *const *const c_char, count: usize) -> Result<freight::SubscriptionOptions, Failure> {
    let names: &[*const c_char] = if count == 0 {
        &[]
    } else if backends.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the backends are a null pointer"));
    } else {
        // SAFETY: non-null, `count` long by the caller's contract.
        unsafe { std::slice::from_raw_parts(backends, count) }
    };
    // SAFETY: each NUL-terminated by the caller's contract.
    let kinds =
        names.iter().map(|&n| backend_arg(unsafe { str_arg(n, "a backend") }?)).collect::<Result<Vec<_>, _>>()?;
    let accepted_backends = (!kinds.is_empty()).then(|| BackendSet::of(&kinds));
    Ok(freight::SubscriptionOptions { accepted_backends, ..Default::default() })
}

/// Takes the next message, waiting up to `timeout_ns` nanoseconds (0: only
/// look). `*out` receives the sample, or null when none came in time (still
/// `FREIGHT_OK`).
///
/// # Safety
/// `subscription` is null or live; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_take(
    subscription: *const FreightSubscription,
    timeout_ns: u64,
    out: *mut *mut FreightSample,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let subscription = unsafe { handle(subscription, "the subscription") }?;
        if out.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        match subscription.0.take(Duration::from_nanos(timeout_ns))? {
            Some(sample) => unsafe { hand_out(out, FreightSample(sample)) },
            None => {
                unsafe { out.write(std::ptr::null_mut()) };
                Ok(())
            }
        }
    })
}

/// How many publishers match the subscription; 0 for a null handle.
///
/// # Safety
/// `subscription` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_publisher_count(subscription: *const FreightSubscription) -> usize {
    // SAFETY: as the caller promised.
    unsafe { subscription.as_ref() }.map_or(0, |s| s.0.publisher_count())
}

/// Frees a subscription (null is ignored); its samples stay valid.
///
/// # Safety
/// `subscription` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_destroy(subscription: *mut FreightSubscription) {
    // SAFETY: as the caller promised.
    unsafe { destroy(subscription) }
}

/// The sample's small fields: CDR with each buffer field as its ordinal.
/// Valid while the sample lives.
///
/// # Safety
/// `sample` is null or live; `data` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_fields(
    sample: *const FreightSample,
    data: *mut *const u8,
    len: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        unsafe { write_range(data, len, (sample.0.fields.as_ptr(), sample.0.fields.len())) }
    })
}

/// How many buffers the sample's message has; 0 for a null sample.
///
/// # Safety
/// `sample` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_buffer_count(sample: *const FreightSample) -> usize {
    // SAFETY: as the caller promised.
    unsafe { sample.as_ref() }.map_or(0, |s| s.0.buffers.len())
}

/// Buffer `index` of the sample: its first byte (null for device memory)
/// and length; read-only, valid while the sample lives.
///
/// # Safety
/// `sample` is null or live; `data` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_buffer(
    sample: *const FreightSample,
    index: usize,
    data: *mut *const u8,
    len: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        let (ptr, n) = nth_buffer(&sample.0.buffers, index, "sample")?;
        unsafe { write_range(data, len, (ptr, n)) }
    })
}

/// Buffer `index` of the sample as a device addresses it (a `CUdeviceptr`)
/// and its length: for kernels that read it, after
/// [`freight_sample_order_on_stream`]. Fails with `FREIGHT_ERROR_TAKE` for
/// memory no device reaches.
///
/// # Safety
/// `sample` is null or live; `device_ptr` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_device_buffer(
    sample: *const FreightSample,
    index: usize,
    device_ptr: *mut u64,
    len: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        let (_, n) = nth_buffer(&sample.0.buffers, index, "sample")?;
        let device = sample.0.device.get(index).copied().flatten().ok_or_else(|| {
            Failure::new(
                Status::Take,
                format!("buffer {index} is {} memory, which no device addresses", sample.0.info.backend),
            )
        })?;
        unsafe { write_range(device_ptr, len, (device, n)) }
    })
}

/// Orders the work later submitted to `stream` (a `CUstream`, or a
/// `cudaStream_t` cast to an integer; 0 the legacy default stream) after
/// the publisher's writes to every device buffer of the sample, without
/// blocking the host: call it before launching kernels that read them.
/// Host memory needs no ordering.
///
/// # Safety
/// `sample` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_order_on_stream(sample: *const FreightSample, stream: u64) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        sample.0.order_on_stream(stream)
    })
}

/// How the sample's message came.
///
/// # Safety
/// `sample` is null or live; `info` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_info(sample: *const FreightSample, info: *mut FreightMessageInfo) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        if info.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the info is a null pointer"));
        }
        let i = &sample.0.info;
        let transport = match i.transport {
            freight::Transport::Intra => c"intra",
            freight::Transport::Shm => c"shm",
            freight::Transport::Network => c"network",
        };
        unsafe {
            info.write(FreightMessageInfo {
                publisher_id: i.publisher_id,
                sequence: i.sequence,
                publish_time_ns: i.publish_time_ns,
                transport: transport.as_ptr(),
                backend: backend_name(i.backend),
            })
        };
        Ok(())
    })
}

/// Frees a sample (null is ignored): its memory goes back to the publisher
/// once no other reader holds it.
///
/// # Safety
/// `sample` is null or live, not used again; nothing reads its buffers after.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_destroy(sample: *mut FreightSample) {
    // SAFETY: as the caller promised.
    unsafe { destroy(sample) }
}
