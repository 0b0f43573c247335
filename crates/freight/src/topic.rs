//! A topic on the local plane: its iceoryx2 service and its in-process
//! subscriptions.
//!
//! Each topic is an iceoryx2 service, `freight/<domain><topic>`, a `[u8]`
//! publish-subscribe service carrying frames (subscriptions that block are
//! woken through their process's bell, `delivery/bell.rs`, not per topic).
//! The message type is an attribute of the service, so a publisher of
//! another type is refused when it opens the topic, in any process.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use freight_backend::Frame;
use iceoryx2::prelude::*;
use iceoryx2::service::attribute::{AttributeKey, AttributeValue, AttributeVerifier};
use iceoryx2::service::builder::publish_subscribe::PublishSubscribeOpenOrCreateError;

use crate::endpoint::SubscriberAd;
use crate::error::CreateError;
use crate::limits::Limits;
use crate::sync::lock;

/// The iceoryx2 service flavour: thread-safe ports, so endpoints are `Send + Sync`.
pub(crate) type Ipc = crate::iox_service::Service;
pub(crate) type DataService = iceoryx2::service::port_factory::publish_subscribe::PortFactory<Ipc, [u8], ()>;

const TYPE_KEY: &str = "freight.type";
const HASH_KEY: &str = "freight.type_hash";

/// The iceoryx2 service of a topic, opened by one node and shared by its
/// endpoints on the topic ([`OpenTopics`]).
pub(crate) struct TopicServices {
    pub data: DataService,
    /// The message type's hash the data service was opened with.
    type_hash: u64,
}

/// The topics a node has open. Its endpoints on one topic share the topic's
/// service: each opening of a service keeps its static and dynamic config
/// open (two descriptors and a mapping), so a publisher and a subscription of
/// one node on one topic cost two descriptors fewer than they would with a
/// service each.
#[derive(Default)]
pub(crate) struct OpenTopics(Mutex<HashMap<String, Weak<TopicServices>>>);

impl OpenTopics {
    /// The services of `topic`: the node's, if an endpoint of it has them open
    /// with the same type, else opened (or created) now. Another type on the
    /// topic fails as [`open_services`] does.
    pub(crate) fn open(
        &self,
        node: &iceoryx2::node::Node<Ipc>,
        domain: u32,
        topic: &str,
        type_name: &'static str,
        type_hash: u64,
        limits: &Limits,
    ) -> Result<Arc<TopicServices>, CreateError> {
        // Held while opening: two threads of one node opening one topic get
        // one set of services.
        let mut open = lock(&self.0);
        if let Some(services) = open.get(topic).and_then(Weak::upgrade) {
            if services.type_hash == type_hash {
                return Ok(services);
            }
        }
        let services = Arc::new(open_services(node, domain, topic, type_name, type_hash, limits)?);
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(topic.to_string(), Arc::downgrade(&services));
        Ok(services)
    }
}

fn open_services(
    node: &iceoryx2::node::Node<Ipc>,
    domain: u32,
    topic: &str,
    type_name: &'static str,
    type_hash: u64,
    limits: &Limits,
) -> Result<TopicServices, CreateError> {
    let data_name = ServiceName::new(&format!("freight/{domain}{topic}"))
        .map_err(CreateError::shm(topic, "naming the data service"))?;
    let hash = format!("{type_hash:016x}");
    let attr = |k: &str, v: &str| -> Result<(AttributeKey, AttributeValue), CreateError> {
        Ok((
            k.try_into().map_err(CreateError::shm(topic, "an attribute key"))?,
            v.try_into().map_err(CreateError::shm(topic, "an attribute value"))?,
        ))
    };
    let (tk, tv) = attr(TYPE_KEY, type_name)?;
    let (hk, hv) = attr(HASH_KEY, &hash)?;
    let verifier = AttributeVerifier::new()
        .require(&tk, &tv)
        .and_then(|v| v.require(&hk, &hv))
        .map_err(CreateError::shm(topic, "requiring the type attributes"))?;
    let data = node
        .service_builder(&data_name)
        .publish_subscribe::<[u8]>()
        .max_publishers(limits.max_publishers)
        .max_subscribers(limits.max_subscriptions)
        .subscriber_max_buffer_size(limits.max_depth)
        .history_size(limits.max_history)
        .subscriber_max_borrowed_samples(limits.max_held_samples)
        // Full queues are handled per subscriber by the publisher's
        // backpressure handler (reliable waits, best effort skips).
        .enable_safe_overflow(false)
        .open_or_create_with_attributes(&verifier)
        .map_err(|e| match e {
            PublishSubscribeOpenOrCreateError::PublishSubscribeOpenError(
                iceoryx2::service::builder::publish_subscribe::PublishSubscribeOpenError::IncompatibleAttributes,
            ) => CreateError::WrongType {
                topic: topic.into(),
                existing: existing_type(node, &data_name).unwrap_or_else(|| "another type".into()),
                requested: type_name,
            },
            e => CreateError::shm(topic, "opening the data service")(e),
        })?;
    Ok(TopicServices { data, type_hash })
}

fn existing_type(node: &iceoryx2::node::Node<Ipc>, name: &ServiceName) -> Option<String> {
    let svc = node.service_builder(name).publish_subscribe::<[u8]>().open().ok()?;
    svc.attributes().key_value(&type_key(), 0).map(|v| v.to_string())
}

/// The attribute key under which a topic's service records its message type.
pub(crate) fn type_key() -> AttributeKey {
    TYPE_KEY.try_into().expect("a short ASCII key is a valid attribute key")
}

/// What a topic's in-process subscriptions share with its in-process publishers.
pub(crate) struct LocalTopic {
    pub type_name: &'static str,
    /// The Rust type of the first endpoint, and whether every endpoint since
    /// had it too. Two Rust types can be one ROS type (a `.msg` generated
    /// in two crates: same name, same hash), and a `Sample<M>` handed over
    /// as it is reaches only subscriptions of the same `M`.
    rust_type: TypeId,
    one_rust_type: AtomicBool,
    pub subs: Mutex<Vec<Weak<IntraQueue>>>,
}

impl LocalTopic {
    /// Whether every endpoint of the topic in this process has one Rust type.
    pub(crate) fn one_rust_type(&self) -> bool {
        self.one_rust_type.load(Ordering::Acquire)
    }

    /// Calls `f` with the live in-process subscriptions, gathered under the
    /// lock and used outside it (a reliable delivery may wait for room), in a
    /// vector this thread keeps: no allocation per publish.
    pub(crate) fn with_subscribers<R>(&self, f: impl FnOnce(&[Arc<IntraQueue>]) -> R) -> R {
        thread_local! {
            static SCRATCH: Cell<Vec<Arc<IntraQueue>>> = const { Cell::new(Vec::new()) };
        }
        let mut live = SCRATCH.take();
        {
            let mut subs = lock(&self.subs);
            subs.retain(|w| w.strong_count() > 0);
            live.extend(subs.iter().filter_map(Weak::upgrade));
        }
        let result = f(&live);
        live.clear();
        SCRATCH.set(live);
        result
    }
}

type Registry = Mutex<HashMap<(u32, String), Weak<LocalTopic>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The process-wide record of `topic` in `domain`, created on first use.
pub(crate) fn local_topic(
    domain: u32,
    topic: &str,
    type_name: &'static str,
    rust_type: TypeId,
) -> Result<Arc<LocalTopic>, CreateError> {
    let mut reg = lock(registry());
    reg.retain(|_, w| w.strong_count() > 0);
    let key = (domain, topic.to_string());
    if let Some(t) = reg.get(&key).and_then(Weak::upgrade) {
        if t.type_name != type_name {
            return Err(CreateError::WrongType {
                topic: topic.into(),
                existing: t.type_name.into(),
                requested: type_name,
            });
        }
        if t.rust_type != rust_type {
            t.one_rust_type.store(false, Ordering::Release);
        }
        return Ok(t);
    }
    let t = Arc::new(LocalTopic {
        type_name,
        rust_type,
        one_rust_type: AtomicBool::new(true),
        subs: Mutex::new(Vec::new()),
    });
    reg.insert(key, Arc::downgrade(&t));
    Ok(t)
}

/// What a queue does with a frame its subscription will never read: gives
/// back the device holds the publisher took for it.
pub(crate) type OnEvict = Box<dyn Fn(&Frame) + Send + Sync>;

/// What an in-process queue holds.
pub(crate) enum Handed {
    /// A frame, read as one from shared memory is (its buffers may be device
    /// memory the subscription negotiates).
    Frame(Frame),
    /// A received message as it is, `Sample<M>` of the topic's type (a
    /// `GenericSample` between generic endpoints): a message in host memory
    /// published while every reader is in this process, handed over without
    /// encoding it (no device holds to give back).
    Sample(Box<dyn Any + Send>),
}

/// An in-process subscription's queue of frames and samples.
pub(crate) struct IntraQueue {
    pub ad: SubscriberAd,
    depth: usize,
    /// Called for the oldest frame when the queue is full and a new one comes
    /// that the publisher does not wait to deliver: keep last, as ROS 2's
    /// history does.
    on_evict: OnEvict,
    frames: Mutex<VecDeque<Handed>>,
    /// Frames queued, readable without the lock: a polling subscription looks
    /// here millions of times a second and must not take the mutex to see "empty".
    queued: AtomicUsize,
    space: Condvar,
    /// Publishers waiting on `space`, changed and read under the `frames`
    /// lock: `Condvar::notify_one` is a futex system call even when nobody
    /// waits, which would cost every in-process take one.
    waiting: AtomicUsize,
}

/// What a full in-process queue does with a new message.
pub(crate) enum WhenFull {
    /// Waits up to this long for room.
    Wait(Duration),
    /// Lets its oldest message go: keep last.
    DropOldest,
    /// Misses the new message.
    DropNew,
}

/// Whether an in-process delivery went through.
pub(crate) enum Delivery {
    Delivered,
    /// The queue was full and missed the message (`WhenFull::DropNew`).
    Skipped,
    /// The publisher waited for room and the queue stayed full for its
    /// `max_blocking_time`.
    TimedOut,
}

impl IntraQueue {
    pub(crate) fn new(ad: SubscriberAd, depth: usize, on_evict: OnEvict) -> Self {
        IntraQueue {
            ad,
            depth,
            on_evict,
            frames: Mutex::new(VecDeque::with_capacity(depth)),
            queued: AtomicUsize::new(0),
            space: Condvar::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Queues a frame; a full queue does what `when_full` says.
    pub(crate) fn push(&self, item: Handed, when_full: WhenFull) -> Delivery {
        let mut q = lock(&self.frames);
        if q.len() >= self.depth {
            let max_blocking_time = match when_full {
                WhenFull::Wait(t) => t,
                WhenFull::DropNew => return Delivery::Skipped,
                WhenFull::DropOldest => {
                    let oldest = q.pop_front();
                    q.push_back(item);
                    drop(q);
                    if let Some(Handed::Frame(oldest)) = oldest {
                        (self.on_evict)(&oldest);
                    }
                    return Delivery::Delivered;
                }
            };
            let deadline = Instant::now() + max_blocking_time;
            while q.len() >= self.depth {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Delivery::TimedOut;
                }
                self.waiting.fetch_add(1, Ordering::Relaxed);
                q = self.space.wait_timeout(q, left).unwrap_or_else(|p| p.into_inner()).0;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
            }
        }
        q.push_back(item);
        self.queued.store(q.len(), Ordering::Release);
        Delivery::Delivered
    }

    pub(crate) fn pop(&self) -> Option<Handed> {
        if self.is_empty() {
            return None;
        }
        let mut q = lock(&self.frames);
        let f = q.pop_front();
        self.queued.store(q.len(), Ordering::Release);
        let anyone_waiting = self.waiting.load(Ordering::Relaxed) > 0;
        drop(q);
        if f.is_some() && anyone_waiting {
            self.space.notify_one();
        }
        f
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }
}
