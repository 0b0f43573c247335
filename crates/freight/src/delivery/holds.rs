//! Device holds: which readers a device buffer is lent to, the holds a
//! failed publish gives back, and the host copy for readers that cannot take
//! device memory.
//!
//! A device pool (`cuda`, `fake-device`) keeps each block until every reader
//! process it was exported to has let go of it (a "hold" per reader). Holds
//! are named at export, given back by the reader on drop, by the publisher
//! for readers a frame never reached, or by the reaper for readers that died
//! and for those that missed a frame unannounced ([`super::unattached`]).

use std::mem::MaybeUninit;
use std::sync::Arc;

use freight_backend::{Backend, Descriptor, FrameSlot, HeapFrame};
use freight_msg::BackendKind;

use super::readers::{Subscriber, Subscribers};
use super::{Route, Sender};
use crate::endpoint::{DeviceTag, SubscriberAd};
use crate::error::PublishError;
use crate::frame::Entry;
use crate::negotiation::takes_device_memory;
use crate::sync::lock;

/// The device-pool holds that one publish recorded at export, given back to
/// the pool when the publish fails before its frame is sent: nobody will
/// import them. A hold already given back (the publisher's own, by its host
/// copy) is refused by the pool, which is fine.
pub(crate) struct Holds<'a> {
    pub(crate) pool: Option<&'a dyn Backend>,
    pub(crate) exported: Vec<(Descriptor, Vec<u32>)>,
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

impl Sender {
    /// The device readers a loan named, less the subscriptions that left since
    /// (their processes may live on, so nobody else would give their holds
    /// back). One that joined since gets a host copy if one is made.
    pub(crate) fn still_reading(&self, route: Route, at_loan: Vec<u32>) -> Vec<u32> {
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

    /// The processes of the subscriptions in shared memory that take this
    /// publisher's device memory, as last read (one entry per subscription).
    pub(super) fn pool_readers(&self) -> Vec<u32> {
        let Some(pool) = &self.pool else { return Vec::new() };
        self.readers(Route::Shm, pool.kind()).0
    }

    /// Who a loan's device buffers are for: the process ids of the
    /// subscriptions that take the pool's memory, and how many take host
    /// bytes. A reader process that holds more than its share of the pool (a
    /// fair part of its capacity, with one part kept for the others) gets host
    /// copies until it gives blocks back: a subscription that never takes
    /// must not exhaust the pool for everyone.
    pub(crate) fn lend_to(&self, route: Route) -> (Vec<u32>, usize) {
        let Some(pool) = &self.pool else { return (Vec::new(), 0) };
        let (mut device, mut host) = self.readers(route, pool.kind());
        if device.is_empty() {
            return (device, host);
        }
        let mut processes = device.clone();
        processes.sort_unstable();
        processes.dedup();
        let share = pool.max_block_len() / (processes.len() + 1);
        let over: Vec<(u32, usize)> =
            processes.into_iter().map(|pid| (pid, pool.held_for(pid))).filter(|&(_, held)| held > share).collect();
        if !over.is_empty() {
            self.note_over_share(&over, share, pool.kind());
            let over: Vec<u32> = over.into_iter().map(|(pid, _)| pid).collect();
            let before = device.len();
            device.retain(|pid| !over.contains(pid));
            host += before - device.len();
        }
        (device, host)
    }

    /// Says once on stderr, per reader process, that it holds more than its
    /// share of the pool and so gets host copies: a reader that keeps its
    /// samples (or one that fell behind) otherwise only looks slower.
    fn note_over_share(&self, over: &[(u32, usize)], share: usize, kind: BackendKind) {
        let mut noted = lock(&self.over_share);
        for &(pid, held) in over {
            if noted.insert(pid) {
                eprintln!(
                    "freight: publisher on {}: process {pid} holds {} MiB of this publisher's {kind} pool, more than \
                     its share ({} MiB): its subscriptions receive host copies until it gives blocks back (drops \
                     samples)",
                    self.topic,
                    held >> 20,
                    share >> 20,
                );
            }
        }
    }

    /// Whether the subscription of `ad` takes this publisher's device memory
    /// of `kind` as is: it accepts `kind`, is on the pool's device, and its
    /// process is in this pid namespace (the pool keeps holds per pid, which
    /// name another process in another namespace; such a subscription gets
    /// the host copy).
    pub(super) fn takes_pool_memory(&self, ad: &SubscriberAd, kind: BackendKind) -> bool {
        let same_pids = ad.pid_ns.is_some() && ad.pid_ns == crate::process::pid_namespace();
        same_pids && takes_device_memory(kind, ad.accepts, ad.devices.get(kind) == self.device_tag)
    }

    /// Says once on stderr, per subscription, that one accepts the pool's
    /// backend but is on another device, so it gets host copies.
    pub(super) fn note_other_devices(&self, subs: &Subscribers) {
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

    /// Gives back the device-memory holds of a subscriber that will never see
    /// this frame: its queue in this process was full, or the publisher failed
    /// the send for it after waiting.
    pub(super) fn release_for(&self, ad: &SubscriberAd, device: &[Entry]) {
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

    /// Copies a device block to the host region `slot` of the frame, once, for
    /// every subscriber that cannot take device memory; returns its descriptor.
    pub(crate) fn host_copy(
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
}
