//! Subscriptions: take messages, blocking, spinning, or not at all.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight_backend::{Frame, FrameMemory};
use freight_msg::{BackendKind, BackendSet, CdrReader, Message, RawBuffer};
use iceoryx2::prelude::*;

use crate::context::Node;
use crate::endpoint::{SubscriberAd, WaitMode};
use crate::error::{CreateError, TakeError};
use crate::frame::{decode_meta, Header, ImportedBuffers};
use crate::qos::{Durability, QoS};
use crate::sample::{MessageInfo, Sample, Transport};
use crate::topic::{local_topic, lock, open_services, IntraQueue, Ipc, LocalTopic, TopicServices};

type IoxSubscriber = iceoryx2::port::subscriber::Subscriber<Ipc, [u8], ()>;
type IoxSample = iceoryx2::sample::Sample<Ipc, [u8], ()>;
pub(crate) type Listener = iceoryx2::port::listener::Listener<Ipc>;

/// Options of a subscription beyond QoS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionOptions {
    /// Backends whose memory this subscription takes as is; for any other, it
    /// receives a host copy. `None`: every backend this process can use
    /// (`cpu`, `shm`). `cpu` is always included.
    pub accepted_backends: Option<BackendSet>,
    /// How [`Subscription::take`] waits.
    pub wait: WaitMode,
}

/// A shared-memory sample as a frame. Buffers that view it keep it (and so the
/// publisher's memory) alive.
struct ShmFrame(IoxSample);

impl std::fmt::Debug for ShmFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShmFrame({} bytes)", self.0.payload().len())
    }
}

// SAFETY: the sample is a read-only view of shared memory; freight only reads
// its bytes (`payload()`), which iceoryx2 permits from any thread for
// thread-safe services. Release happens on drop, from whichever thread drops it.
unsafe impl Sync for ShmFrame {}

impl FrameMemory for ShmFrame {
    fn bytes(&self) -> &[u8] {
        self.0.payload()
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
    wait: WaitMode,
    _local: Arc<LocalTopic>,
    intra: Arc<IntraQueue>,
    services: TopicServices,
    iox: IoxSubscriber,
    pub(crate) listener: Listener,
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

impl<M: Message> Subscription<M> {
    pub(crate) fn create(
        node: &Node,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Self, CreateError> {
        let ctx = &node.inner.ctx.inner;
        let limits = ctx.limits;
        let depth = qos.depth(limits.max_depth);
        if depth == 0 || depth > limits.max_depth {
            return Err(CreateError::OverLimit { what: "history depth (1..)", asked: depth, limit: limits.max_depth });
        }
        let accepts = options.accepted_backends.unwrap_or_else(|| ctx.default_accepted());
        for k in accepts.iter() {
            if ctx.backend(k).is_none() {
                return Err(CreateError::BackendUnavailable(k));
            }
        }
        let ad = SubscriberAd {
            pid: std::process::id(),
            reliability: qos.reliability,
            durability: qos.durability,
            accepts,
            wait: options.wait,
        };
        let local = local_topic(ctx.domain_id, topic, M::TYPE_NAME)?;
        let services = open_services(&node.inner.iox, ctx.domain_id, topic, M::TYPE_NAME, M::TYPE_HASH, &limits)?;
        let shm_err = |e: String| CreateError::SharedMemory { topic: topic.into(), reason: e };
        let history = if qos.durability == Durability::TransientLocal { depth } else { 0 };
        let port = PortName::new(&ad.encode()).map_err(|e| shm_err(format!("{e:?}")))?;
        // Listen before connecting so no wake-up between the two is lost.
        let listener = services.event.listener_builder().create().map_err(|e| shm_err(format!("{e:?}")))?;
        let iox = services
            .data
            .subscriber_builder()
            .name(&port)
            .buffer_size(depth)
            .history_request(history)
            .create()
            .map_err(|e| shm_err(format!("{e:?}")))?;
        let intra = Arc::new(IntraQueue::new(ad, depth));
        lock(&local.subs).push(Arc::downgrade(&intra));
        Ok(Subscription {
            inner: Arc::new(SubscriptionInner {
                node: node.clone(),
                topic: topic.into(),
                qos,
                accepts,
                wait: options.wait,
                _local: local,
                intra,
                services,
                iox,
                listener,
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
            Ok(Some(s)) => decode(&self.inner, Arc::new(ShmFrame(s)), Transport::Shm).map(Some),
            Ok(None) => Ok(None),
            Err(iceoryx2::port::ReceiveError::ExceedsMaxBorrows) => {
                Err(TakeError::TooManyHeld(self.inner.node.inner.ctx.inner.limits.max_held_samples))
            }
            Err(e) => Err(TakeError::SharedMemory(format!("{e:?}"))),
        }
    }

    /// Takes the next message, waiting up to `timeout` for one (blocking in the
    /// OS or busy-polling, as the subscription's [`WaitMode`] says). `Ok(None)`
    /// when none came in time.
    pub fn take(&self, timeout: Duration) -> Result<Option<Sample<M>>, TakeError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_take()? {
                return Ok(Some(s));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match self.inner.wait {
                WaitMode::Spin => std::hint::spin_loop(),
                WaitMode::Block => self.inner.wait_for_wakeup(left)?,
            }
        }
    }
}

impl SubscriptionInner {
    /// Sleeps until a publisher wakes this topic or `timeout` passes.
    pub(crate) fn wait_for_wakeup(&self, timeout: Duration) -> Result<(), TakeError> {
        match self.listener.timed_wait(|_| {}, timeout) {
            Ok(_) => Ok(()),
            Err(iceoryx2::port::listener::ListenerWaitError::InterruptSignal) => Err(TakeError::Interrupted),
            Err(e) => Err(TakeError::SharedMemory(format!("{e:?}"))),
        }
    }

    pub(crate) fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    /// Whether a message is queued.
    pub(crate) fn has_data(&self) -> bool {
        !self.intra.is_empty() || self.iox.has_samples().unwrap_or(false)
    }

    /// Clears pending wake-ups (after a wait-set reported this subscription).
    pub(crate) fn drain_wakeups(&self) {
        let _ = self.listener.try_wait(|_| {});
    }
}

/// Reads a frame: checks it, imports each buffer from the representation this
/// subscription takes, decodes the small fields.
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
    let ctx = &sub.node.inner.ctx.inner;
    let mut buffers: Vec<Option<RawBuffer>> = Vec::with_capacity(meta.entries.len());
    let mut first_backend = None;
    for (ordinal, e) in meta.entries.iter().enumerate() {
        // The publisher counted this subscription as a reader of the primary
        // memory exactly when it accepts that backend; it owes a release then.
        let counted = sub.accepts.contains(e.kind) && !matches!(e.kind, BackendKind::Cpu | BackendKind::Shm);
        let primary = sub.accepts.contains(e.kind).then(|| ctx.backend(e.kind)).flatten();
        let imported = match (primary, &e.alt) {
            (Some(b), _) => b.import(&frame, &e.descriptor).map_err(|source| TakeError::Import { ordinal, source }),
            (None, Some((alt_kind, alt_desc))) => {
                if counted {
                    if let Some(b) = ctx.backend(e.kind) {
                        let _ = b.release_unimported(&e.descriptor);
                    }
                }
                let kind = if sub.accepts.contains(*alt_kind) { *alt_kind } else { BackendKind::Cpu };
                let b = ctx.backend(kind).expect("cpu and shm are always available");
                b.import(&frame, alt_desc).map_err(|source| TakeError::Import { ordinal, source })
            }
            (None, None) if e.kind == BackendKind::Shm => {
                // Shared memory this subscription does not take as is: a CPU copy.
                let b = ctx.backend(BackendKind::Cpu).expect("cpu is always available");
                b.import(&frame, &e.descriptor).map_err(|source| TakeError::Import { ordinal, source })
            }
            (None, None) => Err(TakeError::Unusable {
                ordinal,
                backend: e.kind,
                reason: "no host copy came with it (the subscription joined after it was sent?)".into(),
            }),
        };
        match imported {
            Ok(storage) => {
                first_backend.get_or_insert(storage.backend());
                buffers.push(Some(RawBuffer::from_storage(storage)));
            }
            Err(err) => {
                release_rest(sub, &meta.entries[ordinal + 1..]);
                return Err(err);
            }
        }
    }
    let mut r = CdrReader::new(meta.small).map_err(crate::frame::FrameError::from)?;
    let msg = M::read(&mut r, &mut ImportedBuffers { buffers }).map_err(crate::frame::FrameError::from)?;
    r.finish().map_err(crate::frame::FrameError::from)?;
    let info = MessageInfo {
        publisher_id: header.publisher_id,
        sequence: header.sequence,
        publish_time_ns: header.publish_time_ns,
        transport,
        backend: first_backend.unwrap_or(BackendKind::Cpu),
    };
    Ok(Sample { msg, info })
}

/// Gives back holds on device blocks this subscription will not import.
fn release_rest(sub: &SubscriptionInner, entries: &[crate::frame::Entry]) {
    let ctx = &sub.node.inner.ctx.inner;
    for e in entries {
        if sub.accepts.contains(e.kind) && !matches!(e.kind, BackendKind::Cpu | BackendKind::Shm) {
            if let Some(b) = ctx.backend(e.kind) {
                let _ = b.release_unimported(&e.descriptor);
            }
        }
    }
}
