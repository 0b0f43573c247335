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
use crate::types::{AnySample, AnySubscription, FreightSampleBuffer};

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

/// Creates a subscription of `type_name` (a built-in type or a registered one) on
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
    // SAFETY: as the caller promised; null options are the defaults.
    unsafe { freight_subscription_create_with_options(node, type_name, topic, qos, std::ptr::null(), out) }
}

/// How a subscription waits (`freight_wait_mode` in C). A C enum is an
/// `int` that may hold any value, so it crosses as one and is checked.
pub type FreightWaitMode = std::ffi::c_int;
/// `FREIGHT_WAIT_BLOCK`: sleep in the OS until a publisher wakes it.
pub const FREIGHT_WAIT_BLOCK: FreightWaitMode = 0;
/// `FREIGHT_WAIT_SPIN`: busy-poll.
pub const FREIGHT_WAIT_SPIN: FreightWaitMode = 1;

/// How a subscription is made (`freight_subscription_options` in C); all
/// zero is the default.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightSubscriptionOptions {
    /// Backends whose memory it takes as it is, `accepted_backend_count`
    /// NUL-terminated names (none: `cpu` and `shm`); for any other it
    /// receives a host copy.
    pub accepted_backends: *const *const c_char,
    /// How many names `accepted_backends` points to.
    pub accepted_backend_count: usize,
    /// How `take` (and an executor spinning it) waits.
    pub wait: FreightWaitMode,
}

/// Creates a subscription as [`freight_subscription_create`] does, made with
/// `options` (null: the defaults): the backends whose memory it takes as it
/// is (`"cuda"`: device memory of publishers on this process's device,
/// `"cuda-host"`, `"fake-device"`; `"cpu"` is always taken), and how it
/// waits. Fails with `FREIGHT_ERROR_CREATE`, saying why, when this process
/// cannot use one of the backends.
///
/// # Safety
/// As [`freight_subscription_create`]; `options` is null or readable, and
/// its `accepted_backends` null or `accepted_backend_count` NUL-terminated
/// strings.
#[no_mangle]
pub unsafe extern "C" fn freight_subscription_create_with_options(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    options: *const FreightSubscriptionOptions,
    out: *mut *mut FreightSubscription,
) -> Status {
    guard(|| {
        // SAFETY (both): as the caller promised.
        let (_, subscription) = unsafe { make_subscription(node, type_name, topic, qos, options) }?;
        unsafe { hand_out(out, FreightSubscription(subscription)) }
    })
}

/// The subscription a C call asks for, and its node: of `type_name` on
/// `topic` with `qos`, made with `options`.
///
/// # Safety
/// As [`freight_subscription_create_with_options`].
pub(crate) unsafe fn make_subscription<'a>(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    options: *const FreightSubscriptionOptions,
) -> Result<(&'a FreightNode, Box<dyn AnySubscription>), Failure> {
    // SAFETY (both): as the caller promised.
    let (node, maker, topic, qos) = unsafe { endpoint_args(node, type_name, topic, qos) }?;
    let options = unsafe { options_arg(options) }?;
    Ok((node, maker.subscription(node.node(), topic, qos, options)?))
}

/// The Rust options of C options (null: the defaults).
///
/// # Safety
/// As [`freight_subscription_create_with_options`]'s `options`.
unsafe fn options_arg(options: *const FreightSubscriptionOptions) -> Result<freight::SubscriptionOptions, Failure> {
    // SAFETY: null or readable, by the caller's contract.
    let Some(options) = (unsafe { options.as_ref() }) else {
        return Ok(freight::SubscriptionOptions::default());
    };
    let wait = match options.wait {
        FREIGHT_WAIT_BLOCK => freight::WaitMode::Block,
        FREIGHT_WAIT_SPIN => freight::WaitMode::Spin,
        other => {
            return Err(Failure::new(
                Status::InvalidArgument,
                format!("the wait mode {other} is neither FREIGHT_WAIT_BLOCK (0) nor FREIGHT_WAIT_SPIN (1)"),
            ))
        }
    };
    // SAFETY: as the caller promised.
    let accepted_backends = unsafe { accepted_arg(options.accepted_backends, options.accepted_backend_count) }?;
    Ok(freight::SubscriptionOptions { accepted_backends, wait })
}

/// The backends named by `names[0..count]` (none: the default set, `None`).
///
/// # Safety
/// `names` is null or points to `count` NUL-terminated strings.
pub(crate) unsafe fn accepted_arg(names: *const *const c_char, count: usize) -> Result<Option<BackendSet>, Failure> {
    let names: &[*const c_char] = if count == 0 {
        &[]
    } else if names.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the accepted backends are a null pointer"));
    } else {
        // SAFETY: non-null, `count` long by the caller's contract.
        unsafe { std::slice::from_raw_parts(names, count) }
    };
    // SAFETY: each NUL-terminated by the caller's contract.
    let kinds =
        names.iter().map(|&n| backend_arg(unsafe { str_arg(n, "a backend") }?)).collect::<Result<Vec<_>, _>>()?;
    Ok((!kinds.is_empty()).then(|| BackendSet::of(&kinds)))
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
        let buffer = nth_buffer(&sample.0.buffers, index, "sample")?;
        unsafe { write_range(data, len, (buffer.data, buffer.len)) }
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
        let buffer = nth_buffer(&sample.0.buffers, index, "sample")?;
        if buffer.device == 0 {
            return Err(Failure::new(
                Status::Take,
                format!("buffer {index} is {} memory, which no device addresses", sample.0.info.backend),
            ));
        }
        unsafe { write_range(device_ptr, len, (buffer.device, buffer.len)) }
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
        unsafe { info.write(message_info(&sample.0.info)) };
        Ok(())
    })
}

/// How a message came, as C reads it.
fn message_info(i: &freight::MessageInfo) -> FreightMessageInfo {
    let transport = match i.transport {
        freight::Transport::Intra => c"intra",
        freight::Transport::Shm => c"shm",
        freight::Transport::Network => c"network",
    };
    FreightMessageInfo {
        publisher_id: i.publisher_id,
        sequence: i.sequence,
        publish_time_ns: i.publish_time_ns,
        transport: transport.as_ptr(),
        backend: backend_name(i.backend),
    }
}

/// Everything of a sample at once (`freight_sample_contents` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightSampleContents {
    /// The small fields as CDR, buffer fields as their ordinals.
    pub fields: *const u8,
    /// Bytes at `fields`.
    pub fields_len: usize,
    /// The buffers, in ordinal order.
    pub buffers: *const FreightSampleBuffer,
    /// Buffers at `buffers`.
    pub buffer_count: usize,
    /// How the message came.
    pub info: FreightMessageInfo,
}

/// Writes to `out` everything of the sample that
/// [`freight_sample_fields`], [`freight_sample_buffer_count`],
/// [`freight_sample_buffer`], [`freight_sample_device_buffer`] and
/// [`freight_sample_info`] give one call each: read-only, valid while the
/// sample lives. One call where a typed reader (C++'s `Sample<T>`) would
/// otherwise make several per message.
///
/// # Safety
/// `sample` is null or live; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_sample_view(sample: *const FreightSample, out: *mut FreightSampleContents) -> Status {
    guard(|| {
        // SAFETY (all): as the caller promised.
        let sample = unsafe { handle(sample, "the sample") }?;
        if out.is_null() {
            return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
        }
        let s = &sample.0;
        unsafe {
            out.write(FreightSampleContents {
                fields: s.fields.as_ptr(),
                fields_len: s.fields.len(),
                buffers: s.buffers.as_ptr(),
                buffer_count: s.buffers.len(),
                info: message_info(&s.info),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_or_zeroed_options_are_the_defaults() {
        let zeroed = FreightSubscriptionOptions {
            accepted_backends: std::ptr::null(),
            accepted_backend_count: 0,
            wait: FREIGHT_WAIT_BLOCK,
        };
        // SAFETY: null, or a live struct without backends.
        let (null, zeroed) = unsafe { (options_arg(std::ptr::null()), options_arg(&zeroed)) };
        assert_eq!(null.ok(), Some(freight::SubscriptionOptions::default()));
        assert_eq!(zeroed.ok(), Some(freight::SubscriptionOptions::default()));
    }

    #[test]
    fn a_spinning_subscription_accepts_what_it_names() {
        let names = [c"fake-device".as_ptr()];
        let options = FreightSubscriptionOptions {
            accepted_backends: names.as_ptr(),
            accepted_backend_count: 1,
            wait: FREIGHT_WAIT_SPIN,
        };
        // SAFETY: a live struct naming one NUL-terminated backend.
        let options = unsafe { options_arg(&options) }.expect("valid options");
        assert_eq!(options.wait, freight::WaitMode::Spin);
        assert_eq!(options.accepted_backends, Some(BackendSet::of(&[BackendKind::FakeDevice])));
    }

    #[test]
    fn a_wait_mode_out_of_the_enum_or_null_backends_are_invalid_arguments() {
        let bad_wait =
            FreightSubscriptionOptions { accepted_backends: std::ptr::null(), accepted_backend_count: 0, wait: 7 };
        let null_backends = FreightSubscriptionOptions {
            accepted_backends: std::ptr::null(),
            accepted_backend_count: 2,
            wait: FREIGHT_WAIT_BLOCK,
        };
        // SAFETY: live structs; the null backends are refused before they are read.
        let (bad_wait, null_backends) = unsafe { (options_arg(&bad_wait), options_arg(&null_backends)) };
        let bad_wait = bad_wait.expect_err("7 is no wait mode");
        assert_eq!(bad_wait.status, Status::InvalidArgument);
        assert!(bad_wait.message.contains("wait mode 7"), "{}", bad_wait.message);
        assert_eq!(null_backends.expect_err("null backends").status, Status::InvalidArgument);
    }

    /// A message sent from Rust, taken through the C ABI and read with
    /// `freight_sample_view`, then sent back through `publish_copy` from
    /// the memory the view gave: both arrive whole.
    #[test]
    fn a_sample_view_gives_fields_buffers_and_info_that_publish_copy_takes_back() {
        use crate::context::{freight_context_create_with, freight_context_destroy, FreightContextOptions};
        use crate::node::{freight_node_create, freight_node_destroy};
        use crate::publisher::{freight_publisher_create, freight_publisher_destroy, freight_publisher_publish_copy};
        use crate::FreightBuffer;
        use freight::msgs::std_msgs::UInt8MultiArray;

        let options = FreightContextOptions { domain_id: crate::FREIGHT_DOMAIN_FROM_ENV, local_only: true };
        let (mut ctx, mut node, mut sub, mut publisher) =
            (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        let topic = format!("/sample_view_{}\0", std::process::id());
        let (type_name, topic) = (c"std_msgs/msg/UInt8MultiArray".as_ptr(), topic.as_ptr().cast::<c_char>());
        let spin = FreightSubscriptionOptions {
            accepted_backends: std::ptr::null(),
            accepted_backend_count: 0,
            wait: FREIGHT_WAIT_SPIN,
        };
        // SAFETY: live handles and out pointers, each handle destroyed once;
        // the view is read while its sample lives.
        unsafe {
            assert_eq!(freight_context_create_with(&options, &mut ctx), Status::Ok);
            assert_eq!(freight_node_create(ctx, c"viewer".as_ptr(), std::ptr::null(), &mut node), Status::Ok);
            let qos = crate::freight_qos_keep_last(4);
            assert_eq!(
                freight_subscription_create_with_options(node, type_name, topic, &qos, &spin, &mut sub),
                Status::Ok
            );
            let rust = (*node)
                .node()
                .create_publisher::<UInt8MultiArray>(
                    std::ffi::CStr::from_ptr(topic).to_str().unwrap(),
                    freight::QoS::keep_last(4),
                )
                .expect("a Rust publisher");
            let msg =
                UInt8MultiArray { data: freight::Buffer::from((0..=255u8).collect::<Vec<_>>()), ..Default::default() };
            rust.publish_copy(&msg).expect("published");

            let mut sample = std::ptr::null_mut();
            assert_eq!(freight_subscription_take(sub, 1_000_000_000, &mut sample), Status::Ok);
            assert!(!sample.is_null());
            assert_eq!(freight_sample_view(sample, std::ptr::null_mut()), Status::InvalidArgument);
            let mut view = std::mem::MaybeUninit::<FreightSampleContents>::uninit();
            assert_eq!(freight_sample_view(sample, view.as_mut_ptr()), Status::Ok);
            let view = view.assume_init();
            assert_eq!(view.buffer_count, 1);
            let buffer = *view.buffers;
            assert_eq!(buffer.device, 0, "host memory");
            let bytes = std::slice::from_raw_parts(buffer.data, buffer.len);
            assert!(bytes.iter().copied().eq(0..=255u8));
            assert_eq!(std::ffi::CStr::from_ptr(view.info.transport), c"intra");

            // Back through C: the fields and the buffer as the view gave them.
            assert_eq!(freight_publisher_create(node, type_name, topic, &qos, &mut publisher), Status::Ok);
            let lent = FreightBuffer { data: buffer.data, len: buffer.len };
            assert_eq!(freight_publisher_publish_copy(publisher, view.fields, view.fields_len, &lent, 1), Status::Ok);
            freight_sample_destroy(sample);
            let mut again = std::ptr::null_mut();
            assert_eq!(freight_subscription_take(sub, 1_000_000_000, &mut again), Status::Ok);
            let mut view = std::mem::MaybeUninit::<FreightSampleContents>::uninit();
            assert_eq!(freight_sample_view(again, view.as_mut_ptr()), Status::Ok);
            let view = view.assume_init();
            let buffer = *view.buffers;
            assert!(std::slice::from_raw_parts(buffer.data, buffer.len).iter().copied().eq(0..=255u8));
            freight_sample_destroy(again);

            freight_publisher_destroy(publisher);
            freight_subscription_destroy(sub);
            freight_node_destroy(node);
            freight_context_destroy(ctx);
        }
    }
}
