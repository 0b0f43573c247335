//! Subscriptions: take messages, blocking, spinning, or not at all.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freight_backend::{BufferStorage, Frame, FrameMemory};
use freight_msg::{BackendKind, BackendSet, Message, RawBuffer};
use iceoryx2::prelude::*;

use crate::endpoint::{DeviceTag, SubscriberAd, WaitMode};
use crate::error::{CreateError, ShmError, TakeError};
use crate::frame::{decode_meta, EntryRef, FrameError, Header, ImportingDecoder, TableReader};
use crate::negotiation::{is_device_pool, negotiate, takes_device_memory};
use crate::network::{NetworkReader, PeerTag, ReceivedBuffers};
use crate::node::Node;
use crate::qos::{Durability, QoS};
use crate::sample::{MessageInfo, Sample, Transport};
use crate::sync::lock;
use crate::topic::{local_topic, open_services, IntraQueue, Ipc, LocalTopic, TopicServices};

type IoxSubscriber = iceoryx2::port::subscriber::Subscriber<Ipc, [u8], ()>;
type IoxSample = iceoryx2::sample::Sample<Ipc, [u8], ()>;
pub(crate) type Listener = iceoryx2::port::listener::Listener<Ipc>;

/// Options of a subscription beyond QoS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    /// Backends whose memory this subscription takes as is; for any other, it
    /// receives a host copy. `None`: `cpu` and `shm`. `cpu` is always
    /// included. Device memory (`cuda`, `fake-device`) is only taken from
    /// publishers on this process's device (matched by UUID); from others the
    /// subscription receives host bytes, and says so once per publisher on
    /// stderr. Creating the subscription fails with
    /// [`CreateError::BackendUnavailable`] when this process cannot use one of
    /// the backends.
    pub accepted_backends: Option<BackendSet>,
    /// How [`Subscription::take`] waits.
    pub wait: WaitMode,
}

/// A shared-memory sample as a frame. Buffers that view it keep it (and so the
/// publisher's memory) alive.
struct ShmFrame {
    /// Start and length of the payload, read once: iceoryx2's thread-safe
    /// samples take a lock on every `payload()` call, and frames are read often.
    ptr: *const u8,
    len: usize,
    _sample: IoxSample,
}

impl ShmFrame {
    fn new(sample: IoxSample) -> Self {
        let payload = sample.payload();
        ShmFrame { ptr: payload.as_ptr(), len: payload.len(), _sample: sample }
    }
}

impl std::fmt::Debug for ShmFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShmFrame({} bytes)", self.len)
    }
}

// SAFETY: the frame is a read-only view of shared memory that stays mapped and
// unchanged while the sample (owned here) lives; freight only reads it. The
// sample is released on drop, which iceoryx2's thread-safe services allow from
// any thread.
unsafe impl Send for ShmFrame {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for ShmFrame {}

impl FrameMemory for ShmFrame {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is the sample's payload, valid and immutable
        // for as long as `self` holds the sample.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

pub(crate) struct SubscriptionInner {
    node: Node,
    topic: String,
    qos: QoS,
    accepts: BackendSet,
    /// The UUIDs of this process's devices for the device-pool backends it accepts.
    devices: OwnDevices,
    /// Publishers (by id) whose buffers arrived in other memory than this
    /// subscription asked for, already reported on stderr; at most
    /// [`NOTED_MAX`].
    noted: Mutex<HashSet<u64>>,
    wait: WaitMode,
    _local: Arc<LocalTopic>,
    intra: Arc<IntraQueue>,
    services: TopicServices,
    iox: IoxSubscriber,
    pub(crate) listener: Listener,
    /// The DDS reader; `None` in a local-only context.
    network: Option<NetworkReader>,
}

/// Receives messages of type `M` from one topic.
///
/// ```no_run
/// use std::time::Duration;
/// use freight::Context;
/// use freight::msgs::sensor_msgs::Image;
/// let node = Context::new()?.create_node("viewer")?;
/// let sub = node.create_subscription::<Image>("image", 5)?;
/// if let Some(img) = sub.take(Duration::from_secs(1))? {
///     println!("{}x{} via {}", img.width, img.height, img.backend());
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Subscription<M: Message> {
    pub(crate) inner: Arc<SubscriptionInner>,
    _type: PhantomData<fn() -> M>,
}

impl<M: Message> std::fmt::Debug for Subscription<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subscription<{}>({})", M::TYPE_NAME, self.inner.topic)
    }
}

impl Node {
    /// Creates a subscription to `M` on `topic`, accepting every backend this
    /// process can use and waiting in the OS.
    pub fn create_subscription<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
    ) -> Result<Subscription<M>, CreateError> {
        self.create_subscription_with_options(topic, qos, SubscriptionOptions::default())
    }

    /// Creates a subscription with options (accepted backends, wait mode).
    pub fn create_subscription_with_options<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
        options: SubscriptionOptions,
    ) -> Result<Subscription<M>, CreateError> {
        Subscription::create(self, &self.resolve_topic_name(topic)?, qos.into(), options)
    }
}

impl<M: Message> Subscription<M> {
    pub(crate) fn create(
        node: &Node,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Self, CreateError> {
        let ctx = &node.inner.ctx.inner;
        let limits = ctx.limits;
        let depth = qos.validate(&limits)?;
        let accepts = options.accepted_backends.unwrap_or_else(|| ctx.default_accepted());
        for k in accepts.iter() {
            ctx.backend(k).map_err(CreateError::BackendUnavailable)?;
        }
        let ad = SubscriberAd {
            pid: std::process::id(),
            reliability: qos.reliability,
            durability: qos.durability,
            accepts,
            wait: options.wait,
            devices: ctx.devices_of(accepts),
            pid_ns: crate::process::pid_namespace(),
        };
        // Only the devices of accepted backends: asking creates the backend.
        let device = |k: BackendKind| accepts.contains(k).then(|| ctx.device_uuid(k)).flatten();
        let devices = OwnDevices { cuda: device(BackendKind::Cuda), fake_device: device(BackendKind::FakeDevice) };
        let local = local_topic(ctx.domain_id, topic, M::TYPE_NAME)?;
        let services = open_services(&node.inner.iox, ctx.domain_id, topic, M::TYPE_NAME, M::TYPE_HASH, &limits)?;
        let history = if qos.durability == Durability::TransientLocal { depth } else { 0 };
        let port = PortName::new(&ad.encode()).map_err(CreateError::shm(topic, "naming the subscriber port"))?;
        // Listen before connecting so no wake-up between the two is lost.
        let listener = services
            .event
            .listener_builder()
            .create()
            .map_err(CreateError::shm(topic, "creating the wake-up listener"))?;
        let iox = services
            .data
            .subscriber_builder()
            .name(&port)
            .buffer_size(depth)
            .history_request(history)
            .create()
            .map_err(CreateError::shm(topic, "creating the subscriber port"))?;
        let network = match ctx.participant_for(topic, &qos)? {
            Some(participant) => {
                // DDS arrivals wake this topic's waiting subscriptions as a local
                // publisher does.
                let notifier = services
                    .event
                    .notifier_builder()
                    .create()
                    .map_err(CreateError::shm(topic, "creating the DDS reader's notifier"))?;
                let wake = Box::new(move || _ = notifier.notify());
                let tag = PeerTag::of_this_process(node, None, Some(accepts));
                let r = NetworkReader::new(&participant, node, topic, &M::dds_type_name(), &qos, &tag, wake);
                Some(r.map_err(|source| CreateError::Network { topic: topic.into(), source })?)
            }
            None => None,
        };
        let intra = Arc::new(IntraQueue::new(ad, depth));
        lock(&local.subs).push(Arc::downgrade(&intra));
        Ok(Subscription {
            inner: Arc::new(SubscriptionInner {
                node: node.clone(),
                topic: topic.into(),
                qos,
                accepts,
                devices,
                noted: Mutex::default(),
                wait: options.wait,
                _local: local,
                intra,
                services,
                iox,
                listener,
                network,
            }),
            _type: PhantomData,
        })
    }

    /// The topic, fully qualified.
    pub fn topic_name(&self) -> &str {
        &self.inner.topic
    }

    /// The QoS.
    pub fn qos(&self) -> QoS {
        self.inner.qos
    }

    /// The backends this subscription accepts.
    pub fn accepted_backends(&self) -> BackendSet {
        self.inner.accepts
    }

    /// The node this subscription belongs to.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    /// DDS writers matched that are not freight on this host (a stock ROS 2
    /// node, a freight node elsewhere).
    pub fn network_publisher_count(&self) -> usize {
        self.inner.network.as_ref().map_or(0, NetworkReader::remote_writers)
    }

    /// Publishers of this topic alive now, in any process. Publishers whose
    /// process died are cleaned up first, so a crashed publisher disappears
    /// from this count.
    pub fn publisher_count(&self) -> usize {
        self.inner.node.inner.iox.try_cleanup_dead_nodes();
        self.inner.services.data.dynamic_config().number_of_publishers()
    }

    /// Takes the next message if one is queued.
    pub fn try_take(&self) -> Result<Option<Sample<M>>, TakeError> {
        if let Some(frame) = self.inner.intra.pop() {
            return decode(&self.inner, frame, Transport::Intra).map(Some);
        }
        match self.inner.iox.receive() {
            Ok(Some(s)) => decode(&self.inner, Arc::new(ShmFrame::new(s)), Transport::Shm).map(Some),
            Ok(None) => match &self.inner.network {
                Some(n) => match n.take() {
                    Ok(Some(sample)) => decode_cdr(&self.inner, sample).map(Some),
                    Ok(None) => Ok(None),
                    Err(e) => Err(TakeError::Network(e)),
                },
                None => Ok(None),
            },
            Err(iceoryx2::port::ReceiveError::ExceedsMaxBorrows) => {
                Err(TakeError::TooManyHeld(self.inner.node.inner.ctx.inner.limits.max_held_samples))
            }
            Err(e) => Err(ShmError::doing("receiving a sample")(e).into()),
        }
    }

    /// Takes the next message, waiting up to `timeout` for one (blocking in the
    /// OS or busy-polling, as the subscription's [`WaitMode`] says). `Ok(None)`
    /// when none came in time.
    pub fn take(&self, timeout: Duration) -> Result<Option<Sample<M>>, TakeError> {
        let deadline = Instant::now() + timeout;
        let mut polls = 0u32;
        loop {
            if let Some(s) = self.try_take()? {
                return Ok(Some(s));
            }
            match self.inner.wait {
                WaitMode::Spin => {
                    std::hint::spin_loop();
                    // Reading the clock costs as much as a poll: look at it
                    // only now and then, the deadline is not that precise.
                    polls = polls.wrapping_add(1);
                    if polls.is_multiple_of(SPIN_POLLS_PER_CLOCK_READ) && Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
                WaitMode::Block => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    self.inner.wait_for_wakeup(left)?
                }
            }
        }
    }
}

/// Polls between two looks at the clock in spin mode (about 10 µs).
const SPIN_POLLS_PER_CLOCK_READ: u32 = 256;

impl SubscriptionInner {
    /// Sleeps until a publisher wakes this topic or `timeout` passes.
    pub(crate) fn wait_for_wakeup(&self, timeout: Duration) -> Result<(), TakeError> {
        match self.listener.timed_wait(|_| {}, timeout) {
            Ok(_) => Ok(()),
            Err(iceoryx2::port::listener::ListenerWaitError::InterruptSignal) => Err(TakeError::Interrupted),
            Err(e) => Err(ShmError::doing("waiting for a wake-up")(e).into()),
        }
    }

    pub(crate) fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    /// Whether a message is queued.
    pub(crate) fn has_data(&self) -> bool {
        !self.intra.is_empty()
            || self.iox.has_samples().unwrap_or(false)
            || self.network.as_ref().is_some_and(NetworkReader::has_data)
    }

    /// Clears pending wake-ups (after a wait-set reported this subscription).
    pub(crate) fn drain_wakeups(&self) {
        let _ = self.listener.try_wait(|_| {});
    }

    /// Whether this subscription is on the device of `kind`'s memory that a
    /// frame names (by UUID; `None` on both sides matches).
    fn same_device(&self, kind: BackendKind, device: Option<[u8; 16]>) -> bool {
        self.devices.get(kind) == device
    }

    /// Says on stderr, once per publisher, that its buffers reach this
    /// subscription in other memory than it asked for, and why: a fallback
    /// is never silent.
    fn note_fallback(&self, publisher_id: u64, why: impl FnOnce() -> String) {
        let mut noted = lock(&self.noted);
        if noted.len() >= NOTED_MAX && !noted.contains(&publisher_id) {
            // Publishers come and go: forgetting them all costs at most a
            // repeated notice, where keeping them would grow without bound.
            noted.clear();
        }
        if noted.insert(publisher_id) {
            eprintln!("freight: subscription to {}: {}", self.topic, why());
        }
    }
}

/// Most publishers a subscription remembers having reported a fallback for.
const NOTED_MAX: usize = 256;

/// The devices of a subscription's process, for the device-pool backends it
/// accepts (`None`: not accepted, or a device without UUID).
#[derive(Debug, Clone, Copy, Default)]
struct OwnDevices {
    cuda: Option<[u8; 16]>,
    fake_device: Option<[u8; 16]>,
}

impl OwnDevices {
    fn get(&self, kind: BackendKind) -> Option<[u8; 16]> {
        match kind {
            BackendKind::Cuda => self.cuda,
            BackendKind::FakeDevice => self.fake_device,
            _ => None,
        }
    }
}

/// A device for messages: its short tag, or `none`.
fn device_name(uuid: Option<[u8; 16]>) -> String {
    uuid.map_or_else(|| "none".into(), |u| DeviceTag::of_uuid(&u).short())
}

impl Drop for SubscriptionInner {
    /// Gives back device-memory holds of messages this subscription will never
    /// read: the publisher counted it as a reader of each of them.
    fn drop(&mut self) {
        let release = |bytes: &[u8]| {
            if let Ok(h) = Header::read(bytes) {
                if let Ok(meta) = decode_meta(bytes, &h) {
                    release_unimported(self, meta.table, h.device);
                }
            }
        };
        while let Some(frame) = self.intra.pop() {
            release(frame.bytes());
        }
        while let Ok(Some(sample)) = self.iox.receive() {
            release(sample.payload());
        }
    }
}

/// Reads a frame: checks it, imports each buffer from the representation this
/// subscription takes (as the small-field decoder reaches it), decodes the
/// small fields.
fn decode<M: Message>(sub: &SubscriptionInner, frame: Frame, transport: Transport) -> Result<Sample<M>, TakeError> {
    let bytes = frame.bytes();
    let header = Header::read(bytes)?;
    if header.type_hash != M::TYPE_HASH {
        return Err(TakeError::WrongType {
            expected: M::TYPE_NAME,
            expected_hash: M::TYPE_HASH,
            found: header.type_hash,
        });
    }
    let meta = decode_meta(bytes, &header)?;
    let mut first_backend = None;
    let mut failure = None;
    let mut decoder = ImportingDecoder {
        table: meta.table.clone(),
        next: 0,
        import: |ordinal: usize, e: EntryRef<'_>| match import(sub, &frame, ordinal, e, &header) {
            Ok(storage) => {
                first_backend.get_or_insert(storage.backend());
                Ok(RawBuffer::from_storage(storage))
            }
            Err(err) => {
                let text = err.to_string();
                failure = Some(err);
                Err(text)
            }
        },
        table_error: None,
    };
    let decoded = M::from_cdr_with(meta.small, &mut decoder);
    let (unread, table_error) = (decoder.table, decoder.table_error);
    let unread_count = unread.remaining();
    release_unimported(sub, unread, header.device);
    if let (Err(_), Some(e)) = (&decoded, table_error) {
        return Err(TakeError::Malformed(e));
    }
    let msg = match (decoded, failure) {
        (Ok(msg), _) if unread_count == 0 => msg,
        (Ok(_), _) => {
            return Err(TakeError::Malformed(FrameError::Truncated {
                len: bytes.len(),
                reason: "buffer table has entries no field refers to",
            }))
        }
        (Err(_), Some(typed)) => return Err(typed),
        (Err(e), None) => return Err(FrameError::from(e).into()),
    };
    let info = MessageInfo {
        publisher_id: header.publisher_id,
        sequence: header.sequence,
        publish_time_ns: header.publish_time_ns,
        transport,
        backend: first_backend.unwrap_or(BackendKind::Cpu),
    };
    Ok(Sample { msg, info })
}

/// Reads a message that came over DDS: plain CDR, buffers viewing the sample.
fn decode_cdr<M: Message>(sub: &SubscriptionInner, sample: freight_dds::ReceivedCdr) -> Result<Sample<M>, TakeError> {
    let sample = Arc::new(sample);
    let info = MessageInfo {
        publisher_id: sample.publication_handle(),
        sequence: 0,
        publish_time_ns: u64::try_from(sample.source_timestamp_ns()).unwrap_or(0),
        transport: Transport::Network,
        backend: BackendKind::Cpu,
    };
    let msg =
        M::from_cdr_with(sample.bytes(), &mut ReceivedBuffers(sample.clone())).map_err(TakeError::MalformedCdr)?;
    if let Some(wanted) = sub.accepts.iter().find(|k| !matches!(k, BackendKind::Cpu | BackendKind::Shm)) {
        sub.note_fallback(info.publisher_id, || {
            format!(
                "a publisher reached over the network (another host, or not freight) sends CDR: its buffers arrive \
                 in cpu memory, not {wanted}"
            )
        });
    }
    Ok(Sample { msg, info })
}

/// Imports one buffer, in the memory [`negotiate`] picks: the publisher's if
/// this subscription takes its backend (and, for device memory, is on its
/// device), else the host bytes (the host copy that came with a device
/// buffer, or the buffer itself in the frame) as they are or mapped for this
/// process's device (`cuda-host`), else a private CPU copy. When the chosen
/// memory cannot be opened, the host bytes are taken instead (and the
/// fallback reported). Never an empty buffer in place of data.
fn import(
    sub: &SubscriptionInner,
    frame: &Frame,
    ordinal: usize,
    e: EntryRef<'_>,
    header: &Header,
) -> Result<Arc<dyn BufferStorage>, TakeError> {
    let ctx = &sub.node.inner.ctx.inner;
    let with = |kind: BackendKind, descriptor: &[u8]| {
        let b = ctx.backend(kind).map_err(|u| TakeError::Unusable { ordinal, backend: kind, reason: u.reason })?;
        b.import(frame, descriptor).map_err(|source| TakeError::Import { ordinal, source })
    };
    let same_device = sub.same_device(e.kind, header.device);
    // Where the host bytes are: the host copy that came with a device buffer,
    // or the buffer itself when it is host memory in the frame.
    let host = e.alt.map_or(e.kind, |(kind, _)| kind);
    let host_descriptor = match e.alt {
        Some((_, d)) => Some(d),
        None if e.kind.is_host_memory() => Some(e.descriptor),
        None => None,
    };
    let choice = negotiate(e.kind, host, sub.accepts, same_device);
    let first = if choice == e.kind {
        with(choice, e.descriptor)
    } else {
        match host_descriptor {
            Some(d) => with(choice, d),
            None => {
                return Err(TakeError::Unusable {
                    ordinal,
                    backend: e.kind,
                    reason: "no host copy came with it (did the subscription join after it was sent?)".into(),
                })
            }
        }
    };
    let storage = match (first, host_descriptor) {
        (Ok(s), _) => s,
        (Err(err), None) => return Err(err),
        (Err(err), Some(d)) => {
            if choice == e.kind && takes_device_memory(e.kind, sub.accepts, same_device) {
                // Not imported: give the hold back (an error means there was none).
                if let Ok(b) = ctx.backend(e.kind) {
                    let _ = b.release_unimported(e.descriptor, std::process::id());
                }
            }
            // The host bytes as they are if this subscription takes them,
            // else a private copy, which always works for frame memory.
            let frame_kind = if frame.is_process_local() { BackendKind::Cpu } else { BackendKind::Shm };
            let fallback =
                if sub.accepts.contains(frame_kind) && frame_kind != choice { frame_kind } else { BackendKind::Cpu };
            if fallback == choice {
                return Err(err);
            }
            let storage = with(fallback, d)?;
            sub.note_fallback(header.publisher_id, || {
                format!(
                    "buffer {ordinal} could not be taken in {choice} ({err}); it arrives in {} instead (and so may \
                     the buffers of later messages of publisher {:016x})",
                    storage.backend(),
                    header.publisher_id
                )
            });
            storage
        }
    };
    if is_device_pool(e.kind) && sub.accepts.contains(e.kind) && !same_device {
        sub.note_fallback(header.publisher_id, || {
            format!(
                "publisher {:016x} lends {} memory of device {}, this subscription's device is {}: its buffers arrive \
                 as a host copy in {}",
                header.publisher_id,
                e.kind,
                device_name(header.device),
                device_name(sub.devices.get(e.kind)),
                storage.backend()
            )
        });
    }
    Ok(storage)
}

/// Gives back holds on device blocks this subscription will not import; the
/// frame's publisher lends memory of `device`.
fn release_unimported(sub: &SubscriptionInner, rest: TableReader<'_>, device: Option<[u8; 16]>) {
    let ctx = &sub.node.inner.ctx.inner;
    for e in rest.flatten() {
        if takes_device_memory(e.kind, sub.accepts, sub.same_device(e.kind, device)) {
            if let Ok(b) = ctx.backend(e.kind) {
                let _ = b.release_unimported(e.descriptor, std::process::id());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgs::std_msgs::UInt8MultiArray;
    use crate::Context;

    #[test]
    fn the_publishers_a_subscription_reported_are_bounded() {
        let ctx = Context::builder().local_only().create().unwrap();
        let node = ctx.create_node("noted").unwrap();
        let sub = node.create_subscription::<UInt8MultiArray>("/noted_bound", QoS::default()).unwrap();
        for id in 0..(3 * NOTED_MAX as u64) {
            sub.inner.note_fallback(id, || format!("publisher {id}"));
            assert!(lock(&sub.inner.noted).len() <= NOTED_MAX);
        }
        // The last one is remembered: no second notice for it.
        let last = 3 * NOTED_MAX as u64 - 1;
        sub.inner.note_fallback(last, || panic!("publisher {last} was reported twice"));
    }
}
