//! The publisher's view of its readers: who subscribes in shared memory and
//! in this process, which route a frame takes, and who missed one.
//!
//! The subscriber list is read from the iceoryx2 service only when the count
//! changed or [`PEER_REFRESH`] passed; every publish reads a few atomics of
//! the [`PeerSummary`]. Telling a dead subscriber from a living one in
//! another pid namespace lists every iceoryx2 node of the host (about 60 µs
//! per node): that happens only when a pid cannot answer.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use freight_msg::BackendKind;
use iceoryx2::port::{BackpressureAction, BackpressureInfo};
use iceoryx2::prelude::*;

use super::bell::PeerBell;
use super::{Route, Sender};
use crate::endpoint::{SubscriberAd, WaitMode};
use crate::process::{dead_nodes, is_own_node};
use crate::qos::{Durability, QoS};
use crate::sync::lock;

/// How often the publisher re-reads the subscriber list even when the count of
/// subscribers did not change (one left and another joined).
pub(super) const PEER_REFRESH: Duration = Duration::from_millis(100);

/// The topic's subscribers as last read from the service, by iceoryx2 port id
/// (the backpressure handler looks receivers up by it).
pub(super) type Subscribers = std::collections::HashMap<u128, Subscriber>;

/// A subscriber in shared memory, as the last read of the service found it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Subscriber {
    pub(super) ad: SubscriberAd,
    /// Whether `ad.pid` names its process in this pid namespace (it was alive
    /// here when its node was): only then does `kill(pid, 0)` say it died.
    pub(super) pid_here: bool,
}

/// What every publish needs to know about the subscribers, readable without a
/// lock; the `Subscribers` map behind its mutex is only touched when they change.
#[derive(Default)]
pub(super) struct PeerSummary {
    /// Subscriber count when last read; `usize::MAX` forces a read.
    pub(super) count: AtomicUsize,
    /// CLOCK_MONOTONIC_COARSE ms of the last read.
    read_at_ms: AtomicU64,
    any_remote: AtomicBool,
    pub(super) any_blocking: AtomicBool,
}

/// The bells a frame sent through shared memory rings: this process's when a
/// subscription here blocks (a transient-local topic's go through shared
/// memory), and one for each other process where one does.
#[derive(Default)]
pub(super) struct Rings {
    pub(super) here: bool,
    pub(super) peers: Vec<Arc<PeerBell>>,
}

/// Subscribers a frame could not be delivered to, recorded by the backpressure
/// handler during `send`. The publish path reads one flag when nothing was
/// missed, which is nearly always.
#[derive(Default)]
pub(super) struct MissedReceivers {
    any: AtomicBool,
    /// Each missed subscriber (if known) and whether the publisher waited for it.
    list: Mutex<Vec<(Option<SubscriberAd>, bool)>>,
}

/// What [`Sender::unannounced_misses`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unannounced {
    /// Subscribers the publisher waits for that missed the sample, as far as
    /// can be told.
    pub(super) waited_for: usize,
    /// Whether any subscriber missed it.
    pub(super) any: bool,
}

impl MissedReceivers {
    fn record(&self, ad: Option<SubscriberAd>, waited_for: bool) {
        lock(&self.list).push((ad, waited_for));
        self.any.store(true, Ordering::Release);
    }

    pub(super) fn take(&self) -> Vec<(Option<SubscriberAd>, bool)> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.list))
    }
}

impl PeerSummary {
    /// A summary that makes the first publish read the subscribers.
    pub(super) fn unread() -> Self {
        PeerSummary { count: AtomicUsize::new(usize::MAX), ..Default::default() }
    }
}

/// The iceoryx2 backpressure handler of a publisher: retries up to the QoS's
/// blocking time for a subscriber the publisher waits for (both reliable and
/// keep-all, [`SubscriberAd::is_waited_for_by`]), records each subscriber it
/// gives up on in `missed`. Every other full queue misses the message at once:
/// a stopped or slow keep-last subscriber never slows the publisher.
pub(super) fn backpressure_handler(
    qos: QoS,
    subscribers: Arc<Mutex<Subscribers>>,
    missed: Arc<MissedReceivers>,
) -> impl Fn(&BackpressureInfo) -> BackpressureAction {
    let max_wait = qos.max_blocking_time;
    move |info: &BackpressureInfo| -> BackpressureAction {
        let found = lock(&subscribers).get(&info.receiver_port_id).copied();
        let theirs = found.map(|s| s.ad);
        let skip = !theirs.is_some_and(|s| s.is_waited_for_by(&qos))
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
}

impl Sender {
    /// Re-reads the subscriber list when it changed (or is old) and returns the route.
    pub(crate) fn route(&self) -> Route {
        let n = self.services.data.dynamic_config().number_of_subscribers();
        let now_ms = crate::clock::coarse_ms();
        let summary = &self.summary;
        if n != summary.count.load(Ordering::Acquire)
            || now_ms.saturating_sub(summary.read_at_ms.load(Ordering::Relaxed)) > PEER_REFRESH.as_millis() as u64
        {
            self.read_subscribers(n);
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

    /// Re-reads the subscriber list (of `n` subscribers when last counted).
    pub(super) fn read_subscribers(&self, n: usize) {
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
        // Whether each subscriber's pid answers here (`kill(pid, 0)`), asked
        // once per subscriber and refresh.
        let mut found: Vec<_> = found
            .into_iter()
            .map(|(id, ad, node)| (id, ad, node, is_own_node(node) || crate::clock::process_alive(ad.pid)))
            .collect();
        // Listing the host's nodes costs about 60 µs per node: only when a
        // subscriber in another process may be dead. One in this pid
        // namespace whose pid is alive is taken as alive (a reused pid
        // could mislead this, as it could `kill(pid, 0)` before iceoryx2's
        // monitoring); one whose pid is gone, or in another namespace, is
        // asked about through iceoryx2's node monitoring.
        let own_ns = crate::process::pid_namespace();
        let unsure = |ad: &SubscriberAd, node: u128, answers: bool| {
            !is_own_node(node) && (ad.pid_ns.is_none() || ad.pid_ns != own_ns || !answers)
        };
        if found.iter().any(|(_, ad, node, answers)| unsure(ad, *node, *answers)) {
            let dead = dead_nodes(self.node.inner.iox.config());
            found.retain(|(_, _, node, _)| !dead.contains(node));
        }
        let any_remote = found.iter().any(|&(_, _, node, _)| !is_own_node(node));
        let mut rings = Rings::default();
        let mut processes = BTreeSet::new();
        for (_, ad, node, _) in found.iter().filter(|(_, ad, _, _)| ad.wait == WaitMode::Block) {
            if is_own_node(*node) {
                rings.here = true;
            } else {
                processes.insert((ad.pid_ns, ad.pid));
            }
        }
        rings.peers = processes.into_iter().filter_map(|p| self.bell.peer(p)).collect();
        let subs: Subscribers =
            found.into_iter().map(|(id, ad, _, answers)| (id, Subscriber { ad, pid_here: answers })).collect();
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
        summary.read_at_ms.store(crate::clock::coarse_ms(), Ordering::Relaxed);
        summary.count.store(n, Ordering::Release);
        *lock(&self.subscribers) = subs;
        *lock(&self.rings) = rings;
    }

    /// The process ids of subscribers on `route` that take `kind`'s memory
    /// (they accept it, are on the pool's device and in this pid namespace;
    /// one entry per subscription), and how many do not.
    pub(super) fn readers(&self, route: Route, kind: BackendKind) -> (Vec<u32>, usize) {
        let split = |ads: &mut dyn Iterator<Item = SubscriberAd>| {
            let (yes, no): (Vec<_>, Vec<_>) = ads.partition(|ad| self.takes_pool_memory(ad, kind));
            (yes.iter().map(|ad| ad.pid).collect(), no.len())
        };
        match route {
            Route::Intra => self.local.with_subscribers(|subs| split(&mut subs.iter().map(|q| q.ad))),
            Route::Shm => split(&mut lock(&self.subscribers).values().map(|s| s.ad)),
            // Over DDS every subscription takes host memory.
            Route::Spill => (Vec::new(), lock(&self.subscribers).len()),
        }
    }

    /// Whether the backpressure handler discarded the sample for every
    /// subscriber, each known: then `send`'s count of recipients says exactly
    /// how many of them got it all the same, on iceoryx2's one last try after
    /// the handler's answer (none can have missed it unannounced, since the
    /// handler heard of each). With a single subscriber, that is which.
    pub(super) fn all_discarded(&self, handled: &[(Option<SubscriberAd>, bool)]) -> bool {
        let known = self.summary.count.load(Ordering::Acquire);
        !handled.is_empty()
            && handled.len() == known
            && handled.iter().all(|&(ad, waited_for)| ad.is_some() && !waited_for)
            && self.services.data.dynamic_config().number_of_subscribers() == known
    }

    /// Subscribers that missed a sample without the backpressure handler
    /// hearing of it.
    ///
    /// iceoryx2 calls the handler only for a subscriber whose side of the
    /// connection is attached. One that has not attached yet (its process is
    /// stopped, or it has not taken since this publisher appeared) has a queue
    /// that fills and then skips samples silently: `send` just counts one
    /// recipient fewer. The count is checked against the subscribers (re-read
    /// if their number changed, so that one that left during the send is not
    /// counted as missing).
    ///
    /// Such a subscriber cannot be told apart from the others: the frame is a
    /// suspect for the holds of its device buffers ([`super::unattached`]),
    /// and one the publisher does not wait for (best effort, keep last) that
    /// never attached counts as a miss of one it waits for when the topic has
    /// such subscribers too. A spurious `QueueFull` is preferred to a silent
    /// loss.
    pub(super) fn unannounced_misses(
        &self,
        recipients: usize,
        handled: &[(Option<SubscriberAd>, bool)],
    ) -> Unannounced {
        let known = self.summary.count.load(Ordering::Acquire);
        if recipients + handled.len() >= known {
            return Unannounced::default();
        }
        let n = self.services.data.dynamic_config().number_of_subscribers();
        if n != known {
            self.read_subscribers(n);
        }
        let subs = lock(&self.subscribers);
        let unexplained = subs.len().saturating_sub(recipients + handled.len());
        let waited_for = subs.values().filter(|s| s.ad.is_waited_for_by(&self.qos)).count();
        if unexplained == 0 || waited_for == 0 {
            return Unannounced { waited_for: 0, any: unexplained > 0 };
        }
        let unhandled = waited_for.saturating_sub(handled.iter().filter(|(_, w)| *w).count());
        Unannounced { waited_for: unexplained.min(unhandled), any: true }
    }
}
