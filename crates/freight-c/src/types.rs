//! Endpoints of a message or service type named at run time: the C ABI names
//! a type as a string (`"sensor_msgs/msg/Image"`, `"std_srvs/srv/SetBool"`,
//! or one of the user's own registered first), and this module makes the
//! core's generic publisher, subscription, service server or client of its
//! layout (`message_types.rs`), with the operations C needs of each.
//!
//! Across the boundary a message is its small fields as CDR (the encoding of
//! freight's frames: each buffer field written as its ordinal, a `u32`) and
//! its buffers as memory ranges. The C++ types of `freight/msgs/` write and
//! read exactly that, and so do the generic endpoints: the small fields go
//! into a frame as they are and come out of one the same way.

use std::sync::Arc;
use std::time::Duration;

use freight::generic::{
    GenericClient, GenericLoan, GenericLoanUninit, GenericMessage, GenericPendingCall, GenericPublisher, GenericSample,
    GenericServiceServer, GenericSubscription, MessageLayout,
};
use freight::{Node, PublisherOptions, QoS, RequestId, ServiceOptions, SubscriptionOptions, WaitSet};
use freight_msg::cdr::DecodeErrorKind;
use freight_msg::{BackendKind, BufferStorage, RawBuffer};

use crate::error::{Failure, Status};

/// A publisher as C sees it.
pub(crate) trait AnyPublisher: Send + Sync {
    /// Publishes the message whose small fields are `fields` and whose buffers
    /// are `buffers`, copying each buffer once into the frame, as the Rust
    /// API's `publish_copy` does.
    fn publish_copy(&self, fields: &[u8], buffers: &[&[u8]]) -> Result<(), Failure>;
    /// Lends `lens` bytes for each buffer field.
    fn loan(&self, lens: &[usize]) -> Result<AnyLoan, Failure>;
    /// Publishes `loan` (written by the caller) with the small fields `fields`.
    fn publish(&self, loan: AnyLoan, fields: &[u8]) -> Result<(), Failure>;
    fn subscription_count(&self) -> usize;
}

/// A loan as C holds it, its buffers' host addresses known.
pub(crate) struct AnyLoan {
    pub(crate) loan: GenericLoanUninit,
    pub(crate) buffers: Vec<LoanBuffer>,
    pub(crate) backend: BackendKind,
}

// SAFETY: the addresses point into the loan, which is `Send`; they are only
// handed to the thread that holds the loan.
unsafe impl Send for AnyLoan {}

/// One buffer of a loan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoanBuffer {
    /// Its first byte; null for device memory.
    pub(crate) data: *mut u8,
    pub(crate) len: usize,
    /// Where a device addresses it (`cuda`, `cuda-host`).
    pub(crate) device: Option<u64>,
}

/// A subscription as C sees it.
pub(crate) trait AnySubscription: Send + Sync {
    /// The next message, waiting up to `timeout`.
    fn take(&self, timeout: Duration) -> Result<Option<AnySample>, Failure>;
    /// The next message if one is queued.
    fn try_take(&self) -> Result<Option<AnySample>, Failure>;
    /// Adds the subscription to `waitset`; returns its index there.
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) -> usize;
    fn publisher_count(&self) -> usize;
}

/// A received message: its small fields as CDR with buffer ordinals, and its
/// buffers, whose memory stays alive as long as `held` does.
pub(crate) struct AnySample {
    held: Vec<RawBuffer>,
    pub(crate) fields: Vec<u8>,
    pub(crate) buffers: Vec<FreightSampleBuffer>,
    pub(crate) info: freight::MessageInfo,
}

/// One buffer of a received message (`freight_sample_buffer_view` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightSampleBuffer {
    /// The host's address of its first byte; null for device memory.
    pub data: *const u8,
    /// Its length in bytes.
    pub len: usize,
    /// Where a device addresses it (a `CUdeviceptr`); 0 where none does.
    pub device: u64,
}

impl AnySample {
    /// Orders work later submitted to `stream` after the writes of every
    /// device buffer of the message (host memory needs none).
    pub(crate) fn order_on_stream(&self, stream: u64) -> Result<(), Failure> {
        for (i, raw) in self.held.iter().enumerate() {
            raw.order_on_stream(stream)
                .map_err(|e| Failure::new(Status::Take, format!("ordering a stream after buffer {i}: {e}")))?;
        }
        Ok(())
    }
}

// SAFETY: the addresses point into the sample's buffers, which are `Send`.
unsafe impl Send for AnySample {}

/// Makes publishers and subscriptions of one message type, built in or
/// registered: the core's generic endpoints, which take the C side's small
/// fields as they are (`message_types.rs` has the layouts).
pub(crate) struct EndpointMaker(Arc<MessageLayout>);

impl EndpointMaker {
    pub(crate) fn publisher(
        &self,
        node: &Node,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Box<dyn AnyPublisher>, Failure> {
        Ok(Box::new(node.create_generic_publisher(topic, self.0.clone(), qos, options)?))
    }

    pub(crate) fn subscription(
        &self,
        node: &Node,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Box<dyn AnySubscription>, Failure> {
        Ok(Box::new(node.create_generic_subscription(topic, self.0.clone(), qos, options)?))
    }
}

/// The maker of the message type `type_name`.
pub(crate) fn maker(type_name: &str) -> Result<EndpointMaker, Failure> {
    Ok(EndpointMaker(crate::message_types::layout_of(type_name)?))
}

/// A service server as C sees it: requests as samples, responses from
/// fields and buffers.
pub(crate) trait AnyServer: Send + Sync {
    /// The next request and the id to answer it with, waiting up to `timeout`
    /// (zero: only one queued now).
    fn take_request(&self, timeout: Duration) -> Result<Option<(AnySample, RequestId)>, Failure>;
    /// Sends the response whose small fields are `fields` and whose buffers
    /// are `buffers` to the call `id`.
    fn send_response(&self, id: RequestId, fields: &[u8], buffers: &[&[u8]]) -> Result<(), Failure>;
    /// Lends `lens` bytes for each buffer field of a response.
    fn loan_response(&self, lens: &[usize]) -> Result<AnyLoan, Failure>;
    /// Sends `loan` (written by the caller) with the small fields `fields`
    /// as the response to the call `id`.
    fn send_loaned_response(&self, id: RequestId, loan: AnyLoan, fields: &[u8]) -> Result<(), Failure>;
    /// Adds the server's requests to `waitset`; returns its index there.
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) -> usize;
}

/// A client as C sees it.
pub(crate) trait AnyClient: Send + Sync {
    /// Sends the request whose small fields are `fields` and whose buffers
    /// are `buffers`; the pending call collects the reply.
    fn call_async(&self, fields: &[u8], buffers: &[&[u8]]) -> Result<Box<dyn AnyPendingCall>, Failure>;
    /// Lends `lens` bytes for each buffer field of a request.
    fn loan_request(&self, lens: &[usize]) -> Result<AnyLoan, Failure>;
    /// Sends `loan` (written by the caller) with the small fields `fields`
    /// as a request; the pending call collects the reply.
    fn call_loaned(&self, loan: AnyLoan, fields: &[u8]) -> Result<Box<dyn AnyPendingCall>, Failure>;
    fn wait_for_service(&self, timeout: Duration) -> bool;
    fn server_count(&self) -> usize;
}

/// A call waiting for its reply.
pub(crate) trait AnyPendingCall: Send {
    /// The reply, waiting up to `timeout`; the call stays pending after
    /// [`Status::Timeout`].
    fn wait_for(&mut self, timeout: Duration) -> Result<AnySample, Failure>;
}

/// Makes service servers and clients of one type, built in or registered:
/// the core's generic ones, of the layouts of its request and response.
pub(crate) struct ServiceMaker {
    request: Arc<MessageLayout>,
    response: Arc<MessageLayout>,
}

impl ServiceMaker {
    pub(crate) fn server(
        &self,
        node: &Node,
        name: &str,
        options: ServiceOptions,
    ) -> Result<Box<dyn AnyServer>, Failure> {
        let (rq, rs) = (self.request.clone(), self.response.clone());
        Ok(Box::new(node.create_generic_service_server(name, rq, rs, options)?))
    }

    pub(crate) fn client(
        &self,
        node: &Node,
        name: &str,
        options: ServiceOptions,
    ) -> Result<Box<dyn AnyClient>, Failure> {
        let (rq, rs) = (self.request.clone(), self.response.clone());
        Ok(Box::new(node.create_generic_client(name, rq, rs, options)?))
    }
}

/// The maker of the service `type_name` (`"std_srvs/srv/SetBool"`): its
/// request and response types (`…/SetBool_Request`, `…/SetBool_Response`)
/// are built in or registered.
pub(crate) fn service_maker(type_name: &str) -> Result<ServiceMaker, Failure> {
    let half = |suffix: &str| {
        let name = format!("{type_name}_{suffix}");
        crate::message_types::layout_of(&name).map_err(|_| {
            Failure::new(
                Status::Type,
                format!(
                    "{type_name:?} is neither one of freight's built-in services (freight/msgs/<package>.hpp) nor \
                     registered: register its request and response types ({name:?} and its other half) with \
                     freight_type_register (the C++ API does it for the types `freight msg cpp` generates)"
                ),
            )
        })
    };
    Ok(ServiceMaker { request: half("Request")?, response: half("Response")? })
}

impl AnyServer for GenericServiceServer {
    fn take_request(&self, timeout: Duration) -> Result<Option<(AnySample, RequestId)>, Failure> {
        Ok(GenericServiceServer::take_request(self, timeout)?.map(|(sample, id)| (split_generic(sample), id)))
    }

    fn send_response(&self, id: RequestId, fields: &[u8], buffers: &[&[u8]]) -> Result<(), Failure> {
        lend_to_copy(buffers, |raws| {
            let response = made(self.response_layout(), fields, raws)?;
            Ok(GenericServiceServer::send_response(self, id, &response)?)
        })
    }

    fn loan_response(&self, lens: &[usize]) -> Result<AnyLoan, Failure> {
        Ok(any_loan(GenericServiceServer::loan_response(self, lens)?))
    }

    fn send_loaned_response(&self, id: RequestId, loan: AnyLoan, fields: &[u8]) -> Result<(), Failure> {
        let loan = written(loan);
        Ok(GenericServiceServer::send_loaned_response(self, id, loan, fields)?)
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) -> usize {
        waitset.add_generic_service(self)
    }
}

impl AnyClient for GenericClient {
    fn call_async(&self, fields: &[u8], buffers: &[&[u8]]) -> Result<Box<dyn AnyPendingCall>, Failure> {
        lend_to_copy(buffers, |raws| {
            let request = made(self.request_layout(), fields, raws)?;
            Ok(Box::new(GenericClient::call_async(self, &request)?) as Box<dyn AnyPendingCall>)
        })
    }

    fn loan_request(&self, lens: &[usize]) -> Result<AnyLoan, Failure> {
        Ok(any_loan(GenericClient::loan_request(self, lens)?))
    }

    fn call_loaned(&self, loan: AnyLoan, fields: &[u8]) -> Result<Box<dyn AnyPendingCall>, Failure> {
        let loan = written(loan);
        Ok(Box::new(GenericClient::call_loaned(self, loan, fields)?))
    }

    fn wait_for_service(&self, timeout: Duration) -> bool {
        GenericClient::wait_for_service(self, timeout)
    }

    fn server_count(&self) -> usize {
        GenericClient::server_count(self)
    }
}

impl AnyPendingCall for GenericPendingCall {
    fn wait_for(&mut self, timeout: Duration) -> Result<AnySample, Failure> {
        Ok(split_generic(GenericPendingCall::wait_for(self, timeout)?))
    }
}

impl AnyPublisher for GenericPublisher {
    fn publish_copy(&self, fields: &[u8], buffers: &[&[u8]]) -> Result<(), Failure> {
        lend_to_copy(buffers, |raws| {
            let msg = made(self.layout(), fields, raws)?;
            Ok(GenericPublisher::publish_copy(self, &msg)?)
        })
    }

    fn loan(&self, lens: &[usize]) -> Result<AnyLoan, Failure> {
        Ok(any_loan(self.loan_buffers(lens)?))
    }

    fn publish(&self, loan: AnyLoan, fields: &[u8]) -> Result<(), Failure> {
        let loan = written(loan);
        Ok(GenericPublisher::publish(self, loan, fields.to_vec())?)
    }

    fn subscription_count(&self) -> usize {
        GenericPublisher::subscription_count(self)
    }
}

impl AnySubscription for GenericSubscription {
    fn take(&self, timeout: Duration) -> Result<Option<AnySample>, Failure> {
        Ok(GenericSubscription::take(self, timeout)?.map(split_generic))
    }

    fn try_take(&self) -> Result<Option<AnySample>, Failure> {
        Ok(GenericSubscription::try_take(self)?.map(split_generic))
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) -> usize {
        waitset.add_generic(self)
    }

    fn publisher_count(&self) -> usize {
        GenericSubscription::publisher_count(self)
    }
}

/// A loan as C holds it: its buffers' addresses known.
fn any_loan(mut loan: GenericLoanUninit) -> AnyLoan {
    let backend = loan.backend();
    let buffers = (0..loan.buffer_count())
        .map(|i| LoanBuffer {
            len: loan.buffer_len(i).unwrap_or(0),
            device: loan.device_view(i).map(|v| v.ptr),
            data: loan.buffer_uninit_mut(i).map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast::<u8>()),
        })
        .collect();
    AnyLoan { loan, buffers, backend }
}

/// A loan C wrote, back as the core's to send.
fn written(loan: AnyLoan) -> GenericLoan {
    // SAFETY: the C ABI's contract: the caller wrote every byte of every
    // buffer before sending the loan (C++'s typestate: only a written loan).
    unsafe { loan.loan.assume_init() }
}

/// A sample as it crosses: its small fields are already what C reads.
fn split_generic(sample: GenericSample) -> AnySample {
    let info = sample.info;
    let (fields, held) = sample.message.into_parts();
    let buffers = held.iter().map(sample_buffer).collect();
    AnySample { held, fields, buffers, info }
}

fn sample_buffer(buf: &RawBuffer) -> FreightSampleBuffer {
    FreightSampleBuffer {
        data: buf.host_bytes().map_or(std::ptr::null(), <[u8]>::as_ptr),
        len: buf.len_bytes(),
        device: buf.device_view().map_or(0, |v| v.ptr),
    }
}

/// The message of `layout` a C caller gives as small fields and buffers. One
/// over a `.msg` bound fails to publish, as a Rust publisher's does (the
/// fields are well formed; ROS 2 would refuse to send them too).
fn made(layout: &Arc<MessageLayout>, fields: &[u8], buffers: Vec<RawBuffer>) -> Result<GenericMessage, Failure> {
    GenericMessage::new(layout.clone(), fields.to_vec(), buffers).map_err(|e| match e.kind {
        DecodeErrorKind::OverBound { .. } => {
            Failure::new(Status::Publish, format!("{}: {}", layout.type_name(), e.kind))
        }
        _ => e.into(),
    })
}

/// Runs `publish_copy` with the caller's `buffers` as buffers that view
/// them (no copy into Rust memory first), and checks that nothing kept a
/// view once it returned.
fn lend_to_copy<T>(
    buffers: &[&[u8]],
    publish_copy: impl FnOnce(Vec<RawBuffer>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let borrowed: Vec<Arc<Borrowed>> =
        buffers.iter().map(|b| Arc::new(Borrowed { ptr: b.as_ptr(), len: b.len() })).collect();
    let views = borrowed.iter().map(|b| RawBuffer::from_storage(b.clone() as Arc<dyn BufferStorage>)).collect();
    let published = publish_copy(views);
    // `publish_copy` copies the bytes into the frame and keeps no buffer
    // of the message; were that ever to change, the caller's memory would
    // be read after this call returned.
    if borrowed.iter().any(|b| Arc::strong_count(b) != 1) {
        eprintln!("freight: bug: publish_copy kept a buffer it was lent by C; aborting before it is read freed");
        std::process::abort();
    }
    published
}

/// A C caller's bytes, lent for the length of one `publish_copy` (which
/// copies them into the frame), so that they are not first copied into a Rust
/// buffer.
struct Borrowed {
    ptr: *const u8,
    len: usize,
}

// SAFETY: read-only memory, which the caller keeps unchanged and alive for
// the call that lent it (see `AnyPublisher::publish_copy`).
unsafe impl Send for Borrowed {}
unsafe impl Sync for Borrowed {}

impl std::fmt::Debug for Borrowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Borrowed({} bytes)", self.len)
    }
}

impl BufferStorage for Borrowed {
    fn backend(&self) -> BackendKind {
        BackendKind::Cpu
    }
    fn len(&self) -> usize {
        self.len
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        // SAFETY: `len` readable bytes at `ptr` while the lending call runs,
        // and this storage does not outlive it (checked there). An empty C
        // buffer may come with any pointer, null included.
        Some(if self.len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(self.ptr, self.len) } })
    }
}
