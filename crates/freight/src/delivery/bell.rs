//! The process's bell: how a blocking wait learns that something came.
//!
//! Each process with endpoints keeps one iceoryx2 event service,
//! `freight-bell/<pid namespace>/<pid>`, and one listener of it. A publisher
//! in another process rings the bell of each process where a subscription
//! that blocks reads it (one notification per process, whatever the number
//! of its subscriptions and topics); a publisher of this process and a DDS
//! reader ring it in memory ([`Bell::ring_here`]).
//!
//! The threads that wait share the listener, as a leader and its followers:
//! the first to wait sleeps on the listener, the others on a condition
//! variable, and every ring makes each of them look at its own subscriptions
//! again. A single waiting thread (an executor, a `take`) sleeps on the
//! listener itself, so a wake-up from another process costs one hand-off,
//! as a listener per topic did. Where several threads wait, the leader that
//! wakes also wakes the followers, so that one of them listens next: two
//! threads of one process that block on each other's messages pay that
//! futex wake-up on every round trip (BENCHMARKS.md, "One wake-up per
//! process").
//!
//! Per endpoint this costs nothing. With a wake-up service per topic, a
//! subscription kept five descriptors for it (the service's two records,
//! its listener's port tag, event segment and socket) and a publisher three;
//! now a process keeps 12 for its bell, and about 5 for each other process
//! whose subscriptions it wakes ([`PeerBell`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use iceoryx2::port::listener::ListenerWaitError;
use iceoryx2::prelude::*;

use crate::error::{CreateError, ShmError};
use crate::process::{pid_namespace, Process};
use crate::sync::lock;
use crate::topic::Ipc;

type Listener = iceoryx2::port::listener::Listener<Ipc>;
type Notifier = iceoryx2::port::notifier::Notifier<Ipc>;

/// Processes of the host ringing one bell at once (each holds a notifier).
const MAX_RINGERS: usize = 1024;

/// This process's bell while an endpoint holds it.
static BELL: Mutex<Weak<Bell>> = Mutex::new(Weak::new());

/// This process's bell (see the module).
pub(crate) struct Bell {
    state: Mutex<State>,
    /// Where the followers sleep.
    rung: Condvar,
    listener: Listener,
    /// Wakes the leader from this process.
    own: Notifier,
    /// Other processes' bells that publishers of this process ring.
    peers: Mutex<HashMap<Process, Weak<PeerBell>>>,
    /// Whether a bell that could not be opened was said on stderr.
    said: AtomicBool,
    /// The bell's own node, which opens other processes' bells too; dropped last.
    node: iceoryx2::node::Node<Ipc>,
}

#[derive(Default)]
struct State {
    /// Whether a thread sleeps on the listener.
    leader: bool,
    /// Threads sleeping on the condition variable.
    followers: usize,
    /// Counts the rings heard: a waiter that saw it change since it looked at
    /// its subscriptions looks again instead of sleeping.
    rings: u64,
}

/// The kind of [`super::process_service`] a bell is.
const BELL_KIND: &str = "freight-bell";

impl Bell {
    /// This process's bell, opened if no endpoint holds it (`topic` names the
    /// endpoint in an error).
    pub(super) fn get(topic: &str) -> Result<Arc<Bell>, CreateError> {
        let mut current = lock(&BELL);
        if let Some(b) = current.upgrade() {
            return Ok(b);
        }
        let b = Arc::new(Bell::open(topic)?);
        *current = Arc::downgrade(&b);
        Ok(b)
    }

    fn open(topic: &str) -> Result<Bell, CreateError> {
        let node = NodeBuilder::new()
            .config(crate::local_plane::iceoryx2_config())
            .name(&NodeName::new("freight-bell").map_err(CreateError::shm(topic, "naming the wake-up node"))?)
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<Ipc>()
            .map_err(CreateError::shm(topic, "creating the wake-up node"))?;
        let name = super::process_service(BELL_KIND, (pid_namespace(), std::process::id()))
            .map_err(CreateError::shm(topic, "naming the wake-up service"))?;
        let service = node
            .service_builder(&name)
            .event()
            // The listener of a bell dropped a moment ago may not be gone yet.
            .max_listeners(2)
            .max_notifiers(MAX_RINGERS)
            .open_or_create()
            .map_err(CreateError::shm(topic, "opening the wake-up service"))?;
        // Other processes' notifiers are written into its slots, whose pages
        // a full `/dev/shm` would not give them (`SIGBUS`): allocated now.
        let config = service.dynamic_config() as *const _ as usize;
        super::reserve::allocate_file_at(config).map_err(|no| {
            let why = format!("/dev/shm is full ({} bytes to allocate)", no.needed);
            CreateError::shm(topic, "allocating the wake-up service")(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                why,
            ))
        })?;
        let listener =
            service.listener_builder().create().map_err(CreateError::shm(topic, "creating the wake-up listener"))?;
        let own =
            service.notifier_builder().create().map_err(CreateError::shm(topic, "creating the wake-up notifier"))?;
        Ok(Bell {
            state: Mutex::default(),
            rung: Condvar::new(),
            listener,
            own,
            peers: Mutex::default(),
            said: AtomicBool::new(false),
            node,
        })
    }

    /// Wakes this process's waiting threads: a thread of this process queued
    /// something for a subscription here. Costs a lock when nobody waits.
    pub(crate) fn ring_here(&self) {
        let mut s = lock(&self.state);
        s.rings = s.rings.wrapping_add(1);
        let (leader, followers) = (s.leader, s.followers);
        drop(s);
        if followers > 0 {
            self.rung.notify_all();
        }
        if leader {
            // A failed notification leaves the leader asleep until its
            // timeout; the data stays queued for its next look.
            let _ = self.own.notify();
        }
    }

    /// Waits until `ready` says yes or `timeout` passes; returns what `ready`
    /// said last. `ready` is asked again after every ring and signal.
    pub(crate) fn wait(&self, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<bool, ShmError> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = lock(&self.state).rings;
            if ready() {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut s = lock(&self.state);
            if s.rings != seen {
                continue;
            }
            if s.leader {
                s.followers += 1;
                let still = |s: &mut State| s.rings == seen && s.leader;
                let (mut s, _) = self.rung.wait_timeout_while(s, left, still).unwrap_or_else(|p| p.into_inner());
                s.followers -= 1;
                continue;
            }
            s.leader = true;
            drop(s);
            // A notification sent since `seen` is queued in the socket: the
            // wait returns at once.
            let woke = self.listener.timed_wait(|_| {}, left);
            let mut s = lock(&self.state);
            s.leader = false;
            s.rings = s.rings.wrapping_add(1);
            let followers = s.followers;
            drop(s);
            if followers > 0 {
                // One of them leads next, or all look again.
                self.rung.notify_all();
            }
            match woke {
                Ok(_) | Err(ListenerWaitError::InterruptSignal) => {}
                Err(e) => return Err(ShmError::doing("waiting for a wake-up")(e)),
            }
        }
    }

    /// The bell of `process`, opened if no publisher of this process holds
    /// it. One that cannot be opened is said on stderr once per bell: its
    /// subscriptions then see messages at their timeout.
    pub(super) fn peer(&self, process: Process) -> Option<Arc<PeerBell>> {
        let mut peers = lock(&self.peers);
        if let Some(p) = peers.get(&process).and_then(Weak::upgrade).filter(|p| !p.stale.load(Ordering::Acquire)) {
            return Some(p);
        }
        match super::notifier_of(&self.node, BELL_KIND, process) {
            Ok(notifier) => {
                let p = Arc::new(PeerBell { notifier, stale: AtomicBool::new(false) });
                peers.retain(|_, w| w.strong_count() > 0);
                peers.insert(process, Arc::downgrade(&p));
                Some(p)
            }
            Err(why) => {
                if !self.said.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "freight: cannot open the wake-up of process {} ({why}); its blocking subscriptions see \
                         messages from here at their timeout",
                        process.1
                    );
                }
                None
            }
        }
    }
}

/// Another process's bell, as this process's publishers ring it.
pub(super) struct PeerBell {
    notifier: Notifier,
    /// Nobody listened when it rang: the process made its bell anew (its
    /// endpoints all went and came back) or is gone.
    stale: AtomicBool,
}

impl PeerBell {
    /// Rings it; false when nobody listens (then it is opened anew at the
    /// next look at the subscribers).
    pub(super) fn ring(&self) -> bool {
        let heard = matches!(self.notifier.notify(), Ok(n) if n > 0);
        if !heard {
            self.stale.store(true, Ordering::Release);
        }
        heard
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn the_records_other_processes_write_into_are_allocated_whole() {
        use std::os::unix::fs::MetadataExt;
        let bell = Bell::get("/bell_records").unwrap();
        let name = super::super::process_service(BELL_KIND, (pid_namespace(), std::process::id())).unwrap();
        // The same records, as a publisher's process maps them.
        let service = bell.node.service_builder(&name).event().open().unwrap();
        let config = service.dynamic_config() as *const _ as usize;
        let entry = freight_backend::maps::find_own(config).unwrap().expect("the dynamic config is mapped");
        assert!(entry.shared && entry.path.starts_with("/dev/shm/"), "{entry:?}");
        let m = std::fs::metadata(&entry.path).unwrap();
        assert!(m.blocks() * 512 >= m.len(), "{} is not allocated whole", entry.path);
    }

    /// Threads waiting for different things share the listener: each
    /// returns when its own thing comes, whichever of them leads, and one
    /// whose thing never comes returns at its timeout.
    #[test]
    fn each_waiting_thread_returns_when_its_own_message_comes() {
        const WAITERS: usize = 4;
        let bell = Bell::get("/bell_waiters").unwrap();
        let came: Arc<[AtomicBool; WAITERS]> = Arc::new(Default::default());
        let waiting = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..WAITERS)
            .map(|i| {
                let (bell, came, waiting) = (bell.clone(), came.clone(), waiting.clone());
                std::thread::spawn(move || {
                    waiting.fetch_add(1, Ordering::SeqCst);
                    let start = Instant::now();
                    let got = bell.wait(Duration::from_secs(20), || came[i].load(Ordering::SeqCst)).unwrap();
                    (got, start.elapsed())
                })
            })
            .collect();
        while waiting.load(Ordering::SeqCst) < WAITERS {
            std::thread::yield_now();
        }
        // Let them all go to sleep, then wake them one at a time, the
        // leader (most likely the first) last.
        std::thread::sleep(Duration::from_millis(50));
        for i in (0..WAITERS).rev() {
            came[i].store(true, Ordering::SeqCst);
            bell.ring_here();
            std::thread::sleep(Duration::from_millis(10));
        }
        for t in threads {
            let (got, took) = t.join().unwrap();
            assert!(got && took < Duration::from_secs(10), "woke {got} after {took:?}");
        }
        let start = Instant::now();
        assert!(!bell.wait(Duration::from_millis(30), || false).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
