//! The receiving end of a topic: its ports, and the next frame from the
//! three ways in (in-process queue, shared memory, network).
//!
//! A [`Receiver`] is everything a subscription is but its message type;
//! [`super::import`] reads what it receives.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freight_backend::{Frame, FrameMemory};
use freight_dds::ReceivedCdr;
use freight_msg::{BackendKind, BackendSet};
use iceoryx2::prelude::*;

use super::readers::PEER_REFRESH;
use super::{farewell, Bell, MessageType};
use crate::context::Context;
use crate::endpoint::{DeviceTag, SubscriberAd, WaitMode};
use crate::error::{CreateError, ShmError, TakeError};
use crate::frame::{decode_meta, Header, TableReader};
use crate::negotiation::takes_device_memory;
use crate::network::{NetworkReader, PeerTag};
use crate::node::Node;
use crate::qos::{Durability, History, QoS};
use crate::sample::Transport;
use crate::sync::lock;
use crate::topic::{local_topic, Handed, IntraQueue, Ipc, LocalTopic, TopicServices};

type IoxSubscriber = iceoryx2::port::subscriber::Subscriber<Ipc, [u8], ()>;
type IoxSample = iceoryx2::sample::Sample<Ipc, [u8], ()>;

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
// sample is released on drop, which freight's thread-safe service
// (`iox_service`) allows from any thread.
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

/// The receiving end of one topic in this process.
pub(crate) struct Receiver {
    pub(crate) node: Node,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    pub(crate) accepts: BackendSet,
    /// The UUIDs of this process's devices for the device-pool backends it accepts.
    pub(super) devices: OwnDevices,
    /// Gives back the device holds of frames it will not read.
    pub(super) unread: Unread,
    /// Publishers (by id) whose buffers arrived in other memory than this
    /// subscription asked for, already reported on stderr; at most
    /// [`NOTED_MAX`].
    noted: Mutex<HashSet<u64>>,
    wait: WaitMode,
    _local: Arc<LocalTopic>,
    intra: Arc<IntraQueue>,
    pub(crate) services: Arc<TopicServices>,
    iox: IoxSubscriber,
    /// Frames taken out of `iox` for this subscription when a publisher
    /// said farewell ([`farewell`]), older than anything still there; at
    /// most `depth`. Locked around every receive from `iox`, so that a
    /// publisher's frames stay in order.
    kept: Mutex<VecDeque<Frame>>,
    depth: usize,
    /// Keeps this process's mailbox open while the subscription lives.
    _mailbox: Option<Arc<farewell::Mailbox>>,
    /// This process's bell, which wakes a blocking take.
    pub(crate) bell: Arc<Bell>,
    /// When it was made (see [`Receiver::longest_sleep`]).
    made: Instant,
    /// The DDS reader; `None` in a local-only context.
    pub(crate) network: Option<NetworkReader>,
}

/// What a receiver took: a frame (in-process or shared memory) or a network
/// message as CDR.
pub(crate) enum Arrival {
    Frame(Frame, Transport),
    /// A `Sample<M>` handed over in the process as it is.
    Sample(Box<dyn std::any::Any + Send>),
    Cdr(ReceivedCdr),
}

impl Receiver {
    /// Opens the ports of a receiver of `ty` on `topic` (the fully qualified
    /// name) that takes memory of `accepts` as is and waits as `wait` says:
    /// the in-process queue, the iceoryx2 subscriber (woken through the
    /// process's [`Bell`]), and the DDS reader unless the context is local
    /// only.
    pub(crate) fn open(
        node: &Node,
        topic: &str,
        qos: QoS,
        accepts: Option<BackendSet>,
        wait: WaitMode,
        ty: &MessageType,
    ) -> Result<Arc<Self>, CreateError> {
        let ctx = &node.inner.ctx.inner;
        let limits = ctx.limits;
        let depth = qos.validate(&limits)?;
        let accepts = accepts.unwrap_or_else(|| ctx.default_accepted());
        for k in accepts.iter() {
            ctx.backend(k).map_err(CreateError::BackendUnavailable)?;
        }
        let ad = SubscriberAd {
            pid: std::process::id(),
            reliability: qos.reliability,
            durability: qos.durability,
            keep_all: qos.history == History::KeepAll,
            accepts,
            wait,
            devices: ctx.devices_of(accepts),
            pid_ns: crate::process::pid_namespace(),
        };
        // Only the devices of accepted backends: asking creates the backend.
        let device = |k: BackendKind| accepts.contains(k).then(|| ctx.device_uuid(k)).flatten();
        let devices = OwnDevices { cuda: device(BackendKind::Cuda), fake_device: device(BackendKind::FakeDevice) };
        let local = local_topic(ctx.domain_id, topic, ty.name, ty.rust_type)?;
        let services = node.inner.topics.open(&node.inner.iox, ctx.domain_id, topic, ty.name, ty.hash, &limits)?;
        let history = if qos.durability == Durability::TransientLocal { depth } else { 0 };
        // Before the port exists: a publisher that sees it finds the mailbox
        // and the bell.
        let mailbox = farewell::mailbox();
        let bell = Bell::get(topic)?;
        let port = PortName::new(&ad.encode()).map_err(CreateError::shm(topic, "naming the subscriber port"))?;
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
                let rings = Arc::clone(&bell);
                let wake = Box::new(move || rings.ring_here());
                let tag = PeerTag::of_this_process(node, None, Some(accepts));
                let r = NetworkReader::new(&participant, node, topic, &ty.dds_name, &qos, &tag, wake);
                Some(r.map_err(|source| CreateError::Network { topic: topic.into(), source })?)
            }
            None => None,
        };
        let unread = Unread { ctx: node.inner.ctx.clone(), accepts, devices };
        let on_evict = {
            let unread = unread.clone();
            Box::new(move |frame: &Frame| unread.release_frame(frame.bytes()))
        };
        let intra = Arc::new(IntraQueue::new(ad, depth, on_evict));
        lock(&local.subs).push(Arc::downgrade(&intra));
        let receiver = Arc::new(Receiver {
            node: node.clone(),
            topic: topic.into(),
            qos,
            accepts,
            devices,
            unread,
            noted: Mutex::default(),
            wait,
            _local: local,
            intra,
            services,
            iox,
            kept: Mutex::default(),
            depth,
            _mailbox: mailbox,
            bell,
            made: Instant::now(),
            network,
        });
        farewell::register(&receiver);
        Ok(receiver)
    }

    /// The iceoryx2 id of its subscriber port.
    pub(super) fn port_id(&self) -> u128 {
        self.iox.id().value()
    }

    /// Receives what is queued in shared memory into this subscription's
    /// own queue, so that it holds it after the publisher goes: the newest
    /// `depth` frames, those of a keep-last subscription dropping the
    /// oldest. What it may not hold more of stays queued.
    pub(super) fn keep_queued(&self) {
        let mut kept = lock(&self.kept);
        // A live publisher may refill its queue meanwhile: a bound on the
        // receives, at a full queue per publisher.
        let publishers = self.services.data.dynamic_config().number_of_publishers().max(1);
        let keep_all = self.qos.history == History::KeepAll;
        for _ in 0..self.depth.saturating_mul(publishers) {
            if keep_all && kept.len() >= self.depth {
                break;
            }
            // Nothing left, or the subscription holds all a publisher lets it.
            let Ok(Some(sample)) = self.iox.receive() else { break };
            kept.push_back(Arc::new(ShmFrame::new(sample)));
            if kept.len() > self.depth {
                if let Some(oldest) = kept.pop_front() {
                    self.unread.release_frame(oldest.bytes());
                }
            }
        }
    }

    /// Publishers of this topic alive now, in any process, after removing
    /// those whose process died.
    pub(crate) fn publisher_count(&self) -> usize {
        self.node.inner.iox.try_cleanup_dead_nodes();
        self.services.data.dynamic_config().number_of_publishers()
    }

    /// Takes the next frame or network message if one is queued: in-process
    /// frames first, then shared memory, then the network.
    pub(crate) fn next(&self) -> Result<Option<Arrival>, TakeError> {
        match self.intra.pop() {
            Some(Handed::Frame(frame)) => return Ok(Some(Arrival::Frame(frame, Transport::Intra))),
            Some(Handed::Sample(sample)) => return Ok(Some(Arrival::Sample(sample))),
            None => {}
        }
        let mut kept = lock(&self.kept);
        if let Some(frame) = kept.pop_front() {
            return Ok(Some(Arrival::Frame(frame, Transport::Shm)));
        }
        let received = self.iox.receive();
        drop(kept);
        match received {
            Ok(Some(s)) => Ok(Some(Arrival::Frame(Arc::new(ShmFrame::new(s)), Transport::Shm))),
            Ok(None) => match &self.network {
                Some(n) => n.take().map(|s| s.map(Arrival::Cdr)).map_err(TakeError::Network),
                None => Ok(None),
            },
            Err(iceoryx2::port::ReceiveError::ExceedsMaxBorrows) => {
                Err(TakeError::TooManyHeld(self.node.inner.ctx.inner.limits.max_held_samples))
            }
            Err(e) => Err(ShmError::doing("receiving a sample")(e).into()),
        }
    }

    /// Sleeps until a message is queued or `timeout` passes, woken by the
    /// process's [`Bell`] (or sooner, see [`Receiver::longest_sleep`]).
    pub(crate) fn wait_for_wakeup(&self, timeout: Duration) -> Result<(), TakeError> {
        self.bell.wait(self.longest_sleep(timeout), || self.has_data())?;
        Ok(())
    }

    /// How long a wait of at most `timeout` may sleep before it looks for
    /// data again without a ring. A publisher re-reads its subscribers when
    /// their number changes or [`PEER_REFRESH`] has passed: one that saw a
    /// subscription go and this one come since it last looked (the same
    /// number) sends to it without ringing its process for that long. While
    /// that can be, the subscription looks every half of it.
    pub(crate) fn longest_sleep(&self, timeout: Duration) -> Duration {
        if self.made.elapsed() < 2 * PEER_REFRESH {
            timeout.min(PEER_REFRESH / 2)
        } else {
            timeout
        }
    }

    pub(crate) fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    /// Whether a message is queued.
    pub(crate) fn has_data(&self) -> bool {
        !self.intra.is_empty()
            || !lock(&self.kept).is_empty()
            || self.iox.has_samples().unwrap_or(false)
            || self.network.as_ref().is_some_and(NetworkReader::has_data)
    }

    /// Whether this subscription is on the device of `kind`'s memory that a
    /// frame names (by UUID; `None` on both sides matches).
    pub(super) fn same_device(&self, kind: BackendKind, device: Option<[u8; 16]>) -> bool {
        self.devices.get(kind) == device
    }

    /// Says on stderr, once per publisher, that its buffers reach this
    /// subscription in other memory than it asked for, and why: a fallback
    /// is never silent.
    pub(super) fn note_fallback(&self, publisher_id: u64, why: impl FnOnce() -> String) {
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
pub(super) struct OwnDevices {
    cuda: Option<[u8; 16]>,
    fake_device: Option<[u8; 16]>,
}

impl OwnDevices {
    pub(super) fn get(&self, kind: BackendKind) -> Option<[u8; 16]> {
        match kind {
            BackendKind::Cuda => self.cuda,
            BackendKind::FakeDevice => self.fake_device,
            _ => None,
        }
    }
}

/// A device for messages: its short tag, or `none`.
pub(super) fn device_name(uuid: Option<[u8; 16]>) -> String {
    uuid.map_or_else(|| "none".into(), |u| DeviceTag::of_uuid(&u).short())
}

impl Drop for Receiver {
    /// Gives back device-memory holds of messages this subscription will never
    /// read: the publisher counted it as a reader of each of them.
    fn drop(&mut self) {
        while let Some(item) = self.intra.pop() {
            if let Handed::Frame(frame) = item {
                self.unread.release_frame(frame.bytes());
            }
        }
        for frame in lock(&self.kept).drain(..) {
            self.unread.release_frame(frame.bytes());
        }
        while let Ok(Some(sample)) = self.iox.receive() {
            self.unread.release_frame(sample.payload());
        }
    }
}

/// Gives back the device holds of frames a subscription will not read
/// (publishers count it as a reader of each device buffer it takes as is):
/// frames queued when it is dropped, frames a full best-effort queue lets go,
/// buffers of a table that no field refers to.
#[derive(Clone)]
pub(super) struct Unread {
    ctx: Context,
    accepts: BackendSet,
    devices: OwnDevices,
}

impl Unread {
    /// The holds of a whole frame; a frame that does not parse holds nothing
    /// this subscription could give back.
    pub(super) fn release_frame(&self, bytes: &[u8]) {
        if let Ok(h) = Header::read(bytes) {
            if let Ok(meta) = decode_meta(bytes, &h) {
                self.release(meta.table, h.device);
            }
        }
    }

    /// The holds of the buffers left in `rest`, of a publisher lending memory
    /// of `device`.
    pub(super) fn release(&self, rest: TableReader<'_>, device: Option<[u8; 16]>) {
        for e in rest.flatten() {
            if takes_device_memory(e.kind, self.accepts, self.devices.get(e.kind) == device) {
                if let Ok(b) = self.ctx.inner.backend(e.kind) {
                    // An error means there was no hold (it was reclaimed).
                    let _ = b.release_unimported(e.descriptor, std::process::id());
                }
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
