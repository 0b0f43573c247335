//! The ways a message leaves: to in-process subscriptions as it is, or its
//! frame by pointer; to shared memory through the iceoryx2 port; to the
//! network as CDR.
//!
//! [`Sender::hand_over_sample`] is the one place a message goes to
//! in-process subscriptions without a frame, [`Sender::deliver`] the one
//! place a local frame is sent, [`Sender::send_network`] the one place a
//! message is written to DDS.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use freight_backend::{frame_view, FrameMemory, HeapFrame};
use freight_msg::{BackendKind, CdrWriter, EncodeError, Message, RawBuffer};

use super::unattached::Sent;
use super::{FrameMut, FullQueues, Lent, LoanedBuffer, Route, Sender, Slot};
use crate::endpoint::WaitMode;
use crate::error::{PublishError, ShmError};
use crate::frame::Entry;
use crate::network::NetworkWriter;
use crate::qos::Durability;
use crate::sample::{MessageInfo, Sample, Transport};
use crate::sync::lock;
use crate::topic::{Delivery, Handed, IntraQueue, WhenFull};

/// Heap frames a publisher keeps for reuse, at most.
const HEAP_FRAME_POOL: usize = 4;
/// Allocations a kept frame may go unused before it is freed.
const HEAP_FRAME_IDLE: u32 = 8;

/// The heap frames a publisher's last readers gave back: allocating fresh
/// pages per message costs more than a copy (page faults), so in-process
/// frames are recycled. A frame that a stream of smaller (or larger) messages
/// does not reuse is freed after [`HEAP_FRAME_IDLE`] allocations, so the
/// memory of a burst of large messages does not stay with the publisher.
#[derive(Debug, Default)]
pub(super) struct HeapFrames {
    /// Each frame with the allocations since it was given back.
    frames: Vec<(Vec<u8>, u32)>,
}

impl HeapFrames {
    /// The smallest kept frame that holds `total` bytes and is not twice as
    /// large (a small message must not keep a large frame alive).
    pub(super) fn take(&mut self, total: usize) -> Option<Vec<u8>> {
        let fits = |v: &Vec<u8>| v.capacity() >= total && v.capacity() / 2 <= total;
        let at =
            (0..self.frames.len()).filter(|&i| fits(&self.frames[i].0)).min_by_key(|&i| self.frames[i].0.capacity());
        let taken = at.map(|i| self.frames.swap_remove(i).0);
        self.frames.retain_mut(|(_, idle)| {
            *idle += 1;
            *idle < HEAP_FRAME_IDLE
        });
        taken
    }

    fn give_back(&mut self, frame: Vec<u8>) {
        if self.frames.len() == HEAP_FRAME_POOL {
            // The one unused longest makes room.
            let idlest = (0..self.frames.len()).max_by_key(|&i| self.frames[i].1);
            idlest.map(|i| self.frames.swap_remove(i));
        }
        self.frames.push((frame, 0));
    }
}

/// A heap frame that goes back to its publisher's [`HeapFrames`] when the
/// last subscriber drops it.
#[derive(Debug)]
struct PooledFrame {
    frame: HeapFrame,
    pool: std::sync::Weak<Mutex<HeapFrames>>,
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
            lock(&pool).give_back(std::mem::take(&mut self.frame.0));
        }
    }
}

thread_local! {
    /// A scratch vector per thread for serialized messages: large messages
    /// would otherwise fault in fresh pages on every publish.
    static CDR_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Serializes a message for the network into this thread's scratch vector
/// (given back by [`Sender::send_network`]).
pub(crate) fn serialize(
    encode: impl FnOnce(&mut CdrWriter) -> Result<(), EncodeError>,
) -> Result<Vec<u8>, PublishError> {
    let mut w = CdrWriter::from_vec(CDR_SCRATCH.take());
    encode(&mut w)?;
    Ok(w.finish())
}

impl Sender {
    /// Takes a written loan apart for [`Sender::hand_over`] when it goes to
    /// the in-process subscriptions as it is: its frame is a heap frame of
    /// the in-process route, its buffers are host memory in that frame, and
    /// a copy would be handed over too ([`Sender::hands_over_copies`]) on the
    /// route read now (no subscriber in another process came since the
    /// loan). Returns the frame and the buffers, whose views
    /// [`Sender::loan_views`] makes; any other loan comes back whole.
    pub(crate) fn to_hand_over(&self, lent: Lent, to_network: bool) -> Result<(Vec<u8>, Vec<LoanedBuffer>), Lent> {
        let in_frame = |b: &LoanedBuffer| {
            b.backend.kind() == BackendKind::Cpu && b.host_copy.is_none() && b.frame_offset.is_some()
        };
        let Lent { owner, frame, buffers, route, device_readers, kind } = lent;
        match frame {
            FrameMut::Heap(bytes)
                if route == Route::Intra
                    && device_readers.is_empty()
                    && buffers.iter().all(in_frame)
                    && self.hands_over_copies(to_network, || self.route()) =>
            {
                Ok((bytes, buffers))
            }
            frame => Err(Lent { owner, frame, buffers, route, device_readers, kind }),
        }
    }

    /// Views of the buffers of a loan [`Sender::to_hand_over`] took apart, in
    /// its heap frame `bytes`.
    pub(crate) fn loan_views<'a>(
        &'a self,
        bytes: Vec<u8>,
        buffers: &'a [LoanedBuffer],
    ) -> impl Iterator<Item = RawBuffer> + 'a {
        let slots = buffers.iter().map(|b| {
            let offset = b.frame_offset.expect("`to_hand_over` checked that each buffer is in the frame");
            (offset, b.block.len())
        });
        self.heap_views(bytes, slots)
    }

    /// Whether a message given by reference (`publish_copy`) goes to the
    /// in-process subscriptions as a copy of itself ([`Sender::hand_over`]),
    /// its buffers copied once into a heap frame; for a loan, what it needs
    /// besides. No network reader needs the message encoded, every endpoint
    /// of the topic in this process has the publisher's Rust type, and the
    /// `route` (read last: it scans the subscriber list) is in-process. The
    /// caller checks that the buffers are host memory.
    pub(crate) fn hands_over_copies(&self, to_network: bool, route: impl FnOnce() -> Route) -> bool {
        !to_network && self.local.one_rust_type() && route() == Route::Intra
    }

    /// Publishes a message by handing it to each in-process subscription
    /// (when [`Sender::to_hand_over`] or [`Sender::hands_over_copies`] says
    /// so): its buffers become `views` (of a heap frame, one per buffer, in
    /// order), and nothing is encoded, checked or decoded (the frame path
    /// writes a header and the small fields' CDR, which the subscription
    /// reads back).
    pub(crate) fn hand_over<M: Message>(
        &self,
        mut msg: M,
        mut views: impl Iterator<Item = RawBuffer>,
    ) -> Result<(), PublishError> {
        msg.visit_buffers_mut(&mut |raw| {
            if let Some(view) = views.next() {
                *raw = view;
            }
        });
        self.hand_over_sample(|info| Sample { msg, info })
    }

    /// Views of the heap frame `bytes` at `slots`, for a message handed over:
    /// the frame goes back to this publisher's pool when the last view is
    /// dropped (at once, with no slots).
    pub(super) fn heap_views(
        &self,
        bytes: Vec<u8>,
        slots: impl ExactSizeIterator<Item = Slot>,
    ) -> impl Iterator<Item = RawBuffer> {
        let frame = if slots.len() == 0 {
            if bytes.capacity() > 0 {
                self.recycle(FrameMut::Heap(bytes));
            }
            None
        } else {
            Some(self.pooled_frame(bytes))
        };
        slots.map(move |(offset, len)| {
            let frame = frame.as_ref().expect("a frame where there are slots");
            RawBuffer::from_storage(frame_view(frame, offset, len).expect("a handed-over buffer lies in its frame"))
        })
    }

    /// Hands each in-process subscription the sample `sample` makes of this
    /// message's [`MessageInfo`]: a [`Sample`] of a Rust type, or a generic
    /// subscription's sample. Every subscription but the last gets a clone
    /// (buffers that view a heap frame share it).
    pub(crate) fn hand_over_sample<S: Clone + Send + 'static>(
        &self,
        sample: impl FnOnce(MessageInfo) -> S,
    ) -> Result<(), PublishError> {
        let info = MessageInfo {
            publisher_id: self.id,
            sequence: self.sequence.fetch_add(1, Ordering::Relaxed),
            publish_time_ns: crate::clock::monotonic_ns(),
            transport: Transport::Intra,
            backend: BackendKind::Cpu,
        };
        let mut sample = Some(sample(info));
        let (wake, missed) = self.local.with_subscribers(|subscribers| {
            let (mut wake, mut missed) = (false, 0);
            for (i, q) in subscribers.iter().enumerate() {
                let item = if i + 1 == subscribers.len() { sample.take() } else { sample.clone() };
                let Some(item) = item else { break };
                match self.deliver_intra(q, Handed::Sample(Box::new(item))) {
                    Delivery::Delivered => wake |= q.ad.wait == WaitMode::Block,
                    Delivery::Skipped => {}
                    Delivery::TimedOut => missed += 1,
                }
            }
            (wake, missed)
        });
        if wake {
            self.bell.ring_here();
        }
        self.delivered(missed)
    }

    /// Gives a heap frame that no reader saw (a spilled loan's) back to this
    /// publisher's pool: a stream of spilled frames reuses one allocation.
    pub(crate) fn recycle(&self, frame: FrameMut) {
        if let FrameMut::Heap(bytes) = frame {
            lock(&self.heap_frames).give_back(bytes);
        }
    }

    /// A heap frame that goes back to this publisher's pool when its last
    /// reader drops it.
    fn pooled_frame(&self, bytes: Vec<u8>) -> freight_backend::Frame {
        Arc::new(PooledFrame { frame: HeapFrame(bytes), pool: Arc::downgrade(&self.heap_frames) })
    }

    /// Sends a finished frame. `device` lists its buffers in device memory,
    /// lent to the processes of `lent_to` (one per subscription), whose holds
    /// are given back for subscribers that do not receive it.
    pub(crate) fn deliver(&self, frame: FrameMut, device: &[Entry], lent_to: &[u32]) -> Result<(), PublishError> {
        let mut missed = 0;
        match frame {
            FrameMut::Heap(bytes) => {
                let frame = self.pooled_frame(bytes);
                let mut wake = false;
                self.local.with_subscribers(|subscribers| {
                    for q in subscribers {
                        match self.deliver_intra(q, Handed::Frame(frame.clone())) {
                            Delivery::Delivered => wake |= q.ad.wait == WaitMode::Block,
                            Delivery::Skipped => self.release_for(&q.ad, device),
                            Delivery::TimedOut => {
                                self.release_for(&q.ad, device);
                                missed += 1;
                            }
                        }
                    }
                });
                if wake {
                    self.bell.ring_here();
                }
            }
            FrameMut::Shm(sample, _) => {
                // SAFETY: every byte of the sample is initialized: header and
                // meta were written above, buffers through the typestate loan
                // or the copy, and padding is shared memory that the kernel
                // zero-filled when first mapped or that held an earlier frame.
                let sample = unsafe { (*sample).assume_init() };
                // Held from before the send until the frame is noted (see `Noting`).
                let noting = self.unattached.as_ref().filter(|_| !device.is_empty()).map(|u| u.for_send());
                let sent = sample.send();
                if !self.sent_shm.load(Ordering::Relaxed) {
                    self.sent_shm.store(true, Ordering::Relaxed);
                }
                let handled = self.missed.take();
                // A subscriber the handler failed the send for missed the
                // frame. One it discarded the frame for at once may have
                // received it anyway: iceoryx2 tries the queue once more after
                // the handler's answer. Only when the handler discarded it for
                // every subscriber (one slow reader, say) does the count of
                // recipients tell: none got it, or all did. Otherwise the
                // holds are left to `unattached`.
                let every_one = !device.is_empty() && sent.is_ok() && self.all_discarded(&handled);
                let none_got_it = every_one && sent == Ok(0);
                let mut given_back = Vec::new();
                for &(ad, waited_for) in &handled {
                    missed += usize::from(waited_for);
                    if let Some(ad) = ad.filter(|_| waited_for || none_got_it) {
                        self.release_for(&ad, device);
                        given_back.push(ad.pid);
                    }
                }
                // Whether someone may have missed the frame without the
                // handler knowing who, or received it after the handler gave
                // up: the frame is a suspect of its device holds.
                let unknown = match sent {
                    Ok(recipients) if every_one => recipients != 0 && recipients != handled.len(),
                    Ok(recipients) => {
                        let unannounced = self.unannounced_misses(recipients, &handled);
                        missed += unannounced.waited_for;
                        unannounced.any
                    }
                    // The send stopped counting recipients.
                    Err(iceoryx2::port::SendError::UnableToDeliver) => true,
                    Err(e) => return Err(ShmError::doing("sending a sample")(e).into()),
                };
                if let Some(noting) = noting {
                    let suspect = unknown || (!every_one && handled.iter().any(|&(_, waited_for)| !waited_for));
                    noting.note(Sent { device, lent_to, given_back: &given_back, suspect });
                }
                if self.summary.any_blocking.load(Ordering::Acquire) {
                    self.ring_readers();
                }
            }
        }
        self.delivered(missed)
    }

    /// Rings the bells of the processes where a subscription in shared
    /// memory blocks. A bell nobody heard (its process made it anew) is
    /// opened again at the next publish, which re-reads the subscribers; its
    /// subscriptions see this frame at their next look meanwhile, so that is
    /// not an error of this publish.
    pub(super) fn ring_readers(&self) {
        let rings = lock(&self.rings);
        if rings.here {
            self.bell.ring_here();
        }
        // Every bell is rung, also after one was not heard.
        let unheard = rings.peers.iter().filter(|p| !p.ring()).count();
        drop(rings);
        if unheard > 0 {
            self.summary.count.store(usize::MAX, Ordering::Release);
        }
    }

    /// Reports the subscribers waited for that missed the message.
    fn delivered(&self, missed: usize) -> Result<(), PublishError> {
        if missed > 0 {
            return Err(PublishError::QueueFull { subscribers: missed });
        }
        Ok(())
    }

    /// Queues `item` for an in-process subscription, as [`FullQueues`] and
    /// the QoS say for a full queue.
    fn deliver_intra(&self, q: &IntraQueue, item: Handed) -> Delivery {
        let when_full = match self.full_queues {
            FullQueues::SkipNew => WhenFull::DropNew,
            FullQueues::ByQos if q.ad.is_waited_for_by(&self.qos) => WhenFull::Wait(self.qos.max_blocking_time),
            FullQueues::ByQos => WhenFull::DropOldest,
        };
        q.push(item, when_full)
    }

    pub(crate) fn network_readers(&self) -> usize {
        self.network.as_ref().map_or(0, NetworkWriter::remote_readers)
    }

    /// Whether a message goes to the DDS writer: when a network reader is matched,
    /// and always on a transient-local topic, whose DDS history serves readers that
    /// join later (a stock node started after the latched message was published).
    pub(crate) fn to_network(&self) -> bool {
        self.network.is_some() && (self.qos.durability == Durability::TransientLocal || self.network_readers() > 0)
    }

    /// Writes a serialized message to the DDS writer and keeps the vector's
    /// memory for the next one.
    pub(crate) fn send_network(&self, cdr: Vec<u8>) -> Result<(), PublishError> {
        match &self.network {
            Some(n) => write_cdr(n, cdr).map_err(PublishError::Network),
            None => {
                CDR_SCRATCH.set(cdr);
                Ok(())
            }
        }
    }
}

/// Writes a serialized message to `writer` and keeps the vector's memory for
/// the next one.
pub(super) fn write_cdr(writer: &NetworkWriter, cdr: Vec<u8>) -> Result<(), freight_dds::DdsError> {
    let written = writer.write(&cdr);
    CDR_SCRATCH.set(cdr);
    written
}
