//! Publishers: lend memory, fill it, publish it.
//!
//! The data path of one message:
//!
//! 1. [`Publisher::loan`] looks at who subscribes (their port names say which
//!    backends they accept and how they wait; see [`crate::endpoint`]) and picks
//!    a **route**: *intra* (a heap frame handed to in-process subscriptions by
//!    pointer) when nobody outside this process listens, else *shm* (an iceoryx2
//!    sample every subscriber maps). Buffers go in the frame, or in the
//!    publisher's device pool when it publishes from one.
//! 2. The user writes the buffers in place and sets the small fields.
//! 3. [`Publisher::publish`] encodes the small fields and the buffer table into
//!    the frame's meta region and sends it. Device buffers get a host copy in the
//!    frame, made once, only when some subscriber cannot take the device memory
//!    (it does not accept the backend, or is on another device).
//!
//! A publisher's buffers live in the frame (`cpu`, `shm`, and `cuda-host`,
//! whose frames are always shared memory mapped for the device) or in a
//! device pool (`cuda`, `fake-device`). A process-wide thread gives back the
//! holds of pool readers that died, within a second ([`reaper`]).

use std::collections::HashSet;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use freight_backend::{Backend, Descriptor, FrameMemory, FrameSlot, HeapFrame, IN_FRAME_DESCRIPTOR_LEN};
use freight_msg::message::{write_inline, InlineBuffers};
use freight_msg::{BackendKind, BufferEncoder, CdrWriter, ElementInfo, EncodeError, Message, RawBuffer};
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::port::{BackpressureAction, BackpressureInfo};
use iceoryx2::prelude::*;

use crate::delivery::{FrameMut, Route};
use crate::endpoint::{DeviceTag, PublisherAd, SubscriberAd, WaitMode};
use crate::error::{CreateError, LoanError, PublishError, ShmError};
use crate::frame::{encode_meta, retag, Entry, Header, DATA_ALIGN, HEADER_LEN};
use crate::loan::{Loan, LoanUninit, LoanedBuffer};
use crate::negotiation::{is_device_pool, takes_device_memory};
use crate::network::{NetworkWriter, PeerTag};
use crate::node::Node;
use crate::process::{dead_nodes, is_own_node};
use crate::qos::{Durability, QoS, Reliability};
use crate::sync::lock;
use crate::topic::{local_topic, open_services, Delivery, IntraQueue, Ipc, LocalTopic, TopicServices};

type IoxPublisher = iceoryx2::port::publisher::Publisher<Ipc, [u8], ()>;
type Notifier = iceoryx2::port::notifier::Notifier<Ipc>;

/// How often the publisher re-reads the subscriber list even when the count of
/// subscribers did not change (one left and another joined).
const PEER_REFRESH: Duration = Duration::from_millis(100);

/// Options of a publisher beyond QoS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherOptions {
    /// Where loaned buffers live. `Shm` (the default) lends shared memory, or
    /// heap memory when every subscriber is in this process. `CudaHost` lends
    /// shared memory mapped for this process's CUDA device (kernels write it
    /// through [`LoanUninit::device_view`]); subscriptions that take `cuda-host`
    /// see it mapped for theirs, the others as plain `shm`. A device-pool
    /// backend (`Cuda`, `FakeDevice`) lends device memory; subscriptions that
    /// cannot take it (they do not accept it, or are on another device) receive
    /// a host copy, made once per message for all of them.
    ///
    /// Creating the publisher fails with [`CreateError::BackendUnavailable`],
    /// saying why, when this process cannot use the backend (no driver, no
    /// such device).
    pub backend: BackendKind,
    /// Bytes a loan reserves for the small fields and the buffer table.
    pub meta_reserve: usize,
}

impl Default for PublisherOptions {
    fn default() -> Self {
        PublisherOptions { backend: BackendKind::Shm, meta_reserve: 4096 }
    }
}

/// The topic's subscribers as last read from the service, by iceoryx2 port id
/// (the backpressure handler looks receivers up by it).
type Subscribers = std::collections::HashMap<u128, Subscriber>;

/// A subscriber in shared memory, as the last read of the service found it.
#[derive(Debug, Clone, Copy)]
struct Subscriber {
    ad: SubscriberAd,
    /// Whether `ad.pid` names its process in this pid namespace (it was alive
    /// here when its node was): only then does `kill(pid, 0)` say it died.
    pid_here: bool,
}

/// What every publish needs to know about the subscribers, readable without a
/// lock; the `Subscribers` map behind its mutex is only touched when they change.
#[derive(Default)]
struct PeerSummary {
    /// Subscriber count when last read; `usize::MAX` forces a read.
    count: AtomicUsize,
    /// CLOCK_MONOTONIC_COARSE ms of the last read.
    read_at_ms: AtomicU64,
    any_remote: AtomicBool,
    any_blocking: AtomicBool,
}

/// Subscribers a frame could not be delivered to, recorded by the backpressure
/// handler during `send`. The publish path reads one flag when nothing was
/// missed, which is nearly always.
#[derive(Default)]
struct MissedReceivers {
    any: AtomicBool,
    /// Each missed subscriber (if known) and whether it was a reliable one.
    list: Mutex<Vec<(Option<SubscriberAd>, bool)>>,
}

impl MissedReceivers {
    fn record(&self, ad: Option<SubscriberAd>, reliable: bool) {
        lock(&self.list).push((ad, reliable));
        self.any.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<(Option<SubscriberAd>, bool)> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.list))
    }
}

/// Offsets of one frame.
struct Layout {
    slots: Vec<usize>,
    total: usize,
}

/// The frame for a header, `meta_len` bytes of meta and the buffers stored in
/// it, each 64-byte aligned; `None` when its size does not fit a `usize`
/// (lengths come from users and, through `publish_copy`, from peers).
fn layout(meta_len: usize, in_frame_lens: &[usize]) -> Option<Layout> {
    let aligned = |n: usize| n.checked_next_multiple_of(DATA_ALIGN);
    let mut at = aligned(HEADER_LEN.checked_add(meta_len)?)?;
    let mut slots = Vec::with_capacity(in_frame_lens.len());
    for &len in in_frame_lens {
        slots.push(at);
        at = aligned(at.checked_add(len)?)?;
    }
    Some(Layout { slots, total: at })
}

/// A heap frame that returns its memory to the publisher's pool when the last
/// subscriber drops it: allocating fresh pages per message costs more than a
/// copy (page faults), so intra-process frames are recycled.
#[derive(Debug)]
struct PooledFrame {
    frame: HeapFrame,
    pool: std::sync::Weak<Mutex<Vec<Vec<u8>>>>,
}

impl FrameMemory for PooledFrame {
    fn bytes(&self) -> &[u8] {
        self.frame.bytes()
    }
    fn is_process_local(&self) -> bool {
        true
    }
}

impl Drop for PooledFrame {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            let mut p = lock(&pool);
            if p.len() < 4 {
                p.push(std::mem::take(&mut self.frame.0));
            }
        }
    }
}

pub(crate) struct PublisherInner {
    node: Node,
    topic: String,
    qos: QoS,
    options: PublisherOptions,
    local: Arc<LocalTopic>,
    services: TopicServices,
    iox: IoxPublisher,
    notifier: Notifier,
    summary: PeerSummary,
    subscribers: Arc<Mutex<Subscribers>>,
    missed: Arc<MissedReceivers>,
    id: u64,
    sequence: AtomicU64,
    /// The device pool buffers live in (`cuda`, `fake-device`), if any.
    pool: Option<Arc<dyn Backend>>,
    /// An in-frame backend of the publisher's own other than `cpu` / `shm`
    /// (`cuda-host`): frames always go through shared memory.
    in_frame: Option<Arc<dyn Backend>>,
    /// The UUID of the pool's device, written in every frame header, and its tag.
    device: Option<[u8; 16]>,
    device_tag: Option<DeviceTag>,
    /// Subscriptions (by port id) already told about on stderr: they accept
    /// the pool's backend but are on another device.
    noted: Mutex<HashSet<u128>>,
    heap_frames: Arc<Mutex<Vec<Vec<u8>>>>,
    pid: u32,
    /// Subscribers seen by the last history hand-out (transient local only).
    latched_subscribers: AtomicUsize,
    /// The DDS writer; `None` in a local-only context.
    network: Option<NetworkWriter>,
}

/// Publishes messages of type `M` on one topic.
///
/// ```no_run
/// use freight::{Context, QoS};
/// use freight::msgs::sensor_msgs::Image;
/// let node = Context::new()?.create_node("camera")?;
/// let publisher = node.create_publisher::<Image>("image", QoS::sensor_data())?;
/// let (w, h) = (3840, 2160);
/// let loan = publisher.loan(w * h * 4)?;          // uninitialised shared memory
/// let mut img = loan.write_from_fn(|i| i as u8);  // now it can be published
/// img.width = w as u32;
/// img.height = h as u32;
/// img.step = 4 * w as u32;
/// img.encoding = "bgra8".into();
/// publisher.publish(img)?;                       // moves; no byte is copied
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Publisher<M: Message> {
    inner: Arc<PublisherInner>,
    _type: PhantomData<fn(M)>,
}

impl<M: Message> std::fmt::Debug for Publisher<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Publisher<{}>({})", M::TYPE_NAME, self.inner.topic)
    }
}

impl Node {
    /// Creates a publisher of `M` on `topic`.
    ///
    /// ```no_run
    /// use freight::{Context, QoS};
    /// use freight::msgs::sensor_msgs::Image;
    /// let node = Context::new()?.create_node("camera")?;
    /// let publisher = node.create_publisher::<Image>("image_raw", QoS::sensor_data())?;
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_publisher<M: Message>(&self, topic: &str, qos: impl Into<QoS>) -> Result<Publisher<M>, CreateError> {
        self.create_publisher_with_options(topic, qos, PublisherOptions::default())
    }

    /// Creates a publisher with options (e.g. the backend its buffers live in).
    pub fn create_publisher_with_options<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
        options: PublisherOptions,
    ) -> Result<Publisher<M>, CreateError> {
        Publisher::create(self, &self.resolve_topic_name(topic)?, qos.into(), options)
    }
}

impl<M: Message> Publisher<M> {
    pub(crate) fn create(node: &Node, topic: &str, qos: QoS, options: PublisherOptions) -> Result<Self, CreateError> {
        let ctx = &node.inner.ctx.inner;
        let limits = ctx.limits;
        qos.validate(&limits)?;
        let own = match options.backend {
            BackendKind::Shm | BackendKind::Cpu => None,
            k => Some(ctx.backend(k).map_err(CreateError::BackendUnavailable)?),
        };
        let (pool, in_frame) = match own {
            Some(b) if b.in_frame() => (None, Some(b)),
            b => (b, None),
        };
        let device = pool.as_ref().and_then(|p| ctx.device_uuid(p.kind()));
        let device_tag = device.map(|u| DeviceTag::of_uuid(&u));
        let local = local_topic(ctx.domain_id, topic, M::TYPE_NAME)?;
        let services = open_services(&node.inner.iox, ctx.domain_id, topic, M::TYPE_NAME, M::TYPE_HASH, &limits)?;

        let subscribers: Arc<Mutex<Subscribers>> = Arc::default();
        let missed = Arc::new(MissedReceivers::default());
        let handler = {
            let subscribers = subscribers.clone();
            let missed = missed.clone();
            let reliability = qos.reliability;
            let max_wait = qos.max_blocking_time;
            move |info: &BackpressureInfo| -> BackpressureAction {
                let found = lock(&subscribers).get(&info.receiver_port_id).copied();
                let theirs = found.map(|s| s.ad);
                let skip = reliability == Reliability::BestEffort
                    || theirs.is_some_and(|s| s.reliability == Reliability::BestEffort)
                    // A subscriber whose process died never makes room: do not wait for it.
                    || found.is_some_and(|s| s.pid_here && !crate::clock::process_alive(s.ad.pid));
                if !skip && info.elapsed_time < max_wait {
                    std::thread::yield_now();
                    return BackpressureAction::Retry;
                }
                missed.record(theirs, !skip);
                if skip {
                    BackpressureAction::DiscardData
                } else {
                    BackpressureAction::DiscardDataAndFail
                }
            }
        };
        let name = PublisherAd {
            pid: std::process::id(),
            reliability: qos.reliability,
            durability: qos.durability,
            backend: options.backend,
            device: device_tag,
        }
        .encode();
        let iox = services
            .data
            .publisher_builder()
            .name(&PortName::new(&name).map_err(CreateError::shm(topic, "naming the publisher port"))?)
            .initial_max_slice_len(HEADER_LEN + options.meta_reserve + 4096)
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_loaned_samples(4)
            .set_backpressure_handler(handler)
            .create()
            .map_err(CreateError::shm(topic, "creating the publisher port"))?;
        let notifier = services
            .event
            .notifier_builder()
            .create()
            .map_err(CreateError::shm(topic, "creating the wake-up notifier"))?;
        let id = iox.id().value() as u64 ^ (iox.id().value() >> 64) as u64;
        let network = match ctx.participant_for(topic, &qos)? {
            Some(participant) => {
                let tag = PeerTag::of_this_process(node, Some(options.backend), None);
                let w = NetworkWriter::new(&participant, node, topic, &M::dds_type_name(), &qos, &tag);
                Some(w.map_err(|source| CreateError::Network { topic: topic.into(), source })?)
            }
            None => None,
        };
        Ok(Publisher {
            inner: Arc::new(PublisherInner {
                node: node.clone(),
                topic: topic.into(),
                qos,
                options,
                local,
                services,
                iox,
                notifier,
                summary: PeerSummary { count: AtomicUsize::new(usize::MAX), ..Default::default() },
                subscribers,
                missed,
                id,
                sequence: AtomicU64::new(0),
                pool,
                in_frame,
                device,
                device_tag,
                noted: Mutex::default(),
                heap_frames: Arc::default(),
                pid: std::process::id(),
                latched_subscribers: AtomicUsize::new(0),
                network,
            }),
            _type: PhantomData,
        })
        .inspect(|p| {
            if qos.durability == Durability::TransientLocal {
                latch::register(&p.inner);
            }
            if let Some(pool) = &p.inner.pool {
                reaper::watch(pool);
            }
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

    /// The node this publisher belongs to.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    /// Subscriptions alive now, in any process. Subscriptions whose process
    /// died are cleaned up first (and the samples they held reclaimed), so a
    /// crashed subscriber disappears from this count.
    pub fn subscription_count(&self) -> usize {
        self.inner.node.inner.iox.try_cleanup_dead_nodes();
        self.inner.services.data.dynamic_config().number_of_subscribers()
    }

    /// Lends memory for a message whose one buffer field holds `len` bytes.
    pub fn loan(&self, len: usize) -> Result<LoanUninit<M>, LoanError> {
        self.loan_buffers(&[len])
    }

    /// Lends memory for a message with one length per buffer field, in
    /// declaration order. The message's small fields start at their defaults.
    pub fn loan_buffers(&self, lens: &[usize]) -> Result<LoanUninit<M>, LoanError> {
        let mut msg = M::default();
        let expected = msg.buffer_count();
        if expected != lens.len() {
            return Err(LoanError::BufferCount { type_name: M::TYPE_NAME, expected, given: lens.len() });
        }
        let inner = &self.inner;
        let route = inner.route();
        let host = inner.host_backend(route);
        // Where buffers in the frame live: the host memory of the route, or
        // the publisher's own in-frame backend (cuda-host).
        let frame_backend = inner.in_frame.clone().unwrap_or_else(|| host.clone());
        let (device_readers, host_readers) = inner.lend_to(route);
        // Network readers take host bytes too.
        let needs_host_copy = host_readers > 0 || inner.to_network();
        let in_frame: Vec<usize> =
            lens.iter().map(|&l| if inner.pool.is_none() || needs_host_copy { l } else { 0 }).collect();
        // Device buffers live outside the frame, and count against the limit too.
        inner.check_size(lens.iter().try_fold(0usize, |n, &l| n.checked_add(l)))?;
        let lay = inner.frame_layout(inner.options.meta_reserve, &in_frame)?;
        let mut frame = inner.alloc_frame(route, lay.total)?;
        let mut buffers = Vec::with_capacity(lens.len());
        for (i, &len) in lens.iter().enumerate() {
            let slot = frame.slot(lay.slots[i], len);
            let view = Some((slot.ptr.cast_const(), slot.len));
            let b = match &inner.pool {
                None => LoanedBuffer {
                    block: frame_backend.allocate(len, Some(slot))?,
                    backend: frame_backend.clone(),
                    host_copy: None,
                    host_view: view,
                    frame_offset: Some(lay.slots[i]),
                },
                Some(pool) => LoanedBuffer {
                    block: pool.allocate(len, None)?,
                    backend: pool.clone(),
                    host_copy: needs_host_copy.then_some(slot),
                    host_view: view.filter(|_| needs_host_copy),
                    frame_offset: None,
                },
            };
            buffers.push(b);
        }
        let kind = inner.pool.as_ref().map_or(frame_backend.kind(), |p| p.kind());
        let mut slot = 0u32;
        msg.visit_buffers_mut(&mut |raw| {
            *raw = RawBuffer::loan_slot(slot, lens[slot as usize], kind);
            slot += 1;
        });
        Ok(LoanUninit::new(msg, frame, buffers, route, device_readers))
    }

    /// Publishes a loan that has been written. The memory moves to the
    /// subscribers; nothing is copied (but a host copy of device buffers for
    /// subscribers that cannot take device memory).
    pub fn publish(&self, loan: Loan<M>) -> Result<(), PublishError> {
        let (msg, mut frame, buffers, route, device_readers) = loan.into_parts()?;
        let mut ordinal = 0usize;
        let mut foreign = None;
        msg.visit_buffers(&mut |raw| {
            if raw.as_loan_slot() != Some(ordinal as u32) {
                foreign.get_or_insert(ordinal);
            }
            ordinal += 1;
        });
        if let Some(ordinal) = foreign {
            return Err(PublishError::BufferNotFromLoan { ordinal });
        }
        let inner = &self.inner;
        let host = inner.host_backend(route);
        let device_readers = inner.still_reading(route, device_readers);
        // Decided once per publish; without network readers nothing below
        // allocates or serializes for them.
        let to_network = inner.to_network();
        let views: Vec<Option<(*const u8, usize)>> =
            if to_network { buffers.iter().map(|b| b.host_view).collect() } else { Vec::new() };
        let mut entries = Vec::with_capacity(buffers.len());
        let mut holds = Holds { pool: inner.pool.as_deref(), exported: Vec::new() };
        for b in buffers {
            // Device blocks are held for each reader, and once more for the
            // publisher itself when it makes the host copy.
            let readers = match (b.backend.in_frame(), b.host_copy.is_some()) {
                (true, _) => Vec::new(),
                (false, false) => device_readers.clone(),
                (false, true) => [device_readers.as_slice(), &[inner.pid]].concat(),
            };
            let len = b.block.len();
            let descriptor = b.backend.export(b.block, &readers)?;
            if !readers.is_empty() {
                holds.exported.push((descriptor.clone(), readers));
            }
            let alt = match (b.host_copy, b.frame_offset) {
                (Some(slot), _) => {
                    Some((host.kind(), inner.host_copy(&b.backend, &host, descriptor.as_bytes(), slot)?))
                }
                // An in-frame backend of the publisher's own (cuda-host): the
                // same bytes, described as plain host memory for subscriptions
                // that do not take it. Nothing is copied.
                (None, Some(offset)) if b.backend.kind() != host.kind() => {
                    let same = host.allocate(len, Some(frame.slot(offset, len))).map_err(LoanError::from)?;
                    Some((host.kind(), host.export(same, &[])?))
                }
                (None, _) => None,
            };
            entries.push(Entry { kind: b.backend.kind(), descriptor, alt });
        }
        let written = with_meta(&msg, &entries, |meta| {
            if meta.len() > inner.options.meta_reserve {
                return Err(PublishError::MetaTooLarge { needed: meta.len(), reserved: inner.options.meta_reserve });
            }
            inner.write_header_and_meta(frame_header::<M>(inner, meta, entries.len()), meta, &mut frame);
            Ok(())
        });
        written?;
        let device: Vec<Entry> = entries.into_iter().filter(|e| is_device_pool(e.kind)).collect();
        // Serialized before the frame goes (it holds the bytes), written after
        // local delivery so local subscribers do not wait for the network.
        let cdr = to_network.then(|| {
            // SAFETY: each view is a region of `frame` (or its host copy)
            // written by now, and `frame` is alive until `deliver` below.
            let slices: Vec<Option<&[u8]>> =
                views.iter().map(|v| v.map(|(ptr, len)| unsafe { std::slice::from_raw_parts(ptr, len) })).collect();
            serialize(|w| msg.write(w, &mut LoanViews(&slices)))
        });
        let delivered = inner.rerouted(frame).and_then(|frame| inner.deliver(frame, &device));
        if matches!(delivered, Ok(()) | Err(PublishError::QueueFull { .. })) {
            // The frame went out: its readers give the holds back (`deliver`
            // already did for those it missed).
            holds.exported.clear();
        }
        if let Some(cdr) = cdr {
            inner.send_network(cdr?)?;
        }
        delivered
    }

    /// Publishes a message held in ordinary memory: its buffers are copied once
    /// into the frame (shared memory, or heap for in-process subscribers).
    pub fn publish_copy(&self, msg: &M) -> Result<(), PublishError> {
        let inner = &self.inner;
        let route = inner.route();
        let host = inner.host_backend(route);
        let mut sources: Vec<&RawBuffer> = Vec::new();
        msg.visit_buffers(&mut |raw| sources.push(raw));
        let lens: Vec<usize> = sources.iter().map(|r| r.len_bytes()).collect();
        // Descriptor sizes do not depend on offsets, so the meta length is
        // known before the layout: encode once with placeholders.
        let placeholder = Descriptor::from_slice(&[0; IN_FRAME_DESCRIPTOR_LEN]).expect("a short descriptor");
        let placeholder: Vec<Entry> =
            lens.iter().map(|_| Entry { kind: host.kind(), descriptor: placeholder.clone(), alt: None }).collect();
        let meta_len = with_meta(msg, &placeholder, |meta| Ok(meta.len()))?;
        let lay = inner.frame_layout(meta_len, &lens)?;
        let mut frame = inner.alloc_frame(route, lay.total)?;
        let mut entries = Vec::with_capacity(sources.len());
        for (i, src) in sources.iter().enumerate() {
            let mut block = host.allocate(lens[i], Some(frame.slot(lay.slots[i], lens[i]))).map_err(LoanError::from)?;
            match src.host_bytes() {
                Some(bytes) => block.write_from_host(0, bytes).map_err(LoanError::from)?,
                None => {
                    let bytes = src.to_host_vec().map_err(|e| PublishError::HostCopy(e.into()))?;
                    block.write_from_host(0, &bytes).map_err(LoanError::from)?
                }
            }
            let descriptor = host.export(block, &[])?;
            entries.push(Entry { kind: host.kind(), descriptor, alt: None });
        }
        with_meta(msg, &entries, |meta| {
            debug_assert_eq!(meta.len(), meta_len);
            inner.write_header_and_meta(frame_header::<M>(inner, meta, entries.len()), meta, &mut frame);
            Ok(())
        })?;
        let delivered = inner.deliver(frame, &[]);
        if inner.to_network() {
            inner.send_network(serialize(|w| msg.write(w, &mut InlineBuffers))?)?;
        }
        delivered
    }

    /// DDS readers matched that are not freight on this host (a stock ROS 2
    /// node, a freight node elsewhere): they get the message as CDR.
    pub fn network_subscription_count(&self) -> usize {
        self.inner.network_readers()
    }
}

/// The buffers of a published loan as CDR sequences, read where the frame
/// holds them. A device buffer without a host copy (a network reader matched
/// after the loan was taken) cannot be sent; it gets the next message.
struct LoanViews<'a>(&'a [Option<&'a [u8]>]);

impl BufferEncoder for LoanViews<'_> {
    fn write_buffer(&mut self, w: &mut CdrWriter, buf: &RawBuffer, element: ElementInfo) -> Result<(), EncodeError> {
        let bytes = buf.as_loan_slot().and_then(|i| self.0.get(i as usize).copied().flatten()).ok_or_else(|| {
            EncodeError::Buffer("device buffer without a host copy; network readers get the next message".into())
        })?;
        write_inline(w, bytes, element)
    }
}

thread_local! {
    /// A scratch vector per thread for serialized messages: large messages
    /// would otherwise fault in fresh pages on every publish.
    static CDR_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

fn serialize(encode: impl FnOnce(&mut CdrWriter) -> Result<(), EncodeError>) -> Result<Vec<u8>, PublishError> {
    let mut w = CdrWriter::from_vec(CDR_SCRATCH.take());
    encode(&mut w)?;
    Ok(w.finish())
}

/// Encodes the meta region in this thread's scratch buffers and hands it to `f`.
fn with_meta<M: Message, R>(
    msg: &M,
    entries: &[Entry],
    f: impl FnOnce(&[u8]) -> Result<R, PublishError>,
) -> Result<R, PublishError> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    SCRATCH.with(|cell| {
        // A publish from inside `f` cannot happen, but do not panic if it ever does.
        let mut fresh = (Vec::new(), Vec::new());
        let mut guard = cell.try_borrow_mut();
        let (meta, small) = match guard.as_deref_mut() {
            Ok(bufs) => (&mut bufs.0, &mut bufs.1),
            Err(_) => (&mut fresh.0, &mut fresh.1),
        };
        encode_meta(msg, entries, meta, small)?;
        f(meta)
    })
}

fn frame_header<M: Message>(inner: &PublisherInner, meta: &[u8], buffers: usize) -> Header {
    Header {
        type_hash: M::TYPE_HASH,
        publisher_id: inner.id,
        sequence: inner.sequence.fetch_add(1, Ordering::Relaxed),
        publish_time_ns: crate::clock::monotonic_ns(),
        meta_len: meta.len() as u32,
        buffer_count: buffers as u32,
        device: inner.device,
    }
}

/// The device-pool holds that one publish recorded at export, given back to
/// the pool when the publish fails before its frame is sent: nobody will
/// import them. A hold already given back (the publisher's own, by its host
/// copy) is refused by the pool, which is fine.
struct Holds<'a> {
    pool: Option<&'a dyn Backend>,
    exported: Vec<(Descriptor, Vec<u32>)>,
}

impl Drop for Holds<'_> {
    fn drop(&mut self) {
        let Some(pool) = self.pool else { return };
        for (descriptor, readers) in &self.exported {
            for &pid in readers {
                let _ = pool.release_unimported(descriptor.as_bytes(), pid);
            }
        }
    }
}

impl PublisherInner {
    /// The device readers a loan named, less the subscriptions that left since
    /// (their processes may live on, so nobody else would give their holds
    /// back). One that joined since gets a host copy if one is made.
    fn still_reading(&self, route: Route, at_loan: Vec<u32>) -> Vec<u32> {
        let Some(pool) = self.pool.as_ref().filter(|_| !at_loan.is_empty()) else { return at_loan };
        if route == Route::Shm {
            self.route();
        }
        let mut now = self.readers(route, pool.kind()).0;
        at_loan
            .into_iter()
            .filter(|pid| match now.iter().position(|p| p == pid) {
                Some(i) => {
                    now.swap_remove(i);
                    true
                }
                None => false,
            })
            .collect()
    }

    fn network_readers(&self) -> usize {
        self.network.as_ref().map_or(0, NetworkWriter::remote_readers)
    }

    /// Whether a message goes to the DDS writer: when a network reader is matched,
    /// and always on a transient-local topic, whose DDS history serves readers that
    /// join later (a stock node started after the latched message was published).
    fn to_network(&self) -> bool {
        self.network.is_some() && (self.qos.durability == Durability::TransientLocal || self.network_readers() > 0)
    }

    /// Writes a serialized message to the DDS writer and keeps the vector's
    /// memory for the next one.
    fn send_network(&self, cdr: Vec<u8>) -> Result<(), PublishError> {
        let written = match &self.network {
            Some(n) => n.write(&cdr).map_err(PublishError::Network),
            None => Ok(()),
        };
        CDR_SCRATCH.set(cdr);
        written
    }

    /// Re-reads the subscriber list when it changed (or is old) and returns the route.
    fn route(&self) -> Route {
        let n = self.services.data.dynamic_config().number_of_subscribers();
        let now_ms = crate::clock::coarse_ms();
        let summary = &self.summary;
        if n != summary.count.load(Ordering::Acquire)
            || now_ms.saturating_sub(summary.read_at_ms.load(Ordering::Relaxed)) > PEER_REFRESH.as_millis() as u64
        {
            self.read_subscribers(n, now_ms);
        }
        // Transient-local data must outlive this process's subscribers, so it
        // always goes through the service, which keeps the history; cuda-host
        // frames are shared memory mapped for the device.
        if summary.any_remote.load(Ordering::Acquire)
            || self.qos.durability == Durability::TransientLocal
            || self.in_frame.is_some()
        {
            Route::Shm
        } else {
            Route::Intra
        }
    }

    fn read_subscribers(&self, n: usize, now_ms: u64) {
        // Each subscriber with the iceoryx2 node it belongs to: that, not its
        // pid, says whether it is in this process and alive (see `process`).
        let mut found = Vec::with_capacity(n);
        self.services.data.dynamic_config().list_subscribers(|d| {
            if let Some(ad) = SubscriberAd::decode(d.subscriber_name.as_str()) {
                found.push((d.subscriber_id.value(), ad, d.node_id.value()));
            }
            CallbackProgression::Continue
        });
        let before = found.len();
        if found.iter().any(|&(_, _, node)| !is_own_node(node)) {
            let dead = dead_nodes(self.node.inner.iox.config());
            found.retain(|(_, _, node)| !dead.contains(node));
        }
        let any_remote = found.iter().any(|&(_, _, node)| !is_own_node(node));
        let subs: Subscribers = found
            .into_iter()
            .map(|(id, ad, node)| {
                (id, Subscriber { ad, pid_here: is_own_node(node) || crate::clock::process_alive(ad.pid) })
            })
            .collect();
        if subs.len() < before {
            // A subscriber died: have iceoryx2 remove its ports and give
            // back the samples it held, and the device pool its holds.
            self.node.inner.iox.try_cleanup_dead_nodes();
            if let Some(pool) = &self.pool {
                pool.reclaim_dead_readers();
            }
        }
        self.note_other_devices(&subs);
        let summary = &self.summary;
        summary.any_remote.store(any_remote, Ordering::Release);
        summary.any_blocking.store(subs.values().any(|s| s.ad.wait == WaitMode::Block), Ordering::Release);
        summary.read_at_ms.store(now_ms, Ordering::Relaxed);
        summary.count.store(n, Ordering::Release);
        *lock(&self.subscribers) = subs;
    }

    fn hand_out_history(&self) {
        let n = self.services.data.dynamic_config().number_of_subscribers();
        if self.latched_subscribers.swap(n, Ordering::Relaxed) != n {
            // Failures here leave the late joiner without history until the
            // next publish, which retries; nothing to report to anyone.
            let _ = self.iox.update_connections();
            let _ = self.notifier.notify();
        }
    }

    /// Whether the subscription of `ad` takes this publisher's device memory
    /// of `kind` as is: it accepts `kind`, is on the pool's device, and its
    /// process is in this pid namespace (the pool keeps holds per pid, which
    /// name another process in another namespace; such a subscription gets
    /// the host copy).
    fn takes_pool_memory(&self, ad: &SubscriberAd, kind: BackendKind) -> bool {
        let same_pids = ad.pid_ns.is_some() && ad.pid_ns == crate::process::pid_namespace();
        same_pids && takes_device_memory(kind, ad.accepts, ad.devices.get(kind) == self.device_tag)
    }

    /// Says once on stderr, per subscription, that one accepts the pool's
    /// backend but is on another device, so it gets host copies.
    fn note_other_devices(&self, subs: &Subscribers) {
        let Some(pool) = &self.pool else { return };
        let kind = pool.kind();
        let mut noted = lock(&self.noted);
        noted.retain(|id| subs.contains_key(id));
        for (id, Subscriber { ad, .. }) in subs {
            if ad.accepts.contains(kind) && !self.takes_pool_memory(ad, kind) && noted.insert(*id) {
                let name = |t: Option<DeviceTag>| t.map_or_else(|| "none".to_string(), |t| t.short());
                let why = if ad.devices.get(kind) != self.device_tag {
                    format!(
                        "is on device {}, this publisher's memory on {}",
                        name(ad.devices.get(kind)),
                        name(self.device_tag)
                    )
                } else {
                    "runs in another pid namespace (a container), whose process ids this publisher's pool cannot \
                     tell apart from its own"
                        .to_string()
                };
                eprintln!(
                    "freight: publisher on {}: a subscription of process {} accepts {kind} but {why}; it receives a \
                     host copy of each message",
                    self.topic, ad.pid,
                );
            }
        }
    }

    /// The process ids of subscribers on `route` that take `kind`'s memory
    /// (they accept it, are on the pool's device and in this pid namespace;
    /// one entry per subscription), and how many do not.
    fn readers(&self, route: Route, kind: BackendKind) -> (Vec<u32>, usize) {
        let split = |ads: &mut dyn Iterator<Item = SubscriberAd>| {
            let (yes, no): (Vec<_>, Vec<_>) = ads.partition(|ad| self.takes_pool_memory(ad, kind));
            (yes.iter().map(|ad| ad.pid).collect(), no.len())
        };
        match route {
            Route::Intra => split(&mut self.local.subscribers().iter().map(|q| q.ad)),
            Route::Shm => split(&mut lock(&self.subscribers).values().map(|s| s.ad)),
        }
    }

    /// Reliable subscribers that missed a sample without the backpressure
    /// handler hearing of it.
    ///
    /// iceoryx2 calls the handler only for a subscriber whose side of the
    /// connection is attached. One that has not attached yet (its process is
    /// stopped, or it has not taken since this publisher appeared) has a queue
    /// that fills and then skips samples silently: `send` just counts one
    /// recipient fewer. The count is checked against the subscribers (re-read
    /// if their number changed, so that one that left during the send is not
    /// counted as missing).
    ///
    /// Such a subscriber cannot be told apart from the others: device holds
    /// named for it stay until its process exits (the reaper takes them), and
    /// a best-effort one that never attached counts as a reliable miss when
    /// the topic has reliable subscribers too. A spurious `QueueFull` is
    /// preferred to a silent loss.
    fn unannounced_misses(&self, recipients: usize, handled: &[(Option<SubscriberAd>, bool)]) -> usize {
        let known = self.summary.count.load(Ordering::Acquire);
        if recipients + handled.len() >= known || self.qos.reliability == Reliability::BestEffort {
            return 0;
        }
        let n = self.services.data.dynamic_config().number_of_subscribers();
        if n != known {
            self.read_subscribers(n, crate::clock::coarse_ms());
        }
        let subs = lock(&self.subscribers);
        let unexplained = subs.len().saturating_sub(recipients + handled.len());
        let reliable = subs.values().filter(|s| s.ad.reliability == Reliability::Reliable).count();
        let reliable_unhandled = reliable.saturating_sub(handled.iter().filter(|(_, r)| *r).count());
        unexplained.min(reliable_unhandled)
    }

    /// Who a loan's device buffers are for: the process ids of the
    /// subscriptions that take the pool's memory, and how many take host
    /// bytes. A reader process that holds more than its share of the pool (a
    /// fair part of its capacity, with one part kept for the others) gets host
    /// copies until it gives blocks back: a subscription that never takes
    /// must not exhaust the pool for everyone.
    fn lend_to(&self, route: Route) -> (Vec<u32>, usize) {
        let Some(pool) = &self.pool else { return (Vec::new(), 0) };
        let (mut device, mut host) = self.readers(route, pool.kind());
        if device.is_empty() {
            return (device, host);
        }
        let mut processes = device.clone();
        processes.sort_unstable();
        processes.dedup();
        let share = pool.max_block_len() / (processes.len() + 1);
        let over: Vec<u32> = processes.into_iter().filter(|&pid| pool.held_for(pid) > share).collect();
        if !over.is_empty() {
            let before = device.len();
            device.retain(|pid| !over.contains(pid));
            host += before - device.len();
        }
        (device, host)
    }

    /// Gives back the device-memory holds of a subscriber that will never see
    /// this frame (its queue was full, or its process died).
    fn release_for(&self, ad: &SubscriberAd, device: &[Entry]) {
        let Some(pool) = &self.pool else { return };
        if !self.takes_pool_memory(ad, pool.kind()) {
            return;
        }
        for e in device {
            // An error means the hold is already gone (e.g. reclaimed because the
            // process died); nothing is left to give back.
            let _ = pool.release_unimported(e.descriptor.as_bytes(), ad.pid);
        }
    }

    fn host_backend(&self, route: Route) -> Arc<dyn Backend> {
        let ctx = &self.node.inner.ctx.inner;
        let kind = if route == Route::Shm { BackendKind::Shm } else { BackendKind::Cpu };
        ctx.backend(kind).expect("cpu and shm are always available")
    }

    /// The layout of a frame, refused when it is larger than
    /// `Limits::max_message_bytes`.
    fn frame_layout(&self, meta_len: usize, in_frame_lens: &[usize]) -> Result<Layout, LoanError> {
        let lay = layout(meta_len, in_frame_lens);
        self.check_size(lay.as_ref().map(|l| l.total))?;
        lay.ok_or(LoanError::TooLarge { len: usize::MAX, max: self.node.inner.ctx.inner.limits.max_message_bytes })
    }

    /// Refuses a message of `total` bytes over `Limits::max_message_bytes`;
    /// `None` is a size past `usize::MAX`, refused as `usize::MAX`.
    fn check_size(&self, total: Option<usize>) -> Result<(), LoanError> {
        let max = self.node.inner.ctx.inner.limits.max_message_bytes;
        match total {
            Some(len) if len <= max => Ok(()),
            len => Err(LoanError::TooLarge { len: len.unwrap_or(usize::MAX), max }),
        }
    }

    /// The frame to send now. A loan taken while every subscriber was in this
    /// process lives on the heap; when a subscriber in another process has
    /// appeared since, the frame is copied to shared memory, once, and its
    /// buffers are marked as living there: subscribers then view them as they
    /// view any other frame's, instead of copying them out again.
    fn rerouted(&self, frame: FrameMut) -> Result<FrameMut, PublishError> {
        match frame {
            FrameMut::Heap(mut bytes) if self.route() == Route::Shm => {
                retag(&mut bytes, BackendKind::Cpu, BackendKind::Shm).map_err(PublishError::Reroute)?;
                let mut shm = self.alloc_frame(Route::Shm, bytes.len())?;
                shm.write_at(0, &bytes);
                Ok(shm)
            }
            frame => Ok(frame),
        }
    }

    fn alloc_frame(&self, route: Route, total: usize) -> Result<FrameMut, LoanError> {
        match route {
            Route::Intra => {
                let reused = {
                    let mut pool = lock(&self.heap_frames);
                    let at = pool.iter().position(|v| v.capacity() >= total);
                    at.map(|i| pool.swap_remove(i))
                };
                let mut v = reused.unwrap_or_default();
                // A failed allocation is an error to the caller, not an abort.
                v.try_reserve_exact(total.saturating_sub(v.len()))
                    .map_err(|source| LoanError::OutOfMemory { len: total, source })?;
                v.resize(total, 0);
                Ok(FrameMut::Heap(v))
            }
            Route::Shm => {
                let mut s = self.iox.loan_slice_uninit(total).map_err(ShmError::doing("loaning a sample"))?;
                let base = s.payload_mut().as_mut_ptr().cast();
                Ok(FrameMut::Shm(s, base))
            }
        }
    }

    /// Copies a device block to the host region `slot` of the frame, once, for
    /// every subscriber that cannot take device memory; returns its descriptor.
    fn host_copy(
        &self,
        device: &Arc<dyn Backend>,
        host: &Arc<dyn Backend>,
        descriptor: &[u8],
        slot: FrameSlot,
    ) -> Result<Descriptor, PublishError> {
        let fail = |e: Box<dyn std::error::Error + Send + Sync>| PublishError::HostCopy(e);
        let len = slot.len;
        let none: freight_backend::Frame = Arc::new(HeapFrame(Vec::new()));
        let storage = device.import(&none, descriptor).map_err(|e| fail(e.into()))?;
        let mut block = host.allocate(len, Some(slot)).map_err(|e| fail(e.into()))?;
        let dst = block.host_mut().ok_or_else(|| fail("the host backend has no host memory".into()))?;
        // SAFETY: u8 has no invalid values; `copy_to_host` writes every byte of
        // the slice before anyone reads it.
        let dst = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
        storage.copy_to_host(dst).map_err(|e| fail(e.into()))?;
        drop(storage);
        host.export(block, &[]).map_err(|e| fail(e.into()))
    }

    fn write_header_and_meta(&self, header: Header, meta: &[u8], frame: &mut FrameMut) {
        let mut h = [0u8; HEADER_LEN];
        header.write(&mut h);
        frame.write_at(0, &h);
        frame.write_at(HEADER_LEN, meta);
    }

    /// Sends a finished frame. `device` lists its buffers in device memory,
    /// whose holds are given back for subscribers that do not receive it.
    fn deliver(&self, frame: FrameMut, device: &[Entry]) -> Result<(), PublishError> {
        let mut missed = 0;
        let mut wake = false;
        match frame {
            FrameMut::Heap(bytes) => {
                let frame: freight_backend::Frame =
                    Arc::new(PooledFrame { frame: HeapFrame(bytes), pool: Arc::downgrade(&self.heap_frames) });
                for q in self.local.subscribers() {
                    match deliver_intra(&q, &frame, self.qos) {
                        Delivery::Delivered => wake |= q.ad.wait == WaitMode::Block,
                        Delivery::Skipped => self.release_for(&q.ad, device),
                        Delivery::TimedOut => {
                            self.release_for(&q.ad, device);
                            missed += 1;
                        }
                    }
                }
            }
            FrameMut::Shm(sample, _) => {
                // SAFETY: every byte of the sample is initialized: header and
                // meta were written above, buffers through the typestate loan
                // or the copy, and padding is shared memory that the kernel
                // zero-filled when first mapped or that held an earlier frame.
                let sample = unsafe { sample.assume_init() };
                let sent = sample.send();
                let handled = self.missed.take();
                for &(ad, reliable) in &handled {
                    missed += usize::from(reliable);
                    if let Some(ad) = ad {
                        self.release_for(&ad, device);
                    }
                }
                match sent {
                    Ok(recipients) => missed += self.unannounced_misses(recipients, &handled),
                    Err(iceoryx2::port::SendError::UnableToDeliver) => {}
                    Err(e) => return Err(ShmError::doing("sending a sample")(e).into()),
                }
                wake = self.summary.any_blocking.load(Ordering::Acquire);
            }
        }
        if wake {
            // A failed wake-up leaves data queued; the subscriber sees it on its
            // next wait, so it is not an error of this publish.
            let _ = self.notifier.notify();
        }
        if missed > 0 {
            return Err(PublishError::QueueFull { subscribers: missed });
        }
        Ok(())
    }
}

/// Hands transient-local history to late subscribers of idle publishers.
///
/// iceoryx2 delivers a publisher's history when the publisher updates its
/// connections, which it does on its next send; a latched topic (a map, a
/// robot description) may never send again. One thread per process looks at
/// such publishers every 20 ms and updates them when their subscribers change.
mod latch {
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::Duration;

    use super::PublisherInner;
    use crate::sync::lock;

    fn publishers() -> &'static Mutex<Vec<Weak<PublisherInner>>> {
        static P: OnceLock<Mutex<Vec<Weak<PublisherInner>>>> = OnceLock::new();
        P.get_or_init(|| {
            std::thread::Builder::new()
                .name("freight-latch".into())
                .spawn(|| loop {
                    std::thread::sleep(Duration::from_millis(20));
                    let live: Vec<Arc<PublisherInner>> = {
                        let mut p = lock(publishers());
                        p.retain(|w| w.strong_count() > 0);
                        p.iter().filter_map(Weak::upgrade).collect()
                    };
                    live.iter().for_each(|p| p.hand_out_history());
                })
                .expect("spawning the freight-latch thread");
            Mutex::default()
        })
    }

    pub(super) fn register(p: &Arc<PublisherInner>) {
        lock(publishers()).push(Arc::downgrade(p));
    }
}

/// Gives back the holds of device-pool readers that died.
///
/// A reader that dies holding blocks of a pool (imported, or handed to it
/// and never taken) keeps them until the pool's creator notices. One thread
/// per process looks at every pool a publisher lends from, every
/// [`REAP_PERIOD`](reaper::REAP_PERIOD), so such blocks come back within a
/// second, whether or not the publisher is publishing, and without a
/// publish ever waiting for it.
pub(crate) mod reaper {
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::Duration;

    use freight_backend::Backend;

    use crate::sync::lock;

    /// How often the pools are looked at.
    pub(crate) const REAP_PERIOD: Duration = Duration::from_millis(200);

    fn pools() -> &'static Mutex<Vec<Weak<dyn Backend>>> {
        static P: OnceLock<Mutex<Vec<Weak<dyn Backend>>>> = OnceLock::new();
        P.get_or_init(|| {
            std::thread::Builder::new()
                .name("freight-reaper".into())
                .spawn(|| loop {
                    std::thread::sleep(REAP_PERIOD);
                    let live: Vec<Arc<dyn Backend>> = {
                        let mut p = lock(pools());
                        p.retain(|w| w.strong_count() > 0);
                        p.iter().filter_map(Weak::upgrade).collect()
                    };
                    for pool in live {
                        pool.reclaim_dead_readers();
                    }
                })
                .expect("spawning the freight-reaper thread");
            Mutex::default()
        })
    }

    /// Looks after `pool` from now on, as long as it exists.
    pub(crate) fn watch(pool: &Arc<dyn Backend>) {
        let mut p = lock(pools());
        if !p.iter().any(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(pool))) {
            p.push(Arc::downgrade(pool));
        }
    }
}

fn deliver_intra(q: &IntraQueue, frame: &freight_backend::Frame, qos: QoS) -> Delivery {
    if qos.reliability == Reliability::BestEffort && q.ad.reliability == Reliability::Reliable {
        // A best-effort publisher never waits, whatever the subscriber asked.
        return match q.push(frame.clone(), Duration::ZERO) {
            Delivery::TimedOut => Delivery::Skipped,
            d => d,
        };
    }
    q.push(frame.clone(), qos.max_blocking_time)
}
