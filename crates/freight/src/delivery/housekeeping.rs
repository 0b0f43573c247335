//! Threads that look after senders between publishes, one of each per
//! process: the latch thread hands transient-local history to late joiners
//! of idle publishers, the reaper gives back device holds of dead readers.

use std::sync::atomic::Ordering;

use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;

use super::Sender;

impl Sender {
    fn hand_out_history(&self) {
        let n = self.services.data.dynamic_config().number_of_subscribers();
        if self.latched_subscribers.swap(n, Ordering::Relaxed) != n {
            // Failures here leave the late joiner without history until the
            // next publish, which retries; nothing to report to anyone.
            let _ = self.iox.update_connections();
            self.ring_readers();
        }
    }
}

/// Hands transient-local history to late subscribers of idle publishers.
///
/// iceoryx2 delivers a publisher's history when the publisher updates its
/// connections, which it does on its next send; a latched topic (a map, a
/// robot description) may never send again. One thread per process looks at
/// such publishers every 20 ms and updates them when their subscribers change.
pub(super) mod latch {
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::Duration;

    use crate::delivery::Sender;
    use crate::sync::lock;

    fn publishers() -> &'static Mutex<Vec<Weak<Sender>>> {
        static P: OnceLock<Mutex<Vec<Weak<Sender>>>> = OnceLock::new();
        P.get_or_init(|| {
            std::thread::Builder::new()
                .name("freight-latch".into())
                .spawn(|| loop {
                    std::thread::sleep(Duration::from_millis(20));
                    let live: Vec<Arc<Sender>> = {
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

    pub(in crate::delivery) fn register(p: &Arc<Sender>) {
        lock(publishers()).push(Arc::downgrade(p));
    }
}

/// Gives back the holds of device-pool readers that died, and those of
/// readers that missed a frame unannounced ([`super::unattached`]).
///
/// A reader that dies holding blocks of a pool (imported, or handed to it
/// and never taken) keeps them until the pool's creator notices. One thread
/// per process looks at every pool a publisher lends from, every
/// [`REAP_PERIOD`](reaper::REAP_PERIOD), so such blocks come back within a
/// second, whether or not the publisher is publishing, and without a
/// publish ever waiting for it. It settles each publisher's suspect frames
/// at the same pace, and those of a dropped publisher until none is left.
pub(crate) mod reaper {
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::Duration;

    use freight_backend::Backend;

    use crate::delivery::unattached::Unattached;
    use crate::delivery::Sender;
    use crate::sync::lock;

    /// How often the pools are looked at.
    pub(crate) const REAP_PERIOD: Duration = Duration::from_millis(200);

    /// What the thread looks after.
    #[derive(Default)]
    struct Watched {
        pools: Vec<Weak<dyn Backend>>,
        publishers: Vec<(Weak<Sender>, Arc<Unattached>)>,
    }

    fn watched() -> &'static Mutex<Watched> {
        static W: OnceLock<Mutex<Watched>> = OnceLock::new();
        W.get_or_init(|| {
            std::thread::Builder::new()
                .name("freight-reaper".into())
                .spawn(|| loop {
                    std::thread::sleep(REAP_PERIOD);
                    let (pools, publishers) = {
                        let mut w = lock(watched());
                        w.pools.retain(|p| p.strong_count() > 0);
                        w.publishers.retain(|(s, u)| s.strong_count() > 0 || u.is_pending());
                        let pools: Vec<_> = w.pools.iter().filter_map(Weak::upgrade).collect();
                        (pools, w.publishers.clone())
                    };
                    for pool in pools {
                        pool.reclaim_dead_readers();
                    }
                    for (sender, unattached) in publishers {
                        let taking = sender.upgrade().map(|s| s.pool_readers());
                        unattached.settle(taking.as_deref());
                    }
                })
                .expect("spawning the freight-reaper thread");
            Mutex::default()
        })
    }

    /// Looks after `pool` from now on, as long as it exists.
    pub(crate) fn watch(pool: &Arc<dyn Backend>) {
        let mut w = lock(watched());
        if !w.pools.iter().any(|p| std::ptr::addr_eq(p.as_ptr(), Arc::as_ptr(pool))) {
            w.pools.push(Arc::downgrade(pool));
        }
    }

    /// Settles the suspect frames of `sender` from now on, also after it is
    /// dropped, until none is left.
    pub(in crate::delivery) fn tend(sender: &Arc<Sender>, unattached: &Arc<Unattached>) {
        lock(watched()).publishers.push((Arc::downgrade(sender), unattached.clone()));
    }
}
