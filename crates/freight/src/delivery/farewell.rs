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
//! port goes. Each process with subscriptions keeps a *mailbox*, an iceoryx2
//! event service named after its pid namespace and pid, listened to by a
//! thread of its own ([`Mailbox`]). The publisher notifies the mailbox of
//! each of its subscribers' processes with the [`mailbox_id`] of each
//! subscription there. That thread receives what is queued for those
//! subscriptions into their own queue ([`Receiver::keep_queued`]), so that
//! they hold it, and answers on the publisher's farewell service, made for
//! the occasion. The publisher waits for the answers at most
//! [`FAREWELL_WAIT`], as Cyclone DDS bounds a deleted writer's wait for
//! acknowledgements (`WriterLingerDuration`): a stopped subscriber process
//! makes the first of its publishers' drops that much slower (see [`say`]),
//! and what it had not received is lost, as with DDS.
//!
//! A publisher process that is killed says no farewell: what its
//! subscriptions had not received goes with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

use super::{Receiver, Sender};
use crate::endpoint::SubscriberAd;
use crate::process::pid_namespace;
use crate::sync::lock;
use crate::topic::{EventService, Ipc};

/// The longest a dropped publisher waits for its subscribers' processes.
pub(crate) const FAREWELL_WAIT: Duration = Duration::from_millis(500);

/// Mailbox events are subscription ids below this (see [`mailbox_id`]): a
/// listener keeps a bit per id for each notifier.
const IDS: usize = 4096;

/// Publishers of any process saying farewell to one process at once.
const MAX_SENDERS: usize = 64;

/// The mailbox id of the subscriber port `port`: ports of one process that
/// share it are all emptied when either is asked for, which is harmless.
pub(super) fn mailbox_id(port: u128) -> usize {
    let folded = (port as u64) ^ ((port >> 64) as u64);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
}

fn mailbox_name(pid_ns: Option<u32>, pid: u32) -> Result<ServiceName, String> {
    let name = format!("freight-mailbox/{:x}/{pid}", pid_ns.unwrap_or(0));
    ServiceName::new(&name).map_err(|e| format!("{name}: {e:?}"))
}

fn farewell_name(publisher_port: u128) -> Result<ServiceName, String> {
    let name = format!("freight-farewell/{publisher_port:032x}");
    ServiceName::new(&name).map_err(|e| format!("{name}: {e:?}"))
}

/// This process's subscriptions, for the mailbox thread to find by id.
fn receivers() -> &'static Mutex<Vec<Weak<Receiver>>> {
    static R: OnceLock<Mutex<Vec<Weak<Receiver>>>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The mailbox while a subscription holds it; locked while one is made or
/// goes, so that two never listen at once.
static MAILBOX: Mutex<Weak<Mailbox>> = Mutex::new(Weak::new());

/// The id that stops the mailbox thread, above every [`mailbox_id`].
const STOP: usize = IDS;

/// This process's mailbox: its node, its service, and the thread that
/// listens. Every subscription holds it, so it goes with the last one (its
/// node's files with it), not at exit, where nothing would remove them.
pub(crate) struct Mailbox {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    service: EventService,
    _node: iceoryx2::node::Node<Ipc>,
}

/// This process's mailbox, opened (and its thread started) if no
/// subscription holds it. A subscription takes it before its port exists,
/// so that no publisher it could receive from finds the mailbox missing. One
/// that cannot be made is said on stderr once: subscriptions then keep only
/// what they received before a publisher went.
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
            static SAID: OnceLock<()> = OnceLock::new();
            SAID.get_or_init(|| {
                eprintln!(
                    "freight: cannot open this process's mailbox ({why}); a message its subscriptions have not \
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
        let service = node
            .service_builder(&mailbox_name(pid_namespace(), std::process::id())?)
            .event()
            // The thread of a mailbox dropped on it may still listen.
            .max_listeners(2)
            .max_notifiers(MAX_SENDERS)
            .event_id_max_value(STOP)
            .open_or_create()
            .map_err(|e| format!("creating its service: {e:?}"))?;
        let listener = service.listener_builder().create().map_err(|e| format!("creating its listener: {e:?}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
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
                    ids.remove(&STOP);
                    if !ids.is_empty() {
                        keep_for(&std::mem::take(&mut ids));
                    }
                }
            })
            .map_err(|e| format!("starting its thread: {e}"))?;
        Ok(Mailbox { thread: Some(thread), stop, service, _node: node })
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let _one_at_a_time = lock(&MAILBOX);
        self.stop.store(true, Ordering::Release);
        if let Ok(n) = self.service.notifier_builder().create() {
            let _ = n.notify_with_custom_event_id(EventId::new(STOP));
        }
        if let Some(t) = self.thread.take() {
            // The thread itself may drop the last subscription: it ends on
            // its own once that look is done.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// Makes `r` one of the subscriptions the mailbox looks after.
pub(super) fn register(r: &Arc<Receiver>) {
    let mut all = lock(receivers());
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(r));
}

/// On the mailbox thread: keeps what is queued for the subscriptions of
/// `ids`, then answers every publisher of their topics that is saying
/// farewell.
fn keep_for(ids: &BTreeSet<usize>) {
    let asked: Vec<Arc<Receiver>> =
        lock(receivers()).iter().filter_map(Weak::upgrade).filter(|r| ids.contains(&mailbox_id(r.port_id()))).collect();
    for r in &asked {
        r.keep_queued();
    }
    for r in &asked {
        let mut publishers = Vec::new();
        r.services.data.dynamic_config().list_publishers(|p| {
            publishers.push(p.publisher_id.value());
            CallbackProgression::Continue
        });
        let id = EventId::new(mailbox_id(r.port_id()));
        for p in publishers {
            // Only a publisher saying farewell has the service; the others
            // fail to open, which costs a look at one file. An answer that
            // fails leaves that publisher waiting until FAREWELL_WAIT.
            let _ = answer(r, p, id);
        }
    }
}

/// Tells publisher `port` of `r`'s topic, if it is saying farewell, that
/// the subscriptions of `id` hold what it sent.
fn answer(r: &Receiver, port: u128, id: EventId) -> Option<usize> {
    let service = r.node.inner.iox.service_builder(&farewell_name(port).ok()?).event().open().ok()?;
    service.notifier_builder().create().ok()?.notify_with_custom_event_id(id).ok()
}

/// A subscriber's process: its pid namespace (if known) and pid.
type Process = (Option<u32>, u32);

/// Says `s`'s farewell to the processes of its subscribers and waits until
/// each holds what it sent, or [`FAREWELL_WAIT`] passes.
///
/// Answers name a subscription's mailbox id, not its process: the processes
/// are asked in rounds whose ids differ (nearly always one round). A process
/// that let the wait pass (stopped, say) is still told, but not waited for
/// again for [`UNANSWERED_FOR`]: a stopped subscriber of a process's many
/// publishers costs its exit one wait, not one per publisher.
pub(super) fn say(s: &Sender) {
    let node = &s.node.inner.iox;
    let mut processes: BTreeMap<Process, BTreeSet<usize>> = BTreeMap::new();
    s.services.data.dynamic_config().list_subscribers(|d| {
        // A dead process answers no one; one in another pid namespace is
        // asked all the same (its pid says nothing here).
        let gone = |ad: &SubscriberAd| ad.pid_ns == pid_namespace() && !crate::clock::process_alive(ad.pid);
        if let Some(ad) = SubscriberAd::decode(d.subscriber_name.as_str()).filter(|ad| !gone(ad)) {
            processes.entry((ad.pid_ns, ad.pid)).or_default().insert(mailbox_id(d.subscriber_id.value()));
        }
        CallbackProgression::Continue
    });
    if processes.is_empty() {
        return;
    }
    let answers = farewell_name(s.iox.id().value()).and_then(|name| {
        let service = node
            .service_builder(&name)
            .event()
            .max_listeners(1)
            .max_notifiers(MAX_SENDERS)
            .event_id_max_value(IDS - 1)
            .open_or_create()
            .map_err(|e| format!("{e:?}"))?;
        let listener = service.listener_builder().create().map_err(|e| format!("{e:?}"))?;
        Ok((service, listener))
    });
    let (_service, listener) = match answers {
        Ok(a) => a,
        Err(why) => return said_once(&s.topic, &why),
    };
    let mut rounds: Vec<Vec<(Process, BTreeSet<usize>)>> = Vec::new();
    for (process, ids) in processes {
        let fits = |round: &Vec<(Process, BTreeSet<usize>)>| round.iter().all(|(_, other)| other.is_disjoint(&ids));
        match rounds.iter_mut().find(|r| fits(r)) {
            Some(round) => round.push((process, ids)),
            None => rounds.push(vec![(process, ids)]),
        }
    }
    for round in rounds {
        // The ids still unanswered, each with its process.
        let mut waiting: BTreeMap<usize, Process> = BTreeMap::new();
        for (process, ids) in round {
            if tell(node, process, &ids) && !unanswered(process) {
                waiting.extend(ids.into_iter().map(|id| (id, process)));
            }
        }
        let deadline = Instant::now() + FAREWELL_WAIT;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let mut late = lock(late_processes());
                late.extend(waiting.values().map(|&p| (p, Instant::now())));
                break;
            }
            let woke = listener.timed_wait(
                |a| {
                    waiting.remove(&a.id.as_value());
                },
                left,
            );
            if let Err(e) = woke {
                if e != iceoryx2::port::listener::ListenerWaitError::InterruptSignal {
                    return said_once(&s.topic, &format!("{e:?}"));
                }
            }
        }
    }
}

/// How long a process that let a farewell's wait pass is not waited for.
const UNANSWERED_FOR: Duration = Duration::from_secs(10);

/// Processes that let a farewell's wait pass, and when.
fn late_processes() -> &'static Mutex<BTreeMap<Process, Instant>> {
    static L: OnceLock<Mutex<BTreeMap<Process, Instant>>> = OnceLock::new();
    L.get_or_init(Mutex::default)
}

/// Whether `process` let a farewell's wait pass within [`UNANSWERED_FOR`].
fn unanswered(process: Process) -> bool {
    let mut late = lock(late_processes());
    late.retain(|_, at| at.elapsed() < UNANSWERED_FOR);
    late.contains_key(&process)
}

/// Notifies the mailbox of `process` for each of `ids`; false when it has
/// none, or nobody listens (its mailbox thread failed).
fn tell(node: &iceoryx2::node::Node<Ipc>, (pid_ns, pid): Process, ids: &BTreeSet<usize>) -> bool {
    let Some(mailbox) = mailbox_of(node, pid_ns, pid) else { return false };
    let Ok(notifier) = mailbox.notifier_builder().create() else { return false };
    ids.iter().all(|&id| matches!(notifier.notify_with_custom_event_id(EventId::new(id)), Ok(n) if n > 0))
}

/// The mailbox of process `pid`, if it has one.
fn mailbox_of(node: &iceoryx2::node::Node<Ipc>, pid_ns: Option<u32>, pid: u32) -> Option<EventService> {
    let name = mailbox_name(pid_ns, pid).ok()?;
    node.service_builder(&name).event().open().ok()
}

/// Says once per process that a farewell could not be said, and why.
fn said_once(topic: &str, why: &str) {
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        eprintln!(
            "freight: publisher of {topic}: cannot say farewell to its subscribers ({why}); what they had not \
             taken went with it"
        );
    });
}
