//! Publishers and subscriptions of a message type known only at run time —
//! rclcpp's `GenericPublisher` and `GenericSubscription`, with freight's
//! loans and negotiation. The C ABI makes them for the C++ types a user
//! generates from their own `.msg` files.
//!
//! The type is a [`MessageLayout`]; a message is a [`GenericMessage`]: its
//! small fields as CDR with buffer ordinals, and its buffers. Both ends take
//! every route a typed endpoint takes (in the process, shared memory, DDS),
//! and match typed endpoints of the same definition, since the layout
//! carries their type hash. When every reader is a generic subscription in
//! the process, a message is handed over as it is, its buffers in a heap
//! frame (no frame header, no encode or decode), as a typed one is between
//! endpoints of its Rust type; a typed endpoint and a generic one of the same
//! type meet through frames. Services of a run-time type are
//! [`GenericServiceServer`] and [`GenericClient`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use freight::generic::{ElementInfo, FieldKind, Item, MessageLayout, Number, StructLayout};
//! use freight::{Context, PublisherOptions, SubscriptionOptions};
//!
//! // my_msgs/msg/Scan: `uint32 id` and `float32[] ranges`, as a build step would describe it.
//! let layout = Arc::new(MessageLayout::new(
//!     "my_msgs/msg/Scan",
//!     0x5ca9,
//!     StructLayout::new(vec![
//!         ("id".into(), FieldKind::Single(Item::Number(Number::Four))),
//!         ("ranges".into(), FieldKind::Buffer(ElementInfo::of::<f32>())),
//!     ]),
//! ));
//! let node = Context::new()?.create_node("lidar")?;
//! let publisher = node.create_generic_publisher("scan", layout.clone(), 5, PublisherOptions::default())?;
//! let subscription = node.create_generic_subscription("scan", layout, 5, SubscriptionOptions::default())?;
//!
//! let mut loan = publisher.loan_buffers(&[4 * 1024])?;
//! loan.write_buffer_from_host(0, 0, &[0u8; 4 * 1024])?;
//! let mut fields = freight_msg::CdrWriter::new();
//! fields.write_u32(7); // id
//! fields.write_u32(0); // ranges: buffer 0 of the loan
//! // SAFETY: the one buffer was written whole above.
//! publisher.publish(unsafe { loan.assume_init() }, fields.finish())?;
//!
//! let sample = subscription.take(Duration::from_secs(1))?.expect("a scan");
//! assert_eq!(sample.buffers()[0].len_bytes(), 4 * 1024);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use definition::{buffer_element, is_buffer_field, layout_from_definition, layout_from_specs, DefinitionError};
pub use freight_msg::generic::{FieldKind, GenericMessage, Item, MessageLayout, Number, StructLayout};
pub use freight_msg::ElementInfo;
use freight_msg::{BackendKind, DeviceView, RawBuffer};
pub use service::{GenericClient, GenericPendingCall, GenericServiceServer};

use crate::delivery::{decode_frame, decode_network, Arrival, FullQueues, Lent, MessageType, Receiver, Route, Sender};
use crate::error::{CreateError, LoanError, PublishError, TakeError};
use crate::node::Node;
use crate::publisher::{send_copy, send_lent, PublisherOptions};
use crate::qos::QoS;
use crate::sample::MessageInfo;
use crate::subscription::{take_within, SubscriptionOptions};
use crate::sync::lock;

mod definition;
mod service;

impl Node {
    /// Creates a publisher of the type `layout` describes on `topic`.
    pub fn create_generic_publisher(
        &self,
        topic: &str,
        layout: Arc<MessageLayout>,
        qos: impl Into<QoS>,
        options: PublisherOptions,
    ) -> Result<GenericPublisher, CreateError> {
        GenericPublisher::create(self, &self.resolve_topic_name(topic)?, layout, qos.into(), options, FullQueues::ByQos)
    }

    /// Creates a subscription to the type `layout` describes on `topic`.
    pub fn create_generic_subscription(
        &self,
        topic: &str,
        layout: Arc<MessageLayout>,
        qos: impl Into<QoS>,
        options: SubscriptionOptions,
    ) -> Result<GenericSubscription, CreateError> {
        GenericSubscription::create(self, &self.resolve_topic_name(topic)?, layout, qos.into(), options)
    }
}

/// The delivery layer's view of a generic type. Its Rust type is
/// [`GenericMessage`] whatever the layout, so no typed publisher hands a
/// message over to a generic subscription, nor a generic publisher to a typed
/// one; generic endpoints of one topic have one layout (its type hash).
fn message_type(layout: &MessageLayout) -> MessageType {
    MessageType {
        name: interned(layout.type_name()),
        hash: layout.hash(),
        dds_name: layout.dds_type_name(),
        rust_type: std::any::TypeId::of::<GenericMessage>(),
    }
}

/// `name`, kept for the life of the process: endpoints and errors name a
/// type with a `&'static str`, as a Rust type's `TYPE_NAME` is. One copy per
/// distinct name, so a process that makes endpoints of a few types keeps a
/// few strings.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = lock(&NAMES);
    let names = names.get_or_insert_with(HashSet::new);
    match names.get(name) {
        Some(kept) => kept,
        None => {
            let kept: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.insert(kept);
            kept
        }
    }
}

/// Publishes messages of a run-time type on one topic.
pub struct GenericPublisher {
    sender: Arc<Sender>,
    layout: Arc<MessageLayout>,
    type_name: &'static str,
}

impl std::fmt::Debug for GenericPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericPublisher<{}>({})", self.type_name, self.sender.topic)
    }
}

impl GenericPublisher {
    /// A publisher on the fully qualified `topic`, with what a publish does
    /// with a full queue.
    pub(crate) fn create(
        node: &Node,
        topic: &str,
        layout: Arc<MessageLayout>,
        qos: QoS,
        options: PublisherOptions,
        full_queues: FullQueues,
    ) -> Result<Self, CreateError> {
        let ty = message_type(&layout);
        let sender = Sender::open(node, topic, qos, options.backend, options.meta_reserve, &ty, full_queues)?;
        Ok(GenericPublisher { sender, layout, type_name: ty.name })
    }

    /// The topic, fully qualified.
    pub fn topic_name(&self) -> &str {
        &self.sender.topic
    }

    /// The type.
    pub fn layout(&self) -> &Arc<MessageLayout> {
        &self.layout
    }

    /// Subscriptions alive now, in any process (see
    /// [`Publisher::subscription_count`](crate::Publisher::subscription_count)).
    pub fn subscription_count(&self) -> usize {
        self.sender.subscription_count()
    }

    /// Subscriptions the topic lists now, without removing those of dead
    /// processes first.
    pub(crate) fn listed_subscription_count(&self) -> usize {
        self.sender.listed_subscriptions()
    }

    /// DDS readers matched that are not freight on this host (see
    /// [`Publisher::network_subscription_count`](crate::Publisher::network_subscription_count)).
    pub fn network_subscription_count(&self) -> usize {
        self.sender.network_readers()
    }

    /// Messages sent over DDS because shared memory had no room for them
    /// (see [`Publisher::spilled_count`](crate::Publisher::spilled_count)).
    pub fn spilled_count(&self) -> u64 {
        self.sender.spilled()
    }

    /// Lends memory for a message with one length per buffer field outside
    /// its sequences ([`MessageLayout::fixed_buffer_count`]), in declaration
    /// order.
    pub fn loan_buffers(&self, lens: &[usize]) -> Result<GenericLoanUninit, LoanError> {
        let expected = self.layout.fixed_buffer_count();
        if expected != lens.len() {
            return Err(LoanError::BufferCount { type_name: self.type_name, expected, given: lens.len() });
        }
        Ok(GenericLoanUninit { lent: self.sender.lend(lens)? })
    }

    /// Publishes a written loan with the small fields `fields` (CDR, the
    /// loan's buffers named by their ordinals 0, 1, … in order). Nothing is
    /// copied but the small fields.
    pub fn publish(&self, loan: GenericLoan, fields: Vec<u8>) -> Result<(), PublishError> {
        let sender = &self.sender;
        let lent = loan.lent;
        lent.check_owner(sender)?;
        let to_network = lent.route == Route::Spill || sender.to_network();
        let lent = match sender.to_hand_over(lent, to_network) {
            Ok((bytes, buffers)) => {
                let msg =
                    GenericMessage::new(self.layout.clone(), fields, sender.loan_views(bytes, &buffers).collect())
                        .map_err(|e| unmade(self.type_name, e))?;
                return sender.hand_over_sample(|info| GenericSample { message: msg, info });
            }
            Err(lent) => lent,
        };
        // The loan's slots, in order: what `fields` must name.
        let slots = (0..lent.buffers.len())
            .map(|i| RawBuffer::loan_slot(i as u32, lent.buffers[i].block.len(), lent.kind))
            .collect();
        let msg = GenericMessage::new(self.layout.clone(), fields, slots).map_err(|e| unmade(self.type_name, e))?;
        send_lent(sender, self.layout.hash(), &msg, lent, to_network)
    }

    /// Publishes a message held in ordinary memory: its buffers are copied
    /// once into the frame. When every reader is a generic subscription in
    /// this process, each gets a copy of the message itself, its buffers
    /// copied once into a heap frame that the copies share.
    pub fn publish_copy(&self, msg: &GenericMessage) -> Result<(), PublishError> {
        if msg.layout().hash() != self.layout.hash() {
            let reason = format!("the message is a {}", msg.layout().type_name());
            return Err(PublishError::Fields { type_name: self.type_name, reason });
        }
        let sender = &self.sender;
        let route = sender.route();
        if sender.hands_over_copies(sender.to_network(), || route) {
            let host: Option<Vec<&[u8]>> = msg.buffers().iter().map(RawBuffer::host_bytes).collect();
            if let Some(host) = host {
                let views = sender.copy_to_heap(&host)?;
                // Not held to its bounds: the frame path does not check them
                // either (`GenericMessage::new` did, for a message made here).
                let copy = GenericMessage::received(msg.layout().clone(), msg.fields().to_vec(), views.collect())
                    .map_err(|e| unmade(self.type_name, e))?;
                return sender.hand_over_sample(|info| GenericSample { message: copy, info });
            }
        }
        send_copy(sender, route, self.layout.hash(), msg)
    }
}

/// Why a message of `type_name` could not be made from its small fields:
/// a bound exceeded, or fields that do not follow the layout.
pub(crate) fn unmade(type_name: &'static str, e: freight_msg::DecodeError) -> PublishError {
    match e.kind {
        freight_msg::cdr::DecodeErrorKind::OverBound { field, over } => {
            PublishError::OverBound { type_name, field, over }
        }
        _ => PublishError::Fields { type_name, reason: e.to_string() },
    }
}

/// A loan of a generic publisher whose buffers have not been written.
pub struct GenericLoanUninit {
    lent: Lent,
}

/// A written loan of a generic publisher: [`GenericPublisher::publish`] it.
pub struct GenericLoan {
    lent: Lent,
}

impl GenericLoanUninit {
    /// Number of buffers in the loan.
    pub fn buffer_count(&self) -> usize {
        self.lent.buffer_count()
    }

    /// Length in bytes of buffer `i`.
    pub fn buffer_len(&self, i: usize) -> Option<usize> {
        self.lent.buffer_len(i)
    }

    /// The backend the loan's buffers live in.
    pub fn backend(&self) -> BackendKind {
        self.lent.backend()
    }

    /// Buffer `i` as uninitialised host memory; `None` for device memory.
    pub fn buffer_uninit_mut(&mut self, i: usize) -> Option<&mut [MaybeUninit<u8>]> {
        self.lent.buffer_uninit_mut(i)
    }

    /// Where a device addresses buffer `i` (see
    /// [`LoanUninit::device_view`](crate::LoanUninit::device_view)).
    pub fn device_view(&self, i: usize) -> Option<DeviceView> {
        self.lent.device_view(i)
    }

    /// Names the stream of the device writes to the buffers (see
    /// [`LoanUninit::set_write_stream`](crate::LoanUninit::set_write_stream)).
    pub fn set_write_stream(&mut self, stream: u64) {
        self.lent.set_write_stream(stream);
    }

    /// Copies `src` into buffer `i` at `offset`, wherever the buffer lives.
    pub fn write_buffer_from_host(&mut self, i: usize, offset: usize, src: &[u8]) -> Result<(), LoanError> {
        self.lent.write_buffer_from_host(i, offset, src)
    }

    /// Declares every buffer written.
    ///
    /// # Safety
    /// Every byte of every buffer must have been written (see
    /// [`LoanUninit::assume_init`](crate::LoanUninit::assume_init)).
    pub unsafe fn assume_init(self) -> GenericLoan {
        GenericLoan { lent: self.lent }
    }
}

impl std::fmt::Debug for GenericLoanUninit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericLoanUninit({} buffers in {})", self.buffer_count(), self.backend())
    }
}

impl std::fmt::Debug for GenericLoan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericLoan({} buffers)", self.lent.buffers.len())
    }
}

/// Receives messages of a run-time type from one topic.
pub struct GenericSubscription {
    pub(crate) inner: Arc<Receiver>,
    layout: Arc<MessageLayout>,
    type_name: &'static str,
}

impl std::fmt::Debug for GenericSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GenericSubscription<{}>({})", self.type_name, self.inner.topic)
    }
}

/// A message a generic subscription took, and how it came. Its buffers keep
/// the memory they view mapped while they live.
#[derive(Debug, Clone)]
pub struct GenericSample {
    /// The message.
    pub message: GenericMessage,
    /// How it came.
    pub info: MessageInfo,
}

impl std::ops::Deref for GenericSample {
    type Target = GenericMessage;
    fn deref(&self) -> &GenericMessage {
        &self.message
    }
}

impl GenericSubscription {
    /// A subscription on the fully qualified `topic`.
    pub(crate) fn create(
        node: &Node,
        topic: &str,
        layout: Arc<MessageLayout>,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Self, CreateError> {
        let ty = message_type(&layout);
        let inner = Receiver::open(node, topic, qos, options.accepted_backends, options.wait, &ty)?;
        Ok(GenericSubscription { inner, layout, type_name: ty.name })
    }

    /// The topic, fully qualified.
    pub fn topic_name(&self) -> &str {
        &self.inner.topic
    }

    /// The type.
    pub fn layout(&self) -> &Arc<MessageLayout> {
        &self.layout
    }

    /// Publishers of this topic alive now, in any process.
    pub fn publisher_count(&self) -> usize {
        self.inner.publisher_count()
    }

    /// DDS writers matched that are not freight on this host (see
    /// [`Subscription::network_publisher_count`](crate::Subscription::network_publisher_count)).
    pub fn network_publisher_count(&self) -> usize {
        self.inner.network.as_ref().map_or(0, crate::network::NetworkReader::remote_writers)
    }

    /// What DDS knows this subscription missed of its DDS publishers (see
    /// [`Subscription::network_losses`](crate::Subscription::network_losses)).
    pub fn network_losses(&self) -> crate::NetworkLosses {
        crate::NetworkLosses::of(&self.inner)
    }

    /// Takes the next message if one is queued.
    pub fn try_take(&self) -> Result<Option<GenericSample>, TakeError> {
        let ty = (self.type_name, self.layout.hash());
        let read = |bytes: &[u8], bufs: &mut dyn freight_msg::BufferDecoder| {
            GenericMessage::read(self.layout.clone(), bytes, bufs)
        };
        let (message, info) = match self.inner.next()? {
            Some(Arrival::Frame(frame, transport)) => decode_frame(&self.inner, frame, transport, ty, read)?,
            Some(Arrival::Cdr(sample)) => decode_network(&self.inner, sample, read)?,
            // Handed over only while every endpoint of the topic in this
            // process is generic (`LocalTopic::one_rust_type`), so this is a
            // `GenericSample`; the error is a guard, not a path.
            Some(Arrival::Sample(sample)) => {
                return match sample.downcast::<GenericSample>() {
                    Ok(sample) => Ok(Some(*sample)),
                    Err(_) => Err(TakeError::WrongType { expected: ty.0, expected_hash: ty.1, found: 0 }),
                }
            }
            None => return Ok(None),
        };
        Ok(Some(GenericSample { message, info }))
    }

    /// Takes the next message, waiting up to `timeout` for one, as
    /// [`Subscription::take`](crate::Subscription::take) does.
    pub fn take(&self, timeout: Duration) -> Result<Option<GenericSample>, TakeError> {
        take_within(&self.inner, timeout, || self.try_take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_once() {
        let a = interned("my_msgs/msg/Once");
        let b = interned(&String::from("my_msgs/msg/Once"));
        assert!(std::ptr::eq(a, b));
    }
}
