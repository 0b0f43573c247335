//! Publishers: lend memory, fill it, publish it — the typed front of a
//! `delivery::Sender`.
//!
//! A publisher turns a message of type `M` into what the delivery layer
//! moves: buffer lengths for a loan, the small fields encoded into the
//! frame's meta region, CDR for the network. Where the frame lives, who
//! reads it and which ways it leaves are the delivery layer's
//! (`crate::delivery`, whose module documentation walks one message through
//! it).

use std::marker::PhantomData;
use std::sync::Arc;

use freight_msg::message::{write_inline, InlineBuffers};
use freight_msg::{BackendKind, BufferEncoder, CdrWriter, ElementInfo, EncodeError, Message, RawBuffer};

use crate::delivery::{serialize, Exported, FullQueues, Lent, MessageType, Route, Sender};
use crate::error::{CreateError, LoanError, PublishError};
use crate::frame::{encode_meta, Entry, Outgoing, Typed};
use crate::loan::{Loan, LoanUninit};
use crate::negotiation::is_device_pool;
use crate::node::Node;
use crate::qos::QoS;

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

/// Publishes messages of type `M` on one topic.
///
/// What it published stays with its subscriptions after it is dropped, also
/// in other processes that have not taken it yet: the drop waits until their
/// processes hold it, at most half a second (a stopped subscriber process
/// costs that much).
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
    sender: Arc<Sender>,
    _type: PhantomData<fn(M)>,
}

impl<M: Message> std::fmt::Debug for Publisher<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Publisher<{}>({})", M::TYPE_NAME, self.sender.topic)
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
        Self::create_with(node, topic, qos, options, FullQueues::ByQos)
    }

    /// As [`Publisher::create`], with what a publish does with a full queue.
    pub(crate) fn create_with(
        node: &Node,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
        full_queues: FullQueues,
    ) -> Result<Self, CreateError> {
        let ty = MessageType::of::<M>();
        let sender = Sender::open(node, topic, qos, options.backend, options.meta_reserve, &ty, full_queues)?;
        Ok(Publisher { sender, _type: PhantomData })
    }

    /// The topic, fully qualified.
    pub fn topic_name(&self) -> &str {
        &self.sender.topic
    }

    /// The QoS.
    pub fn qos(&self) -> QoS {
        self.sender.qos
    }

    /// The node this publisher belongs to.
    pub fn node(&self) -> &Node {
        self.sender.node()
    }

    /// Subscriptions alive now, in any process. Subscriptions whose process
    /// died are cleaned up first (and the samples they held reclaimed), so a
    /// crashed subscriber disappears from this count.
    pub fn subscription_count(&self) -> usize {
        self.sender.subscription_count()
    }

    /// Subscriptions the topic lists now, without removing those of dead
    /// processes first (see [`Publisher::subscription_count`]).
    pub(crate) fn listed_subscription_count(&self) -> usize {
        self.sender.listed_subscriptions()
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
        let lent = self.sender.lend(lens)?;
        let mut slot = 0u32;
        msg.visit_buffers_mut(&mut |raw| {
            *raw = RawBuffer::loan_slot(slot, lens[slot as usize], lent.kind);
            slot += 1;
        });
        Ok(LoanUninit::new(msg, lent))
    }

    /// Publishes a loan that has been written. The memory moves to the
    /// subscribers; nothing is copied (but a host copy of device buffers for
    /// subscribers that cannot take device memory).
    pub fn publish(&self, loan: Loan<M>) -> Result<(), PublishError> {
        self.publish_lent(loan).map_err(|e| e.of_type(M::TYPE_NAME))
    }

    fn publish_lent(&self, loan: Loan<M>) -> Result<(), PublishError> {
        let (msg, lent) = loan.into_parts()?;
        let sender = &self.sender;
        lent.check_owner(sender)?;
        check_slots(&Typed(&msg))?;
        // Decided once per publish; without network readers nothing below
        // allocates or serializes for them. A spilled loan goes over DDS only.
        let to_network = lent.route == Route::Spill || sender.to_network();
        match sender.to_hand_over(lent, to_network) {
            Ok((bytes, buffers)) => sender.hand_over(msg, sender.loan_views(bytes, &buffers)),
            Err(lent) => send_lent(sender, M::TYPE_HASH, &Typed(&msg), lent, to_network),
        }
    }

    /// Publishes a message held in ordinary memory: its buffers are copied once
    /// into the frame (shared memory, or heap for in-process subscribers). A
    /// message `/dev/shm` has no room for goes over DDS, as a spilled loan does.
    /// When every reader is a subscription of this type in this process, a
    /// copy of the message itself is handed to each (its buffers copied once,
    /// shared by the copies), as a loan is.
    pub fn publish_copy(&self, msg: &M) -> Result<(), PublishError> {
        let sender = &self.sender;
        let route = sender.route();
        if sender.hands_over_copies(sender.to_network(), || route) {
            // Every reader is in this process and takes an `M`: a copy of the
            // message itself, its buffers copied once, as a loan is handed
            // over (no frame to encode and decode).
            let mut host = Some(Vec::new());
            msg.visit_buffers(&mut |raw| match (raw.host_bytes(), host.as_mut()) {
                (Some(bytes), Some(host)) => host.push(bytes),
                _ => host = None,
            });
            if let Some(host) = host {
                let views = sender.copy_to_heap(&host)?;
                return sender.hand_over(msg.clone(), views);
            }
        }
        send_copy(sender, route, M::TYPE_HASH, &Typed(msg)).map_err(|e| e.of_type(M::TYPE_NAME))
    }

    /// Messages this publisher sent over DDS because `/dev/shm` had no room
    /// for them (a container's small `/dev/shm`): see
    /// [`LoanError::SharedMemoryFull`] for what makes room.
    ///
    /// ```no_run
    /// use freight::{Context, QoS};
    /// use freight::msgs::sensor_msgs::Image;
    /// let node = Context::new()?.create_node("camera")?;
    /// let publisher = node.create_publisher::<Image>("image", QoS::default_profile())?;
    /// // ... publish for a while ...
    /// if publisher.spilled_count() > 0 {
    ///     eprintln!("frames went over DDS: give the container more /dev/shm (docker run --shm-size)");
    /// }
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn spilled_count(&self) -> u64 {
        self.sender.spilled()
    }

    /// DDS readers matched that are not freight on this host (a stock ROS 2
    /// node, a freight node elsewhere): they get the message as CDR.
    pub fn network_subscription_count(&self) -> usize {
        self.sender.network_readers()
    }
}

/// Fails unless each buffer of `msg` is its loan's slot, in order: a
/// message's buffers replaced by others cannot be published as the loan.
fn check_slots<O: Outgoing>(msg: &O) -> Result<(), PublishError> {
    let mut ordinal = 0usize;
    let mut foreign = None;
    msg.visit_buffers(&mut |raw| {
        if raw.as_loan_slot() != Some(ordinal as u32) {
            foreign.get_or_insert(ordinal);
        }
        ordinal += 1;
    });
    match foreign {
        Some(ordinal) => Err(PublishError::BufferNotFromLoan { ordinal }),
        None => Ok(()),
    }
}

/// Sends a written loan of `sender`'s whose buffers are `msg`'s slots, in a
/// frame (the in-process hand-over, which needs the Rust type, was not
/// taken).
pub(crate) fn send_lent<O: Outgoing>(
    sender: &Sender,
    type_hash: u64,
    msg: &O,
    lent: Lent,
    to_network: bool,
) -> Result<(), PublishError> {
    let Lent { mut frame, buffers, route, device_readers, .. } = lent;
    // A heap frame moves to shared memory when a subscriber in another
    // process came since the loan; should it find no room there, it
    // spills, and needs its CDR too.
    let may_spill = route == Route::Intra && sender.can_spill() && sender.route() == Route::Shm;
    let Exported { entries, device_readers, mut holds, views } =
        sender.export(&mut frame, buffers, route, device_readers, to_network || may_spill)?;
    if route == Route::Spill {
        // SAFETY: the views are the exported loan's, in `frame`, which
        // goes back to the publisher's pool only after.
        let cdr = unsafe { encode_from(msg, &views) };
        sender.recycle(frame);
        return sender.spill(cdr?);
    }
    with_meta(msg, &entries, |meta| {
        if meta.len() > sender.meta_reserve {
            return Err(PublishError::MetaTooLarge { needed: meta.len(), reserved: sender.meta_reserve });
        }
        sender.write_header_and_meta(type_hash, meta, entries.len(), &mut frame);
        Ok(())
    })?;
    let device: Vec<Entry> = entries.into_iter().filter(|e| is_device_pool(e.kind)).collect();
    // Serialized before the frame goes (it holds the bytes), written after
    // local delivery so local subscribers do not wait for the network.
    // SAFETY: the views are the exported loan's, in `frame` (alive until
    // `deliver` below) or in a host copy it holds.
    let cdr = (to_network || may_spill).then(|| unsafe { encode_from(msg, &views) });
    match (sender.rerouted(frame), cdr) {
        (Err(PublishError::Loan(LoanError::SharedMemoryFull { .. })), Some(cdr)) if may_spill => sender.spill(cdr?),
        (rerouted, cdr) => {
            let delivered = rerouted.and_then(|frame| sender.deliver(frame, &device, &device_readers));
            if matches!(delivered, Ok(()) | Err(PublishError::QueueFull { .. })) {
                // The frame went out: its readers give the holds back
                // (`deliver` already did for those it missed).
                holds.exported.clear();
            }
            if let Some(cdr) = cdr.filter(|_| to_network) {
                sender.send_network(cdr?)?;
            }
            delivered
        }
    }
}

/// Sends `msg` on `route` (the sender's, just read), its buffers copied
/// once into a frame.
pub(crate) fn send_copy<O: Outgoing>(
    sender: &Sender,
    route: Route,
    type_hash: u64,
    msg: &O,
) -> Result<(), PublishError> {
    let mut sources: Vec<&RawBuffer> = Vec::new();
    msg.visit_buffers(&mut |raw| sources.push(raw));
    let meta_len = with_meta(msg, &sender.placeholder_entries(route, sources.len()), |meta| Ok(meta.len()))?;
    let (mut frame, entries) = match sender.copy_in(route, meta_len, &sources) {
        Err(PublishError::Loan(LoanError::SharedMemoryFull { .. })) if sender.can_spill() => {
            return sender.spill(serialize(|w| msg.write(w, &mut InlineBuffers))?);
        }
        copied => copied?,
    };
    with_meta(msg, &entries, |meta| {
        debug_assert_eq!(meta.len(), meta_len);
        sender.write_header_and_meta(type_hash, meta, entries.len(), &mut frame);
        Ok(())
    })?;
    let delivered = sender.deliver(frame, &[], &[]);
    if sender.to_network() {
        sender.send_network(serialize(|w| msg.write(w, &mut InlineBuffers))?)?;
    }
    delivered
}

/// A published loan's message as CDR, its buffers read where `views` says
/// the frame (or a host copy) holds them.
///
/// # Safety
/// Each view must be readable memory that the loan wrote (its frame or host
/// copy, kept alive by the caller until this returns).
unsafe fn encode_from<O: Outgoing>(msg: &O, views: &[Option<(*const u8, usize)>]) -> Result<Vec<u8>, PublishError> {
    // SAFETY: as the caller promises.
    let slices: Vec<Option<&[u8]>> =
        views.iter().map(|v| v.map(|(ptr, len)| unsafe { std::slice::from_raw_parts(ptr, len) })).collect();
    serialize(|w| msg.write(w, &mut LoanViews(&slices)))
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

/// Encodes the meta region in this thread's scratch buffers and hands it to `f`.
fn with_meta<O: Outgoing, R>(
    msg: &O,
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
