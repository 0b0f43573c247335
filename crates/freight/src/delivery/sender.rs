//! The sending end of a topic: its ports, and the frames it lends and fills.
//!
//! A [`Sender`] is everything a publisher is but its message type. Its other
//! concerns live beside it: who reads ([`super::readers`]), device holds
//! ([`super::holds`]), the ways out ([`super::ways_out`]) and the threads
//! that look after idle senders ([`super::housekeeping`]).

use std::borrow::Cow;
use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use freight_backend::{Backend, Descriptor};
use freight_msg::{BackendKind, DeviceView, RawBuffer};
use iceoryx2::prelude::*;

use super::farewell;
use super::holds::Holds;
use super::readers::{backpressure_handler, MissedReceivers, PeerSummary, Rings, Subscribers};
use super::reserve::{NoRoom, Reservations};
use super::spill::Spill;
use super::unattached::Unattached;
use super::ways_out::HeapFrames;
use super::{housekeeping, layout, Bell, FrameMut, FullQueues, Layout, LoanedBuffer, MessageType, Route, Slot};
use crate::endpoint::{DeviceTag, PublisherAd};
use crate::error::{CreateError, LoanError, PublishError, ShmError};
use crate::frame::{retag, Entry, Header, HEADER_LEN};
use crate::network::{NetworkWriter, PeerTag};
use crate::node::Node;
use crate::qos::{Durability, QoS};
use crate::sync::lock;
use crate::topic::{local_topic, Ipc, LocalTopic, TopicServices};

type IoxPublisher = iceoryx2::port::publisher::Publisher<Ipc, [u8], ()>;

/// The sending end of one topic in this process.
pub(crate) struct Sender {
    pub(super) node: Node,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    /// Bytes a loan reserves for the small fields and the buffer table.
    pub(crate) meta_reserve: usize,
    pub(super) local: Arc<LocalTopic>,
    pub(super) services: Arc<TopicServices>,
    pub(super) iox: IoxPublisher,
    /// This process's bell, which also opens the bells its readers' processes ring.
    pub(super) bell: Arc<Bell>,
    /// The bells to ring after a frame went through shared memory.
    pub(super) rings: Mutex<Rings>,
    pub(super) summary: PeerSummary,
    pub(super) subscribers: Arc<Mutex<Subscribers>>,
    pub(super) missed: Arc<MissedReceivers>,
    pub(super) id: u64,
    pub(super) sequence: AtomicU64,
    /// The device pool buffers live in (`cuda`, `fake-device`), if any.
    pub(super) pool: Option<Arc<dyn Backend>>,
    /// Frames of the pool that a reader may have missed unannounced.
    pub(super) unattached: Option<Arc<Unattached>>,
    /// An in-frame backend of the publisher's own other than `cpu` / `shm`
    /// (`cuda-host`): frames always go through shared memory.
    pub(super) in_frame: Option<Arc<dyn Backend>>,
    /// The UUID of the pool's device, written in every frame header, and its tag.
    device: Option<[u8; 16]>,
    pub(super) device_tag: Option<DeviceTag>,
    /// Subscriptions (by port id) already told about on stderr: they accept
    /// the pool's backend but are on another device.
    pub(super) noted: Mutex<HashSet<u128>>,
    /// Reader processes already told about on stderr: they held more than
    /// their share of the pool, so they got host copies.
    pub(super) over_share: Mutex<HashSet<u32>>,
    pub(super) heap_frames: Arc<Mutex<HeapFrames>>,
    pub(super) pid: u32,
    /// Subscribers seen by the last history hand-out (transient local only).
    pub(super) latched_subscribers: AtomicUsize,
    /// The DDS writer; `None` in a local-only context.
    pub(super) network: Option<NetworkWriter>,
    pub(super) full_queues: FullQueues,
    /// The memory loans live in, as the publisher asked, and the DDS type name.
    pub(super) backend: BackendKind,
    pub(super) dds_type: String,
    /// The DDS writer for what `/dev/shm` has no room for.
    pub(super) spill: Spill,
    /// The tmpfs pages behind this publisher's loans.
    reservations: Reservations,
    /// Whether this publisher said on stderr that `/dev/shm` is full.
    said_full: AtomicBool,
    /// The largest frame checked against `/dev/shm`'s size, and whether that
    /// check said on stderr that the QoS asks more than it holds.
    foreseen: AtomicUsize,
    said_small: AtomicBool,
    /// Whether a frame left through shared memory: then the publisher says
    /// farewell when dropped ([`farewell`]).
    pub(super) sent_shm: AtomicBool,
    /// This process's mailbox, where the answers to its farewell come.
    mailbox: Option<Arc<farewell::Mailbox>>,
}

impl Drop for Sender {
    fn drop(&mut self) {
        if let Some(mailbox) = self.mailbox.as_ref().filter(|_| self.sent_shm.load(Ordering::Relaxed)) {
            farewell::say(self, mailbox);
        }
    }
}

/// What a loan holds besides its message: the frame, the buffers lent in it
/// or in a device pool, the route and the device readers it was lent for.
pub(crate) struct Lent {
    /// The id of the publisher that lent it: only it sends the loan.
    pub owner: u64,
    pub frame: FrameMut,
    pub buffers: Vec<LoanedBuffer>,
    pub route: Route,
    pub device_readers: Vec<u32>,
    /// The backend the buffers live in.
    pub kind: BackendKind,
}

impl Lent {
    /// Number of buffers lent.
    pub(crate) fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Length in bytes of buffer `i`.
    pub(crate) fn buffer_len(&self, i: usize) -> Option<usize> {
        self.buffers.get(i).map(|b| b.block.len())
    }

    /// The backend the buffers live in (`cpu` for a loan without buffers).
    pub(crate) fn backend(&self) -> BackendKind {
        self.buffers.first().map_or(BackendKind::Cpu, |b| b.backend.kind())
    }

    /// Buffer `i` as uninitialised host memory; `None` for device memory.
    pub(crate) fn buffer_uninit_mut(&mut self, i: usize) -> Option<&mut [MaybeUninit<u8>]> {
        self.buffers.get_mut(i)?.block.host_mut()
    }

    /// Where a device addresses buffer `i`.
    pub(crate) fn device_view(&self, i: usize) -> Option<DeviceView> {
        self.buffers.get(i)?.block.device_view()
    }

    /// Names the stream of the device writes to every buffer.
    pub(crate) fn set_write_stream(&mut self, stream: u64) {
        for b in &mut self.buffers {
            b.block.set_write_stream(stream);
        }
    }

    /// Copies `src` into buffer `i` at `offset`, wherever the buffer lives.
    pub(crate) fn write_buffer_from_host(&mut self, i: usize, offset: usize, src: &[u8]) -> Result<(), LoanError> {
        let count = self.buffers.len();
        let b = self.buffers.get_mut(i).ok_or(LoanError::NoSuchBuffer { index: i, count })?;
        Ok(b.block.write_from_host(offset, src)?)
    }

    /// Fails unless `sender` lent it: only the publisher that lent a loan
    /// sends it.
    pub(crate) fn check_owner(&self, sender: &Sender) -> Result<(), PublishError> {
        if self.owner == sender.id() {
            Ok(())
        } else {
            Err(PublishError::ForeignLoan)
        }
    }
}

/// A loan's buffers once exported: the table entries the frame's meta
/// describes, the readers its device buffers are lent to (one per
/// subscription), the holds to give back if the publish fails, and where each
/// buffer's host bytes are (for the network; empty when nobody reads there).
pub(crate) struct Exported<'a> {
    pub entries: Vec<Entry>,
    pub device_readers: Vec<u32>,
    pub holds: Holds<'a>,
    pub views: Vec<Option<(*const u8, usize)>>,
}

impl Sender {
    /// Opens the ports of a sender of `ty` on `topic` (the fully qualified
    /// name): the iceoryx2 publisher, and the DDS writer unless
    /// the context is local only. `backend` is where loans live.
    pub(crate) fn open(
        node: &Node,
        topic: &str,
        qos: QoS,
        backend: BackendKind,
        meta_reserve: usize,
        ty: &MessageType,
        full_queues: FullQueues,
    ) -> Result<Arc<Self>, CreateError> {
        let ctx = &node.inner.ctx.inner;
        let limits = ctx.limits;
        qos.validate(&limits)?;
        let own = match backend {
            BackendKind::Shm | BackendKind::Cpu => None,
            k => Some(ctx.backend(k).map_err(CreateError::BackendUnavailable)?),
        };
        let (pool, in_frame) = match own {
            Some(b) if b.in_frame() => (None, Some(b)),
            b => (b, None),
        };
        let device = pool.as_ref().and_then(|p| ctx.device_uuid(p.kind()));
        let device_tag = device.map(|u| DeviceTag::of_uuid(&u));
        let local = local_topic(ctx.domain_id, topic, ty.name, ty.rust_type)?;
        let services = node.inner.topics.open(&node.inner.iox, ctx.domain_id, topic, ty.name, ty.hash, &limits)?;

        let subscribers: Arc<Mutex<Subscribers>> = Arc::default();
        let missed = Arc::new(MissedReceivers::default());
        let name = PublisherAd {
            pid: std::process::id(),
            pid_ns: crate::process::pid_namespace(),
            reliability: qos.reliability,
            durability: qos.durability,
            backend,
            device: device_tag,
        }
        .encode();
        let iox = services
            .data
            .publisher_builder()
            .name(&PortName::new(&name).map_err(CreateError::shm(topic, "naming the publisher port"))?)
            .initial_max_slice_len(HEADER_LEN + meta_reserve + 4096)
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_loaned_samples(4)
            .set_backpressure_handler(backpressure_handler(qos, subscribers.clone(), missed.clone()))
            .create()
            .map_err(CreateError::shm(topic, "creating the publisher port"))?;
        let bell = Bell::get(topic)?;
        let id = iox.id().value() as u64 ^ (iox.id().value() >> 64) as u64;
        let network = match ctx.participant_for(topic, &qos)? {
            Some(participant) => {
                let tag = PeerTag::of_this_process(node, Some(backend), None);
                let w = NetworkWriter::new(&participant, node, topic, &ty.dds_name, &qos, &tag);
                Some(w.map_err(|source| CreateError::Network { topic: topic.into(), source })?)
            }
            None => None,
        };
        let sender = Arc::new(Sender {
            node: node.clone(),
            topic: topic.into(),
            qos,
            meta_reserve,
            local,
            services,
            iox,
            bell,
            rings: Mutex::default(),
            summary: PeerSummary::unread(),
            subscribers,
            missed,
            id,
            sequence: AtomicU64::new(0),
            unattached: pool.as_ref().map(|p| Arc::new(Unattached::new(p))),
            pool,
            in_frame,
            device,
            device_tag,
            noted: Mutex::default(),
            over_share: Mutex::default(),
            heap_frames: Arc::default(),
            pid: std::process::id(),
            latched_subscribers: AtomicUsize::new(0),
            network,
            full_queues,
            backend,
            dds_type: ty.dds_name.clone(),
            spill: Spill::default(),
            reservations: Reservations::default(),
            said_full: AtomicBool::new(false),
            foreseen: AtomicUsize::new(0),
            said_small: AtomicBool::new(false),
            sent_shm: AtomicBool::new(false),
            mailbox: farewell::mailbox(),
        });
        if qos.durability == Durability::TransientLocal {
            housekeeping::latch::register(&sender);
        }
        if let Some(pool) = &sender.pool {
            housekeeping::reaper::watch(pool);
        }
        if let Some(unattached) = &sender.unattached {
            housekeeping::reaper::tend(&sender, unattached);
        }
        Ok(sender)
    }

    /// The node this sender belongs to.
    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// This publisher's id, in the headers of its frames.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Subscriptions alive now, in any process, after removing those whose
    /// process died (and reclaiming the samples they held).
    pub(crate) fn subscription_count(&self) -> usize {
        self.node.inner.iox.try_cleanup_dead_nodes();
        self.listed_subscriptions()
    }

    /// Subscriptions the topic lists now, those of processes that died and
    /// were not cleaned up yet included: a look at shared memory, where
    /// [`subscription_count`](Self::subscription_count) scans the host's
    /// nodes first.
    pub(crate) fn listed_subscriptions(&self) -> usize {
        self.services.data.dynamic_config().number_of_subscribers()
    }

    /// Lends a frame for buffers of `lens` bytes: on the route the readers
    /// ask for, the buffers in the frame or in the publisher's device pool
    /// (with a host-copy slot in the frame when some reader needs one). A
    /// frame `/dev/shm` has no room for is a heap frame to spill over DDS,
    /// when this publisher can ([`spill`](super::spill)).
    pub(crate) fn lend(&self, lens: &[usize]) -> Result<Lent, LoanError> {
        let route = self.route();
        let (device_readers, host_readers) = self.lend_to(route);
        // Network readers take host bytes too.
        let needs_host_copy = host_readers > 0 || self.to_network();
        // Device buffers without a host copy take no room in the frame.
        let in_frame: Cow<'_, [usize]> = match self.pool {
            Some(_) if !needs_host_copy => Cow::Owned(vec![0; lens.len()]),
            _ => Cow::Borrowed(lens),
        };
        // Device buffers live outside the frame, and count against the limit too.
        self.check_size(lens.iter().try_fold(0usize, |n, &l| n.checked_add(l)))?;
        let lay = self.frame_layout(self.meta_reserve, &in_frame)?;
        let (mut frame, route) = match self.alloc_frame(route, lay.total) {
            Err(LoanError::SharedMemoryFull { .. }) if self.spill_writer().is_some() => {
                (self.alloc_frame(Route::Spill, lay.total)?, Route::Spill)
            }
            frame => (frame?, route),
        };
        // Where buffers in the frame live: the host memory of the route, or
        // the publisher's own in-frame backend (cuda-host).
        let frame_backend = self.in_frame.clone().unwrap_or_else(|| self.host_backend(route));
        let mut buffers = Vec::with_capacity(lens.len());
        for (&len, offset) in lens.iter().zip(lay.slots(&in_frame)) {
            let slot = frame.slot(offset, len);
            let view = Some((slot.ptr.cast_const(), slot.len));
            let b = match &self.pool {
                None => LoanedBuffer {
                    block: frame_backend.allocate(len, Some(slot))?,
                    backend: frame_backend.clone(),
                    host_copy: None,
                    host_view: view,
                    frame_offset: Some(offset),
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
        let kind = self.pool.as_ref().map_or(frame_backend.kind(), |p| p.kind());
        Ok(Lent { owner: self.id, frame, buffers, route, device_readers, kind })
    }

    /// Exports a written loan's buffers for its readers: device blocks are
    /// held for each reader that takes them (and get their one host copy in
    /// `frame` when some reader needs it); frame memory of the publisher's
    /// own backend is described as plain host memory too. `to_network` keeps
    /// where the host bytes are, to serialize them.
    pub(crate) fn export(
        &self,
        frame: &mut FrameMut,
        buffers: Vec<LoanedBuffer>,
        route: Route,
        device_readers: Vec<u32>,
        to_network: bool,
    ) -> Result<Exported<'_>, PublishError> {
        let host = self.host_backend(route);
        let device_readers = self.still_reading(route, device_readers);
        let views = if to_network { buffers.iter().map(|b| b.host_view).collect() } else { Vec::new() };
        let mut entries = Vec::with_capacity(buffers.len());
        let mut holds = Holds { pool: self.pool.as_deref(), exported: Vec::new() };
        for b in buffers {
            // Device blocks are held for each reader, and once more for the
            // publisher itself when it makes the host copy.
            let readers = match (b.backend.in_frame(), b.host_copy.is_some()) {
                (true, _) => Vec::new(),
                (false, false) => device_readers.clone(),
                (false, true) => [device_readers.as_slice(), &[self.pid]].concat(),
            };
            let len = b.block.len();
            let descriptor = b.backend.export(b.block, &readers)?;
            if !readers.is_empty() {
                holds.exported.push((descriptor.clone(), readers));
            }
            let alt = match (b.host_copy, b.frame_offset) {
                (Some(slot), _) => Some((host.kind(), self.host_copy(&b.backend, &host, descriptor.as_bytes(), slot)?)),
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
        Ok(Exported { entries, device_readers, holds, views })
    }

    /// Lays out a frame for `lens` bytes of buffers copied from the user's
    /// memory (`publish_copy`) on `route` and writes each into it; returns the frame and
    /// the entries of its buffer table.
    pub(crate) fn copy_in(
        &self,
        route: Route,
        meta_len: usize,
        sources: &[&RawBuffer],
    ) -> Result<(FrameMut, Vec<Entry>), PublishError> {
        let host = self.host_backend(route);
        let lens: Vec<usize> = sources.iter().map(|r| r.len_bytes()).collect();
        let lay = self.frame_layout(meta_len, &lens)?;
        let mut frame = self.alloc_frame(route, lay.total)?;
        let mut entries = Vec::with_capacity(sources.len());
        for ((src, &len), offset) in sources.iter().zip(&lens).zip(lay.slots(&lens)) {
            let mut block = host.allocate(len, Some(frame.slot(offset, len))).map_err(LoanError::from)?;
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
        Ok((frame, entries))
    }

    /// Table entries with placeholder descriptors of host memory, one per
    /// buffer: descriptor sizes do not depend on offsets, so the meta length
    /// of a copied message is known before its layout.
    pub(crate) fn placeholder_entries(&self, route: Route, buffers: usize) -> Vec<Entry> {
        let placeholder =
            Descriptor::from_slice(&[0; freight_backend::IN_FRAME_DESCRIPTOR_LEN]).expect("a short descriptor");
        let kind = self.host_backend(route).kind();
        (0..buffers).map(|_| Entry { kind, descriptor: placeholder.clone(), alt: None }).collect()
    }

    pub(super) fn host_backend(&self, route: Route) -> Arc<dyn Backend> {
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
    pub(crate) fn check_size(&self, total: Option<usize>) -> Result<(), LoanError> {
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
    pub(crate) fn rerouted(&self, frame: FrameMut) -> Result<FrameMut, PublishError> {
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

    /// The loan error for a full `/dev/shm`, said on stderr too, once per
    /// publisher (one that spills says so when it first does).
    fn no_room(&self, r: NoRoom) -> LoanError {
        let e = LoanError::SharedMemoryFull { needed: r.needed, free: r.free, size: r.size };
        if !self.can_spill() && !self.said_full.swap(true, Ordering::Relaxed) {
            eprintln!("freight: the publisher of {}: {e}", self.topic);
        }
        e
    }

    /// Says once on stderr, before any loan fails, when frames of `total` bytes
    /// at this publisher's depth may need more than all of `/dev/shm` (a
    /// container's 64 MB): a statvfs for each new largest frame, until said.
    fn foresee(&self, total: usize) {
        // Plain loads first: this runs on every shared-memory loan, and a
        // read-modify-write would cost more than the rest of it.
        if self.said_small.load(Ordering::Relaxed)
            || total <= self.foreseen.load(Ordering::Relaxed)
            || total <= self.foreseen.fetch_max(total, Ordering::Relaxed)
        {
            return;
        }
        let Ok(shm) = freight_backend::os::space(std::path::Path::new("/dev/shm")) else { return };
        let limits = &self.node.inner.ctx.inner.limits;
        let readers = lock(&self.subscribers).len().max(1);
        let depth = self.qos.depth(limits.max_depth);
        if let Some(warning) =
            super::reserve::foresight(total, depth, readers, limits.max_history, shm.total, self.can_spill())
        {
            if !self.said_small.swap(true, Ordering::Relaxed) {
                eprintln!("freight: the publisher of {}: {warning}", self.topic);
                // Made now, so that discovery has matched it by the time a
                // frame finds no room.
                self.spill_writer();
            }
        }
    }

    pub(super) fn alloc_frame(&self, route: Route, total: usize) -> Result<FrameMut, LoanError> {
        match route {
            Route::Intra | Route::Spill => self.heap_frame(total).map(FrameMut::Heap),
            Route::Shm => {
                self.foresee(total);
                self.reservations.check_room(total).map_err(|r| self.no_room(r))?;
                let mut s = self.iox.loan_slice_uninit(total).map_err(ShmError::doing("loaning a sample"))?;
                let base = s.payload_mut().as_mut_ptr().cast();
                // Dropping the sample on error gives its chunk back.
                self.reservations.reserve(base, total).map_err(|r| self.no_room(r))?;
                Ok(FrameMut::Shm(Box::new(s), base))
            }
        }
    }

    /// A heap frame of `total` bytes, from this publisher's pool when it has one.
    fn heap_frame(&self, total: usize) -> Result<Vec<u8>, LoanError> {
        let mut v = lock(&self.heap_frames).take(total).unwrap_or_default();
        // A failed allocation is an error to the caller, not an abort.
        v.try_reserve_exact(total.saturating_sub(v.len()))
            .map_err(|source| LoanError::OutOfMemory { len: total, source })?;
        v.resize(total, 0);
        Ok(v)
    }

    /// Copies `sources` into a heap frame, for a message `publish_copy` hands
    /// over in this process: a view of each buffer's copy, in order, which
    /// share the frame. No buffers, no frame.
    pub(crate) fn copy_to_heap(&self, sources: &[&[u8]]) -> Result<impl Iterator<Item = RawBuffer>, PublishError> {
        if sources.is_empty() {
            return Ok(self.heap_views(Vec::new(), Vec::new().into_iter()));
        }
        let lens: Vec<usize> = sources.iter().map(|s| s.len()).collect();
        let lay = self.frame_layout(0, &lens)?;
        let slots: Vec<Slot> = lay.slots(&lens).zip(lens.iter().copied()).collect();
        let mut bytes = self.heap_frame(lay.total)?;
        for (src, &(offset, len)) in sources.iter().zip(&slots) {
            // `layout` placed each slot inside `total` bytes.
            bytes[offset..offset + len].copy_from_slice(src);
        }
        Ok(self.heap_views(bytes, slots.into_iter()))
    }

    /// Writes the frame header (with the next sequence number and the time
    /// now) and the meta region.
    pub(crate) fn write_header_and_meta(&self, type_hash: u64, meta: &[u8], buffers: usize, frame: &mut FrameMut) {
        let header = Header {
            type_hash,
            publisher_id: self.id,
            sequence: self.sequence.fetch_add(1, Ordering::Relaxed),
            publish_time_ns: crate::clock::monotonic_ns(),
            meta_len: meta.len() as u32,
            buffer_count: buffers as u32,
            device: self.device,
        };
        let mut h = [0u8; HEADER_LEN];
        header.write(&mut h);
        frame.write_at(0, &h);
        frame.write_at(HEADER_LEN, meta);
    }
}
