//! Threads that look after senders between publishes, one of each per
//! process: the senders thread hands transient-local history to late joiners
//! of idle publishers and keeps every sender's view of its readers fresh;
//! the reaper gives back device holds of dead readers.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;

use super::Sender;

impl Sender {
    /// Re-reads the subscriber list; `dead` caches the host's dead iceoryx2
    /// nodes, listed once for every sender of a sweep.
    fn refresh_readers(&self, dead: &mut Option<HashSet<u128>>) {
        let n = self.services.data.dynamic_config().number_of_subscribers();
        self.read_subscribers(n, dead);
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
}

/// How often every sender re-reads its subscriber list, even when their
/// count did not change (one left and another joined, one died).
pub(crate) const READERS_REFRESH: Duration = Duration::from_millis(100);

/// How often latched senders are looked at.
const LATCH_PERIOD: Duration = Duration::from_millis(20);

/// Looks after every sender of the process from one thread:
///
/// * **History for late joiners.** iceoryx2 delivers a publisher's history
///   when the publisher updates its connections, which it does on its next
///   send; a latched topic (a map, a robot description) may never send
///   again. Transient-local senders are looked at every [`LATCH_PERIOD`] and
///   updated when their subscribers change.
/// * **Readers.** Every [`READERS_REFRESH`], each sender re-reads its
///   subscriber list, with the host's dead nodes listed once for all of them,
///   so that no publish pays for a refresh whose count did not change.
pub(super) mod senders {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::Instant;

    use super::{LATCH_PERIOD, READERS_REFRESH};
    use crate::delivery::Sender;
    use crate::qos::Durability;
    use crate::sync::lock;

    fn registry() -> &'static Mutex<Vec<Weak<Sender>>> {
        static S: OnceLock<Mutex<Vec<Weak<Sender>>>> = OnceLock::new();
        S.get_or_init(|| {
            std::thread::Builder::new()
                .name("freight-senders".into())
                .spawn(look_after_senders)
                .expect("spawning the freight-senders thread");
            Mutex::default()
        })
    }

    fn look_after_senders() {
        let mut refreshed = Instant::now();
        let mut any_latched = false;
        loop {
            // Without latched senders, nothing is due before the next refresh.
            std::thread::sleep(if any_latched { LATCH_PERIOD } else { READERS_REFRESH });
            let live: Vec<Arc<Sender>> = {
                let mut s = lock(registry());
                s.retain(|w| w.strong_count() > 0);
                s.iter().filter_map(Weak::upgrade).collect()
            };
            any_latched = false;
            for s in live.iter().filter(|s| s.qos.durability == Durability::TransientLocal) {
                any_latched = true;
                s.hand_out_history();
            }
            if refreshed.elapsed() >= READERS_REFRESH {
                refreshed = Instant::now();
                let mut dead: Option<HashSet<u128>> = None;
                for s in &live {
                    s.refresh_readers(&mut dead);
                }
            }
        }
    }

    pub(in crate::delivery) fn register(s: &Arc<Sender>) {
        lock(registry()).push(Arc::downgrade(s));
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
