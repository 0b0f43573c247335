//! A publisher's farewell: what it sent stays with its subscriptions after it
//! goes.
//!
//! A sample a publisher sent waits in the subscriber's queue, in the
//! publisher's data segment. The subscriber attaches to the connection and
//! maps the segment only when it receives; iceoryx2 keeps a departed
//! publisher's samples for a subscriber that did, and removes them with the
//! publisher's port for one that did not. A DDS reader keeps what reached its
//! history after the writer is deleted: a stock rclpy node (Fast DDS
//! defaults) that publishes and ends half a second later loses nothing to a
//! subscriber that never looked meanwhile.
//!
//! So a publisher that sent through shared memory says farewell before its
//! port goes. Each process with endpoints keeps a *mailbox*, an iceoryx2
//! event service named after its pid namespace and pid, listened to by a
//! thread of its own ([`Mailbox`]). The publisher notifies the mailbox of
//! each of its subscribers' processes with the [`mailbox_id`] of each
//! subscription there (a *request*). That thread receives what is queued for
//! those subscriptions into their own queue ([`Receiver::keep_queued`]), so
//! that they hold it, and then tells the mailboxes of the topic's publishers
//! (an *answer*, the same id above [`IDS`]). The publisher waits for the
//! answers at most [`FAREWELL_WAIT`], as Cyclone DDS bounds a deleted
//! writer's wait for acknowledgements (`WriterLingerDuration`): a stopped
//! subscriber process makes the first of its publishers' drops that much
//! slower (see [`say`]), and what it had not received is lost, as with DDS.
//!
//! Notifiers to other processes' mailboxes are kept ([`MAX_PEERS`] of them),
//! so that a farewell costs a few notifications, not the opening of services.
//! A publisher process that is killed says no farewell: what its
//! subscriptions had not received goes with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

use super::{Receiver, Sender};
use crate::endpoint::{PublisherAd, SubscriberAd};
use crate::process::{pid_namespace, Process};
use crate::sync::lock;
use crate::topic::Ipc;

/// The longest a dropped publisher waits for its subscribers' processes.
pub(crate) const FAREWELL_WAIT: Duration = Duration::from_millis(500);

/// Requests are subscription ids below this (see [`mailbox_id`]), answers the
/// same ids plus this: a listener keeps a bit per id for each notifier.
const IDS: usize = 4096;

/// The id that stops the mailbox thread, above every request and answer.
const STOP: usize = 2 * IDS;

/// Processes of the host notifying one mailbox at once.
const MAX_SENDERS: usize = 128;

/// Notifiers to other processes' mailboxes a process keeps: each holds
/// about six descriptors (the service's files and mappings, the port's
/// socket), where opening one anew costs about a millisecond.
const MAX_PEERS: usize = 8;

/// How long a process that let a farewell's wait pass is not waited for.
const UNANSWERED_FOR: Duration = Duration::from_secs(10);

/// The mailbox id of the subscriber port `port`: ports of one process that
/// share it are all emptied when either is asked for, which is harmless.
pub(super) fn mailbox_id(port: u128) -> usize {
    let folded = (port as u64) ^ ((port >> 64) as u64);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
}

/// The kind of [`super::process_service`] a mailbox is.
const MAILBOX_KIND: &str = "freight-mailbox";

/// This process's mailbox: the thread that listens, and what it shares with
/// the publishers saying farewell. Every endpoint holds it, so it goes with
/// the last one (its node's files with it), not at exit, where nothing would
/// remove them.
pub(crate) struct Mailbox {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    post: Arc<PostOffice>,
}

/// What the mailbox thread and the publishers of the process share.
struct PostOffice {
    own: Process,
    /// Notifiers to mailboxes, this process's own among them.
    peers: Mutex<BTreeMap<Process, iceoryx2::port::notifier::Notifier<Ipc>>>,
    /// One farewell at a time: answers name a subscription, not a publisher.
    saying: Mutex<()>,
    /// The answers that came since the farewell began.
    answers: Mutex<BTreeSet<usize>>,
    answered: Condvar,
    /// Processes that let a farewell's wait pass, and when.
    late: Mutex<BTreeMap<Process, Instant>>,
    /// The mailbox's own node, which opens other processes' mailboxes too;
    /// dropped last.
    node: iceoryx2::node::Node<Ipc>,
}

/// The mailbox while an endpoint holds it; locked while one is made or goes,
/// so that two never listen at once.
static MAILBOX: Mutex<Weak<Mailbox>> = Mutex::new(Weak::new());

/// This process's subscriptions, for the mailbox thread to find by id.
static RECEIVERS: Mutex<Vec<Weak<Receiver>>> = Mutex::new(Vec::new());

/// Held by the mailbox thread while it holds subscriptions, and taken by
/// the process's exit (`atexit`), which marks it `true`: a process that
/// ended while the thread held the last reference to a subscription would
/// end without dropping it, and so without removing its files (a device
/// pool's, seen in the soak). The exit waits for the thread to let go, and
/// the thread holds none after.
static HOLDING: Mutex<bool> = Mutex::new(false);

extern "C" fn at_exit() {
    use std::sync::TryLockError;
    // A child forked while the thread held the lock inherits it held, and
    // no thread to let go: it waits a bounded time, then ends all the same.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut exiting = loop {
        match HOLDING.try_lock() {
            Ok(held) => break held,
            Err(TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(TryLockError::WouldBlock) => return,
        }
    };
    *exiting = true;
}

/// This process's mailbox, opened (and its thread started) if no endpoint
/// holds it. A subscription takes it before its port exists, so that no
/// publisher it could receive from finds the mailbox missing. One that
/// cannot be made is said on stderr once: subscriptions then keep only what
/// they received before a publisher went, and publishers say no farewell.
pub(super) fn mailbox() -> Option<Arc<Mailbox>> {
    let mut current = lock(&MAILBOX);
    if let Some(m) = current.upgrade() {
        return Some(m);
    }
    match Mailbox::open() {
        Ok(m) => {
            let m = Arc::new(m);
            *current = Arc::downgrade(&m);
            Some(m)
        }
        Err(why) => {
            static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
            SAID.get_or_init(|| {
                eprintln!(
                    "freight: cannot open this process's mailbox ({why}); a message a subscription in it has not \
                     taken when its publisher goes is lost"
                )
            });
            None
        }
    }
}

impl Mailbox {
    fn open() -> Result<Mailbox, String> {
        let node = NodeBuilder::new()
            .config(crate::local_plane::iceoryx2_config())
            .name(&NodeName::new("freight-mailbox").map_err(|e| format!("{e:?}"))?)
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<Ipc>()
            .map_err(|e| format!("creating its node: {e:?}"))?;
        let own = (pid_namespace(), std::process::id());
        let service = node
            .service_builder(
                &super::process_service(MAILBOX_KIND, own).map_err(|e| format!("naming its service: {e:?}"))?,
            )
            .event()
            // The thread of a mailbox dropped on it may still listen.
            .max_listeners(2)
            .max_notifiers(MAX_SENDERS)
            .event_id_max_value(STOP)
            .open_or_create()
            .map_err(|e| format!("creating its service: {e:?}"))?;
        let listener = service.listener_builder().create().map_err(|e| format!("creating its listener: {e:?}"))?;
        static AT_EXIT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
        AT_EXIT.get_or_init(|| {
            // SAFETY: `at_exit` cannot unwind (it only tries a lock, which
            // it recovers from poisoning, and sleeps); registering it has no
            // other precondition. If it cannot be registered, the thread's
            // rare hold at exit stays.
            unsafe { libc::atexit(at_exit) };
        });
        let post = Arc::new(PostOffice {
            own,
            peers: Mutex::default(),
            saying: Mutex::new(()),
            answers: Mutex::default(),
            answered: Condvar::new(),
            late: Mutex::default(),
            node,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (stopped, thread_post) = (stop.clone(), post.clone());
        let thread = std::thread::Builder::new()
            .name("freight-mailbox".into())
            .spawn(move || {
                let mut ids = BTreeSet::new();
                // The flag is looked at every second too: a stop whose
                // notification failed still ends the thread.
                while !stopped.load(Ordering::Acquire) {
                    let woke = listener.timed_wait(
                        |a| {
                            ids.insert(a.id.as_value());
                        },
                        Duration::from_secs(1),
                    );
                    if let Err(e) = woke {
                        if e != iceoryx2::port::listener::ListenerWaitError::InterruptSignal {
                            eprintln!("freight: this process's mailbox failed ({e:?}); it reads no more farewells");
                            return;
                        }
                    }
                    let mut requests = BTreeSet::new();
                    let mut answers = Vec::new();
                    for id in std::mem::take(&mut ids) {
                        match id {
                            id if id < IDS => {
                                requests.insert(id);
                            }
                            id if id < STOP => answers.push(id - IDS),
                            _ => {}
                        }
                    }
                    if !answers.is_empty() {
                        lock(&thread_post.answers).extend(answers);
                        thread_post.answered.notify_all();
                    }
                    let exiting = lock(&HOLDING);
                    if !requests.is_empty() && !*exiting {
                        keep_for(&thread_post, &requests);
                    }
                }
            })
            .map_err(|e| format!("starting its thread: {e}"))?;
        Ok(Mailbox { thread: Some(thread), stop, post })
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let _one_at_a_time = lock(&MAILBOX);
        self.stop.store(true, Ordering::Release);
        self.post.notify(self.post.own, STOP);
        if let Some(t) = self.thread.take() {
            // The thread itself may drop the last subscription: it ends on
            // its own once that look is done.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl PostOffice {
    /// Notifies `process`'s mailbox of `id`; false when it has none, or
    /// nobody listens (its mailbox thread failed or it died).
    fn notify(&self, process: Process, id: usize) -> bool {
        let mut peers = lock(&self.peers);
        if let Some(n) = peers.get(&process) {
            if matches!(n.notify_with_custom_event_id(EventId::new(id)), Ok(k) if k > 0) {
                return true;
            }
            // A mailbox made anew since (the process's endpoints all went
            // and came back), or gone: open it again.
            peers.remove(&process);
        }
        let Ok(notifier) = super::notifier_of(&self.node, MAILBOX_KIND, process) else { return false };
        let heard = matches!(notifier.notify_with_custom_event_id(EventId::new(id)), Ok(k) if k > 0);
        if heard {
            if peers.len() >= MAX_PEERS {
                let here = pid_namespace();
                peers.retain(|&(pid_ns, pid), _| pid_ns != here || crate::clock::process_alive(pid));
            }
            if peers.len() >= MAX_PEERS {
                // The lowest pid goes: as good a guess as any.
                peers.pop_first();
            }
            peers.insert(process, notifier);
        }
        heard
    }

    /// Whether `process` let a farewell's wait pass within [`UNANSWERED_FOR`].
    fn is_late(&self, process: Process) -> bool {
        let mut late = lock(&self.late);
        late.retain(|_, at| at.elapsed() < UNANSWERED_FOR);
        late.contains_key(&process)
    }
}

/// Makes `r` one of the subscriptions the mailbox looks after.
pub(super) fn register(r: &Arc<Receiver>) {
    let mut all = lock(&RECEIVERS);
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(r));
}

/// On the mailbox thread: keeps what is queued for the subscriptions of
/// `ids`, then answers the processes of their topics' publishers (the one
/// saying farewell among them; the others let the answer pass).
fn keep_for(post: &PostOffice, ids: &BTreeSet<usize>) {
    let asked: Vec<Arc<Receiver>> =
        lock(&RECEIVERS).iter().filter_map(Weak::upgrade).filter(|r| ids.contains(&mailbox_id(r.port_id()))).collect();
    for r in &asked {
        r.keep_queued();
    }
    let mut answers = BTreeSet::new();
    for r in &asked {
        let id = IDS + mailbox_id(r.port_id());
        r.services.data.dynamic_config().list_publishers(|p| {
            if let Some(ad) = PublisherAd::decode(p.publisher_name.as_str()) {
                answers.insert(((ad.pid_ns, ad.pid), id));
            }
            CallbackProgression::Continue
        });
    }
    // Let go of the subscriptions before the slower part.
    drop(asked);
    for (process, id) in answers {
        // One that fails leaves that publisher waiting until FAREWELL_WAIT.
        post.notify(process, id);
    }
}

/// Says `s`'s farewell to the processes of its subscribers and waits until
/// each holds what it sent, or [`FAREWELL_WAIT`] passes.
///
/// The processes are asked in rounds whose ids differ (nearly always one
/// round), since an answer names only the id. A process that let the wait
/// pass (stopped, say) is still told, but not waited for again for
/// [`UNANSWERED_FOR`]: a stopped subscriber of a process's many publishers
/// costs its exit one wait, not one per publisher.
pub(super) fn say(s: &Sender, mailbox: &Mailbox) {
    let post = &mailbox.post;
    let here = pid_namespace();
    let mut processes: BTreeMap<Process, BTreeSet<usize>> = BTreeMap::new();
    s.services.data.dynamic_config().list_subscribers(|d| {
        // A dead process answers no one; one in another pid namespace is
        // asked all the same (its pid says nothing here).
        let gone = |ad: &SubscriberAd| ad.pid_ns == here && !crate::clock::process_alive(ad.pid);
        if let Some(ad) = SubscriberAd::decode(d.subscriber_name.as_str()).filter(|ad| !gone(ad)) {
            processes.entry((ad.pid_ns, ad.pid)).or_default().insert(mailbox_id(d.subscriber_id.value()));
        }
        CallbackProgression::Continue
    });
    if processes.is_empty() {
        return;
    }
    let mut rounds: Vec<Vec<(Process, BTreeSet<usize>)>> = Vec::new();
    for (process, ids) in processes {
        let fits = |round: &Vec<(Process, BTreeSet<usize>)>| round.iter().all(|(_, other)| other.is_disjoint(&ids));
        match rounds.iter_mut().find(|r| fits(r)) {
            Some(round) => round.push((process, ids)),
            None => rounds.push(vec![(process, ids)]),
        }
    }
    let _one_at_a_time = lock(&post.saying);
    for round in rounds {
        // Answers that came before this round's requests are not for it.
        lock(&post.answers).clear();
        // The ids not answered yet, each with its process.
        let mut waiting: BTreeMap<usize, Process> = BTreeMap::new();
        for (process, ids) in round {
            // Every id is told, also after one failed.
            let failed = ids.iter().filter(|&&id| !post.notify(process, id)).count();
            if failed == 0 && !post.is_late(process) {
                waiting.extend(ids.into_iter().map(|id| (id, process)));
            }
        }
        let deadline = Instant::now() + FAREWELL_WAIT;
        let mut answers = lock(&post.answers);
        loop {
            waiting.retain(|id, _| !answers.contains(id));
            let left = deadline.saturating_duration_since(Instant::now());
            if waiting.is_empty() {
                break;
            }
            if left.is_zero() {
                let mut late = lock(&post.late);
                late.extend(waiting.values().map(|&p| (p, Instant::now())));
                break;
            }
            answers = post.answered.wait_timeout(answers, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}
