//! Subscriptions: take messages, blocking, spinning, or not at all — the
//! typed front of a `delivery::Receiver`.

use std::marker::PhantomData;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use freight_msg::{BackendSet, Message};

use crate::delivery::{decode, decode_cdr, Arrival, MessageType, Receiver};
use crate::endpoint::WaitMode;
use crate::error::{CreateError, TakeError};
use crate::network::NetworkReader;
use crate::node::Node;
use crate::qos::QoS;
use crate::sample::Sample;

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
    pub(crate) inner: Arc<Receiver>,
    _type: PhantomData<fn() -> M>,
}

/// The messages of DDS publishers (stock ROS 2 nodes, other hosts) that DDS
/// knows a subscription missed since it was made, rclcpp's message-lost
/// count: gaps in a writer's sequence numbers (a best-effort datagram that did
/// not come, a sample a keep-last writer dropped before this subscription had
/// it) and, for a best-effort subscription, messages that found its queue
/// full. Messages over shared memory are not counted here: gaps in their
/// publishers' sequence numbers ([`MessageInfo::sequence`](crate::MessageInfo))
/// show them. A freight publisher on this host sends to DDS only for readers
/// elsewhere (or on a transient-local topic), and this subscription drops
/// those copies; should DDS miss one of them, it counts here too.
///
/// A handle, cloneable and `Send`, that stays usable when the subscription
/// moves (into an [`Executor`](crate::Executor)); 0 in a local-only context
/// and once the subscription is gone.
///
/// ```no_run
/// use freight::{Context, Executor};
/// use freight::msgs::sensor_msgs::Image;
/// let node = Context::new()?.create_node("recorder")?;
/// let sub = node.create_subscription::<Image>("image", freight::QoS::sensor_data())?;
/// let losses = sub.network_losses();
/// let mut exec = Executor::new();
/// exec.add_subscription(sub, |_image| {});
/// exec.spin_once(std::time::Duration::from_secs(1))?;
/// println!("{} images missed over DDS", losses.count());
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct NetworkLosses(Weak<Receiver>);

impl std::fmt::Debug for NetworkLosses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NetworkLosses({})", self.count())
    }
}

impl NetworkLosses {
    /// The losses of the subscription `receiver` is the core of.
    pub(crate) fn of(receiver: &Arc<Receiver>) -> Self {
        NetworkLosses(Arc::downgrade(receiver))
    }

    /// The count now.
    pub fn count(&self) -> u64 {
        self.0.upgrade().and_then(|r| r.network.as_ref().map(NetworkReader::missed)).unwrap_or(0)
    }
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
        let inner = Receiver::open(node, topic, qos, options.accepted_backends, options.wait, &MessageType::of::<M>())?;
        Ok(Subscription { inner, _type: PhantomData })
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

    /// What DDS knows this subscription missed of its DDS publishers, readable
    /// from anywhere while the subscription lives (see [`NetworkLosses`]).
    pub fn network_losses(&self) -> NetworkLosses {
        NetworkLosses::of(&self.inner)
    }

    /// Publishers of this topic alive now, in any process. Publishers whose
    /// process died are cleaned up first, so a crashed publisher disappears
    /// from this count.
    pub fn publisher_count(&self) -> usize {
        self.inner.publisher_count()
    }

    /// Takes the next message if one is queued.
    pub fn try_take(&self) -> Result<Option<Sample<M>>, TakeError> {
        match self.inner.next()? {
            Some(Arrival::Frame(frame, transport)) => decode(&self.inner, frame, transport).map(Some),
            Some(Arrival::Cdr(sample)) => decode_cdr(&self.inner, sample).map(Some),
            // A publisher hands its message over only when every endpoint of
            // the topic in this process has its Rust type
            // (`LocalTopic::one_rust_type`), so this is an `M`; the error is
            // a guard, not a path.
            Some(Arrival::Sample(sample)) => match sample.downcast::<Sample<M>>() {
                Ok(sample) => Ok(Some(*sample)),
                Err(_) => Err(TakeError::WrongType { expected: M::TYPE_NAME, expected_hash: M::TYPE_HASH, found: 0 }),
            },
            None => Ok(None),
        }
    }

    /// Takes the next message, waiting up to `timeout` for one (blocking in the
    /// OS or busy-polling, as the subscription's [`WaitMode`] says). `Ok(None)`
    /// when none came in time.
    pub fn take(&self, timeout: Duration) -> Result<Option<Sample<M>>, TakeError> {
        take_within(&self.inner, timeout, || self.try_take())
    }
}

/// Calls `try_take` until it gives a message or `timeout` passes, waiting
/// between calls as the receiver's [`WaitMode`] says.
pub(crate) fn take_within<T>(
    inner: &Receiver,
    timeout: Duration,
    mut try_take: impl FnMut() -> Result<Option<T>, TakeError>,
) -> Result<Option<T>, TakeError> {
    let deadline = Instant::now() + timeout;
    let mut polls = 0u32;
    loop {
        if let Some(s) = try_take()? {
            return Ok(Some(s));
        }
        match inner.wait_mode() {
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
                inner.wait_for_wakeup(left)?
            }
        }
    }
}

/// Polls between two looks at the clock in spin mode (about 10 µs).
const SPIN_POLLS_PER_CLOCK_READ: u32 = 256;
