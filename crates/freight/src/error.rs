//! Errors, one enum per operation. Each variant is something the caller can act on.

use freight_backend::{AllocError, ExportError, ImportError, WriteError};
use freight_dds::DdsError;
use freight_msg::{BackendKind, DecodeError, EncodeError};

use crate::frame::FrameError;
use crate::names::NameError;

/// What the shared-memory layer (iceoryx2) refused: what freight asked of it,
/// and iceoryx2's own error as the source.
///
/// ```
/// use std::error::Error;
/// # fn check(e: &freight::ShmError) {
/// println!("{}: {:?}", e.operation(), e.source());
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{operation}: {source}")]
pub struct ShmError {
    operation: &'static str,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl ShmError {
    /// A `map_err` adapter: `.map_err(ShmError::doing("creating the port"))`.
    pub(crate) fn doing<E>(operation: &'static str) -> impl FnOnce(E) -> ShmError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |e| ShmError { operation, source: Box::new(e) }
    }

    /// What freight asked of iceoryx2 ("creating the publisher port", ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }
}

/// Creating a context or node failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// `ROS_DOMAIN_ID` is not a number in 0..=232.
    #[error("ROS_DOMAIN_ID={0:?} is not a domain id (0..=232); unset it or set a number")]
    BadDomainId(String),
    /// A name breaks ROS 2's rules.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The shared-memory layer refused.
    #[error("shared memory: {0}; {hint}", hint = crate::local_plane::where_it_lives())]
    SharedMemory(#[from] ShmError),
    /// An environment variable freight reads has a value it cannot use.
    #[error("{variable}={value:?} is not {expected}; unset it or fix it")]
    BadEnvironment {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A stream declared with `ContextBuilder::large_data` cannot be tuned.
    #[error("large-data stream: {0}")]
    Tune(Box<freight_tune::TuneError>),
}

impl CreateError {
    /// A `map_err` adapter for what iceoryx2 refused while making an endpoint
    /// of `topic`.
    pub(crate) fn shm<E>(topic: &str, operation: &'static str) -> impl FnOnce(E) -> CreateError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let topic = topic.to_owned();
        move |e| {
            let source = ShmError::doing(operation)(e);
            match crate::fd_limit::exhausted() {
                Some((in_use, limit)) => CreateError::TooManyOpenFiles { topic, in_use, limit, source },
                None => CreateError::SharedMemory { topic, source },
            }
        }
    }
}

/// A memory backend cannot be used in this process, and why.
///
/// ```
/// use freight::{BackendKind, BackendUnavailable};
/// let e = BackendUnavailable { backend: BackendKind::Cuda, reason: "cuda: libcuda.so.1 not found".into() };
/// assert_eq!(e.to_string(), "backend cuda is not available in this process: cuda: libcuda.so.1 not found");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend {backend} is not available in this process: {reason}")]
pub struct BackendUnavailable {
    /// The backend.
    pub backend: BackendKind,
    /// Why: what creating it reported.
    pub reason: String,
}

/// Creating a publisher or subscription failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreateError {
    /// The topic name breaks ROS 2's rules.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The topic already carries another message type.
    #[error("topic {topic} carries {existing}, not {requested}; use another topic or the same type")]
    WrongType {
        /// The topic.
        topic: String,
        /// Its type.
        existing: String,
        /// The type asked for.
        requested: &'static str,
    },
    /// The QoS asks for more than the context's limits.
    #[error("{what} {asked} exceeds the limit of {limit}; raise it with Context::builder().limits(..)")]
    OverLimit {
        /// Which setting.
        what: &'static str,
        /// Value asked for.
        asked: usize,
        /// The limit.
        limit: usize,
    },
    /// A backend this endpoint needs is not available in this process; the
    /// error says why (no driver, no such device, ...).
    #[error(transparent)]
    BackendUnavailable(BackendUnavailable),
    /// The shared-memory layer refused.
    #[error("shared memory for topic {topic}: {source}")]
    SharedMemory {
        /// The topic.
        topic: String,
        /// What failed.
        #[source]
        source: ShmError,
    },
    /// The process has as many file descriptors open as its limit allows: each
    /// topic costs a few on the local plane. (freight raised the soft limit to
    /// the hard one when the first context was made.)
    #[error(
        "topic {topic}: too many open files ({in_use} in use, limit {limit}): raise `ulimit -n` (the hard \
         limit, where the soft one already is), or make fewer topics in this process; {source}"
    )]
    TooManyOpenFiles {
        /// The topic.
        topic: String,
        /// Descriptors open.
        in_use: usize,
        /// The soft `RLIMIT_NOFILE`.
        limit: u64,
        /// What iceoryx2 could not do.
        #[source]
        source: ShmError,
    },
    /// The DDS network plane refused (no usable network interface, a bad
    /// `CYCLONEDDS_URI`...). A context built with `local_only()` has none.
    #[error(
        "network plane (DDS) for topic {topic}: {source}; check CYCLONEDDS_URI, or build the context with local_only()"
    )]
    Network {
        /// The topic.
        topic: String,
        /// Cyclone DDS's error.
        source: DdsError,
    },
    /// A large-data QoS ([`QoS::large_data_lossy`](crate::QoS::large_data_lossy)) whose
    /// stream cannot be tuned.
    #[error("large-data QoS for topic {topic}: {source}")]
    Tune {
        /// The topic.
        topic: String,
        /// The tuner's error, naming the field to change (boxed: it is large, and rare).
        source: Box<freight_tune::TuneError>,
    },
    /// The DDS domain of this context was already configured (Cyclone configures a domain
    /// once per process) with settings that do not serve this large-data stream.
    #[error(
        "large-data QoS for topic {topic}: the DDS domain of this context is already configured \
         and cannot serve this stream ({short}); declare every large-data stream with \
         Context::builder().large_data(..) so the domain is configured for all of them"
    )]
    NetworkTuning {
        /// The topic.
        topic: String,
        /// Each domain-wide setting that falls short.
        short: String,
    },
}

/// Lending memory for a message failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoanError {
    /// The message type has another number of buffer fields than sizes given.
    #[error("{type_name} has {expected} buffer fields but {given} sizes were given")]
    BufferCount {
        /// The type.
        type_name: &'static str,
        /// Its buffer fields.
        expected: usize,
        /// Sizes given.
        given: usize,
    },
    /// The message is larger than the context allows.
    #[error("a message of {len} bytes exceeds the limit of {max} bytes (Limits::max_message_bytes)")]
    TooLarge {
        /// Bytes asked for.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The backend could not lend memory.
    #[error(transparent)]
    Backend(#[from] AllocError),
    /// Writing the loan failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A buffer index past the loan's buffers.
    #[error("the loan has {count} buffers; there is no buffer {index}")]
    NoSuchBuffer {
        /// The index asked for.
        index: usize,
        /// Buffers in the loan.
        count: usize,
    },
    /// The data passed to fill a loan has another length than the loan.
    #[error("data of {given} bytes does not fill a buffer of {len} bytes")]
    LengthMismatch {
        /// The loan's buffer length.
        len: usize,
        /// Bytes given.
        given: usize,
    },
    /// Shared memory could not be lent.
    #[error("shared memory: {0}")]
    SharedMemory(#[from] ShmError),
    /// `/dev/shm` (a tmpfs) has no room for the loan's pages: the loan is refused
    /// rather than the process killed by `SIGBUS` when it writes them. Messages that
    /// subscribers hold, queue, or a history keeps take the room; a container's
    /// `/dev/shm` is 64 MB unless told otherwise.
    #[error(
        "/dev/shm is full: a loan of {} needs its pages and /dev/shm has {} free of {}; give it more \
         (docker run --shm-size=2g, or --ipc=host) or keep fewer messages alive (a smaller QoS depth, \
         subscribers that drop what they took)",
        mib(*needed), mib_or_unknown(*free), mib_or_unknown(*size)
    )]
    SharedMemoryFull {
        /// Bytes the loan needed.
        needed: u64,
        /// Bytes free on `/dev/shm`, if known.
        free: Option<u64>,
        /// Its size, if known.
        size: Option<u64>,
    },
    /// The process could not allocate an in-process frame.
    #[error("cannot allocate a frame of {len} bytes")]
    OutOfMemory {
        /// Bytes asked for.
        len: usize,
        /// What the allocator said.
        #[source]
        source: std::collections::TryReserveError,
    },
}

/// Publishing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// Reliable keep-all subscriptions of a reliable keep-all publisher kept
    /// their queues full for longer than `max_blocking_time`. Every other
    /// subscription received the message. Keep-last history never gives it.
    #[error(
        "{subscribers} reliable keep-all subscription(s) kept a full queue past max_blocking_time, or before they connected; they missed this message"
    )]
    QueueFull {
        /// How many missed it.
        subscribers: usize,
    },
    /// The loan was lent by another publisher (or another end of a service):
    /// only the one that lent it sends it.
    #[error("the loan was lent by another publisher; publish it with the one that lent it")]
    ForeignLoan,
    /// A buffer field of a loaned message was replaced by memory not from the loan.
    #[error("buffer field {ordinal} was replaced by memory that is not from the loan; write into the loan or use publish_copy")]
    BufferNotFromLoan {
        /// Which buffer field, in declaration order.
        ordinal: usize,
    },
    /// The small fields and buffer table exceed the room reserved in a loan.
    #[error("small fields need {needed} bytes but the loan reserved {reserved}; raise PublisherOptions::meta_reserve")]
    MetaTooLarge {
        /// Bytes needed.
        needed: usize,
        /// Bytes reserved.
        reserved: usize,
    },
    /// The message could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The small fields given for a generic message do not follow its type
    /// (or name buffers it does not have), or the message is of another type
    /// than the publisher's.
    #[error("not a {type_name}: {reason}")]
    Fields {
        /// The publisher's type.
        type_name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A string or sequence of the message holds more than its `.msg` bound
    /// allows, which ROS 2 refuses to serialize too. Rust, Python, C and
    /// C++ types all say it so.
    #[error("{type_name}: field `{field}`: {over}")]
    OverBound {
        /// The message's type.
        type_name: &'static str,
        /// The field's path in the message (`inner.label`, `tags[2]`).
        field: String,
        /// Which bound, and by how much.
        over: freight_msg::bounds::OverBound,
    },
    /// A backend could not describe a buffer for the subscribers.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// Lending memory for the copy failed.
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// The shared-memory layer failed.
    #[error("shared memory: {0}")]
    SharedMemory(#[from] ShmError),
    /// A device buffer could not be copied to the host for the subscribers
    /// that cannot take device memory.
    #[error("device-to-host copy: {0}")]
    HostCopy(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A frame lent for in-process subscriptions could not be moved to
    /// shared memory for one that appeared in another process since.
    #[error("moving the frame to shared memory: {0}")]
    Reroute(#[source] FrameError),
    /// Local subscriptions received the message; the DDS write for network
    /// readers failed.
    #[error("delivered locally, but the DDS write failed: {0}")]
    Network(DdsError),
    /// `/dev/shm` had no room for the message, and the DDS write that
    /// carries such messages instead (a publisher's spill writer) failed.
    #[error("/dev/shm had no room for the message, and sending it over DDS instead failed: {0}")]
    Spill(#[source] DdsError),
}

impl PublishError {
    /// The error of a message of the Rust type `type_name`: a bound its
    /// encoding found exceeded is said with the type, as for a run-time type.
    pub(crate) fn of_type(self, type_name: &'static str) -> PublishError {
        match self {
            PublishError::Encode(EncodeError::OverBound { field, over }) => {
                PublishError::OverBound { type_name, field, over }
            }
            other => other,
        }
    }
}

/// Taking a message failed. The subscription stays usable; the next message is
/// unaffected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TakeError {
    /// A message of another type arrived.
    #[error("received a message whose type hash {found:#x} is not {expected} ({expected_hash:#x}); dropped")]
    WrongType {
        /// The subscription's type.
        expected: &'static str,
        /// Its hash.
        expected_hash: u64,
        /// The hash found.
        found: u64,
    },
    /// The frame is malformed.
    #[error("malformed message dropped: {0}")]
    Malformed(#[from] FrameError),
    /// A buffer could not be imported and no host copy came with it.
    #[error("buffer {ordinal} came in {backend} only, which this subscription cannot use: {reason}")]
    Unusable {
        /// Which buffer.
        ordinal: usize,
        /// Its backend.
        backend: BackendKind,
        /// Why it cannot be used.
        reason: String,
    },
    /// A buffer failed to import.
    #[error("buffer {ordinal}: {source}")]
    Import {
        /// Which buffer.
        ordinal: usize,
        /// The backend's error.
        source: ImportError,
    },
    /// The subscription holds as many samples as it may; drop some first.
    #[error("the subscription holds {0} samples, its limit; drop received samples before taking more")]
    TooManyHeld(usize),
    /// The shared-memory layer failed.
    #[error("shared memory: {0}")]
    SharedMemory(#[from] ShmError),
    /// A sample from the network is not valid CDR of the subscription's type.
    #[error("malformed CDR from the network dropped: {0}")]
    MalformedCdr(DecodeError),
    /// Taking from the DDS reader failed.
    #[error("network plane (DDS): {0}")]
    Network(DdsError),
}

/// A service call failed. The client stays usable; a reply that comes after
/// its call gave up is dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No reply within the call's timeout, while a server was there.
    #[error("no reply from service {service} within {timeout:?}")]
    Timeout {
        /// The service, fully qualified.
        service: String,
        /// The call's timeout.
        timeout: std::time::Duration,
    },
    /// No server of the service is there.
    #[error("service {service} has no server; start one, or wait_for_service first")]
    NoServer {
        /// The service, fully qualified.
        service: String,
    },
    /// Every server of the service went away (its process ended) before it
    /// answered.
    #[error("every server of {service} went away before it answered")]
    ServerGone {
        /// The service, fully qualified.
        service: String,
    },
    /// Sending the request failed.
    #[error("sending the request: {0}")]
    Request(#[from] PublishError),
    /// Taking a reply failed.
    #[error("taking the reply: {0}")]
    Reply(#[from] TakeError),
}

/// Serving a request failed. The service stays usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Taking a request failed (it is dropped; the client times out).
    #[error("taking a request: {0}")]
    Request(#[from] TakeError),
    /// Sending the reply failed (the client's reply queue stayed full, the
    /// network refused it); the client times out.
    #[error("sending the reply: {0}")]
    Reply(#[from] PublishError),
}

/// Waiting in a wait-set or executor failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The OS wait mechanism failed.
    #[error("wait failed: {0}")]
    System(#[from] ShmError),
    /// Taking a ready message failed.
    #[error(transparent)]
    Take(#[from] TakeError),
}

/// Bytes in MiB, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

fn mib_or_unknown(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "an unknown amount".into(), mib)
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn an_iceoryx2_refusal_keeps_its_error_as_the_source() {
        let refused = iceoryx2::prelude::ServiceName::new("").expect_err("an empty service name");
        let shown = refused.to_string();
        let e: CreateError = CreateError::shm("/camera", "naming the data service")(refused);
        let CreateError::SharedMemory { topic, source } = &e else { panic!("{e:?}") };
        assert_eq!((topic.as_str(), source.operation()), ("/camera", "naming the data service"));
        assert_eq!(source.source().map(|s| s.to_string()), Some(shown.clone()));
        assert_eq!(e.to_string(), format!("shared memory for topic /camera: naming the data service: {shown}"));
    }
}
