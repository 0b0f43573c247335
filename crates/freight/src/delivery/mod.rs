//! The delivery layer: how a message's frame is made, who reads it, and the
//! ways it leaves — under the typed fronts [`crate::Publisher`] and
//! [`crate::Subscription`], as iceoryx2 keeps its ports over
//! `port/details/sender.rs` and Cyclone DDS names each way out in
//! `dds_write.c`.
//!
//! One message, publisher to subscriber, one file per step:
//!
//! 1. `publisher.rs` (`Publisher::loan`) asks [`Sender::lend`]
//!    (`sender.rs`) for a frame: [`readers`] says which [`Route`] it takes
//!    (in-process heap frame, or an iceoryx2 sample every process maps) and
//!    [`holds`] which readers a device buffer is lent to.
//! 2. The user writes the buffers in place (`loan.rs`, typestate).
//! 3. `Publisher::publish` first offers the message to
//!    [`Sender::hand_over`] (`ways_out.rs`): on the in-process route with
//!    host buffers and no network reader the message itself goes to each
//!    in-process queue, nothing encoded (`Publisher::publish_copy` too,
//!    its buffers copied once; a generic publisher's message likewise, to
//!    generic subscriptions). Otherwise it encodes the small
//!    fields (`frame.rs`);
//!    [`Sender::export`] exports the buffers, holding device blocks for
//!    their readers ([`holds`]), and [`ways_out`] sends the frame: by pointer
//!    to in-process subscriptions, through the iceoryx2 port to other
//!    processes, as CDR to the DDS writer (`network.rs`) for readers on other
//!    hosts and stock ROS 2 nodes. A frame `/dev/shm` had no room for goes
//!    to every reader as CDR through the publisher's spill writer ([`spill`]).
//! 4. On the other side [`Receiver::next`] (`receiver.rs`) takes the
//!    next frame (or handed-over sample) from the same three ways in, and
//!    [`import`] decodes a frame,
//!    taking each buffer in the memory `negotiation.rs` picks.
//!
//! [`housekeeping`] runs the per-process threads: history for late joiners
//! of latched topics, holds of dead readers given back, and those of
//! readers that missed a frame unannounced ([`unattached`]). A dropped
//! publisher says [`farewell`] so that what it sent outlives it. A
//! subscription that blocks is woken through its process's [`bell`], which
//! publishers ring once per process.

use std::mem::MaybeUninit;
use std::sync::Arc;

use freight_backend::{Backend, BlockMut, FrameSlot};
use freight_msg::Message;

use iceoryx2::prelude::ServiceName;
use iceoryx2::service::service_name::ServiceNameError;

use crate::frame::{DATA_ALIGN, HEADER_LEN};
use crate::process::Process;
use crate::topic::Ipc;

mod bell;
mod farewell;
mod holds;
pub(crate) mod housekeeping;
mod import;
mod readers;
mod receiver;
mod reserve;
mod sender;
mod spill;
mod unattached;
mod ways_out;

pub(crate) use bell::Bell;
pub(crate) use import::{decode, decode_cdr, decode_frame, decode_network};
pub(crate) use receiver::{Arrival, Receiver};
pub(crate) use sender::{Exported, Lent, Sender};
pub(crate) use ways_out::serialize;

/// The event service of `kind` that `process` keeps for itself (its
/// farewell mailbox, its bell), named after its pid namespace and pid,
/// which its peers read from the names of its ports.
fn process_service(kind: &str, (pid_ns, pid): Process) -> Result<ServiceName, ServiceNameError> {
    ServiceName::new(&format!("{kind}/{:x}/{pid}", pid_ns.unwrap_or(0)))
}

/// A notifier of the event service of `kind` that another process keeps
/// for itself, opened through `node`.
fn notifier_of(
    node: &iceoryx2::node::Node<Ipc>,
    kind: &str,
    process: Process,
) -> Result<iceoryx2::port::notifier::Notifier<Ipc>, String> {
    let name = process_service(kind, process).map_err(|e| format!("{e:?}"))?;
    let service = node.service_builder(&name).event().open().map_err(|e| format!("{e:?}"))?;
    service.notifier_builder().create().map_err(|e| format!("{e:?}"))
}

/// What a publish does with a subscription's full queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullQueues {
    /// As the QoS says: wait for a keep-all queue
    /// ([`SubscriberAd::is_waited_for_by`](crate::endpoint::SubscriberAd::is_waited_for_by));
    /// otherwise an in-process queue lets its oldest message go, one in
    /// shared memory misses the new one.
    ByQos,
    /// Never wait, and never push out what a queue holds: a service's
    /// replies. Every client receives every reply, so an idle client's queue
    /// fills with others'; a waiting one must not lose its own to them.
    SkipNew,
}

type IoxSampleUninit = iceoryx2::sample_mut_uninit::SampleMutUninit<Ipc, [MaybeUninit<u8>], ()>;

/// Which way a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Heap frame, to in-process subscriptions only.
    Intra,
    /// iceoryx2 sample, to every subscription.
    Shm,
    /// Heap frame whose message goes to every subscription over DDS, when
    /// `/dev/shm` has no room for the frame ([`spill`]).
    Spill,
}

/// A frame being written.
pub(crate) enum FrameMut {
    Heap(Vec<u8>),
    /// The sample and the start of its payload, read once (iceoryx2's
    /// thread-safe samples lock on every `payload_mut()`). Boxed: the sample
    /// is about 200 bytes, and a loan moves through several calls between
    /// `loan` and `publish`; one allocation costs less than copying it each
    /// time (callgrind, BENCHMARKS.md).
    Shm(Box<IoxSampleUninit>, *mut u8),
}

// SAFETY: the raw pointer is the payload of the sample held beside it, which
// freight's thread-safe service (`iox_service`) lets move between threads; it
// is only used by the owner of the frame.
unsafe impl Send for FrameMut {}

impl FrameMut {
    fn base(&mut self) -> *mut u8 {
        match self {
            FrameMut::Heap(v) => v.as_mut_ptr(),
            FrameMut::Shm(_, base) => *base,
        }
    }

    pub(crate) fn slot(&mut self, offset: usize, len: usize) -> FrameSlot {
        // SAFETY: callers pass regions computed by `layout`, inside the frame.
        let process_local = matches!(self, FrameMut::Heap(_));
        FrameSlot { offset, ptr: unsafe { self.base().add(offset) }, len, process_local }
    }

    pub(crate) fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        // SAFETY: callers write inside the frame and over no block of a live
        // loan: the header and meta regions `layout` reserved, or a whole
        // frame copied into a new one.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(offset), bytes.len()) }
    }
}

/// Where a buffer lies in a frame: its offset and its length in bytes.
pub(crate) type Slot = (usize, usize);

/// Offsets of one frame: where its first buffer starts, and its length.
pub(crate) struct Layout {
    first: usize,
    pub total: usize,
}

impl Layout {
    /// The offset of each buffer, for the lengths the layout was made for.
    pub(crate) fn slots<'a>(&self, in_frame_lens: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
        // `layout` did the same sums with checked arithmetic and got `total`:
        // none of them overflows.
        let mut at = self.first;
        in_frame_lens.iter().map(move |&len| {
            let slot = at;
            at = (at + len).next_multiple_of(DATA_ALIGN);
            slot
        })
    }
}

/// The frame for a header, `meta_len` bytes of meta and the buffers stored in
/// it, each 64-byte aligned; `None` when its size does not fit a `usize`
/// (lengths come from users and, through `publish_copy`, from peers).
pub(crate) fn layout(meta_len: usize, in_frame_lens: &[usize]) -> Option<Layout> {
    let aligned = |n: usize| n.checked_next_multiple_of(DATA_ALIGN);
    let first = aligned(HEADER_LEN.checked_add(meta_len)?)?;
    let total = in_frame_lens.iter().try_fold(first, |at, &len| aligned(at.checked_add(len)?))?;
    Some(Layout { first, total })
}

/// One buffer of a loan.
pub(crate) struct LoanedBuffer {
    pub block: BlockMut,
    pub backend: Arc<dyn Backend>,
    /// The frame region for a host copy of a device buffer, when some
    /// subscriber needs one.
    pub host_copy: Option<FrameSlot>,
    /// Where the buffer's bytes are in host memory once written (its frame
    /// region, or its host copy's); read to serialize for the network.
    pub host_view: Option<(*const u8, usize)>,
    /// Offset of the buffer in the frame, for buffers that live there.
    pub frame_offset: Option<usize>,
}

// SAFETY: the pointer is into the frame of the same loan, which moves with it.
unsafe impl Send for LoanedBuffer {}

/// What the delivery layer knows of a message type.
pub(crate) struct MessageType {
    pub name: &'static str,
    pub hash: u64,
    /// The DDS type name (`pkg::msg::dds_::Name_`).
    pub dds_name: String,
    /// The Rust type: an in-process hand-over needs the same on both sides.
    pub rust_type: std::any::TypeId,
}

impl MessageType {
    pub(crate) fn of<M: Message>() -> Self {
        MessageType {
            name: M::TYPE_NAME,
            hash: M::TYPE_HASH,
            dds_name: M::dds_type_name(),
            rust_type: std::any::TypeId::of::<M>(),
        }
    }
}
