//! The controller's record of what every publisher and subscription incarnation reported,
//! and the loss analysis over it ([`super::accounting`]).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::accounting::{missing, Owed, SeqSet};
use super::protocol::{Fault, PubStats, SubStats, Topology};

/// How far behind the continuous loss check looks: a publisher's excuse for a number is
/// written before its next message, but read on another pipe than the subscriber's report
/// of that next message.
pub const LOSS_LAG: Duration = Duration::from_secs(2);
/// The note of a loss whose publisher started while the subscription's process was stopped.
pub const NOT_CONNECTED: &str = "publisher started while the subscription was stopped";
/// What that note means.
pub const NOT_CONNECTED_WHY: &str = "a publisher that starts while a subscription's process is stopped (or \
    otherwise not taking) is not yet connected to from the subscription's side; once the subscription's queue \
    is full, iceoryx2 0.10 drops further samples for such a receiver \
    (ZeroCopySendError::NoConnectedReceiverAndBufferIsFull, which its Sender treats as no failure, so freight's \
    backpressure handler never runs) and Publisher::publish returns Ok: reliable messages lost without an error, \
    and for a device pool the holds exported for that reader are never given back";
/// Details kept per kind of record (all are counted).
const KEEP: usize = 50;

/// One publisher incarnation.
#[derive(Debug)]
pub struct PubLife {
    /// The worker slot.
    pub worker: usize,
    /// The worker's incarnation (and the publisher's).
    pub incarnation: u32,
    /// `name#incarnation`.
    pub label: String,
    /// When its process was started.
    pub spawned_at: Instant,
    /// Numbers not delivered to every subscription.
    pub excused: SeqSet,
    /// Its last counters.
    pub stats: PubStats,
    /// Its first number of the settle phase.
    pub settle_from: Option<u64>,
    /// Its last number, once stopped.
    pub last_seq: Option<u64>,
    /// Alive from the start of the settle phase to the end.
    pub through_settle: bool,
}

/// A received run and when the controller learnt of it.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: u64,
    last: u64,
    at: Instant,
}

/// One subscription of one worker incarnation.
#[derive(Debug)]
pub struct SubLife {
    /// The topology.
    pub topology: Topology,
    /// The worker slot.
    pub worker: usize,
    /// Its incarnation.
    pub incarnation: u32,
    /// `name#incarnation/subscription`.
    pub label: String,
    /// The subscription's name.
    pub name: String,
    /// When the controller heard the worker was ready.
    pub ready_at: Instant,
    /// Its last counters.
    pub stats: SubStats,
    /// Alive from the start of the settle phase to the end.
    pub through_settle: bool,
    /// Received runs, by publisher incarnation.
    streams: BTreeMap<u32, Vec<Run>>,
}

/// A wrong message, as a subscription reported it.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// `name#incarnation/subscription`.
    pub subscription: String,
    /// Its kind.
    pub fault: Fault,
    /// The details.
    pub what: String,
}

/// Owed messages a subscription did not get from one publisher incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The topology.
    pub topology: Topology,
    /// `name#incarnation/subscription`.
    pub subscription: String,
    /// `name#incarnation` of the publisher.
    pub publisher: String,
    /// The missing numbers.
    pub missing: Vec<(u64, u64)>,
    /// What the controller knows that may explain it.
    pub note: Option<&'static str>,
}

impl Loss {
    /// How many numbers are missing.
    pub fn count(&self) -> u64 {
        self.missing.iter().map(|(a, b)| b - a + 1).sum()
    }
}

/// Everything reported.
#[derive(Debug, Default)]
pub struct Ledger {
    /// By topology and incarnation.
    pub pubs: BTreeMap<(Topology, u32), PubLife>,
    /// By worker slot, incarnation and subscription name.
    pub subs: BTreeMap<(usize, u32, String), SubLife>,
    /// Wrong messages (the first [`KEEP`]).
    pub faults: Vec<FaultRecord>,
    /// Wrong messages by kind.
    pub fault_counts: HashMap<Fault, u64>,
    /// Wrong messages by topology.
    pub faults_by_topology: HashMap<Topology, u64>,
    /// Unexpected errors (the first [`KEEP`]).
    pub errors: Vec<String>,
    /// All unexpected errors.
    pub error_count: u64,
    /// When each worker incarnation was SIGSTOPped, and until when.
    stops: Vec<(usize, u32, Instant, Option<Instant>)>,
}

impl Ledger {
    /// A publisher incarnation was started.
    pub fn pub_started(&mut self, topology: Topology, incarnation: u32, worker: usize, label: String) {
        let life = PubLife {
            worker,
            incarnation,
            label,
            spawned_at: Instant::now(),
            excused: SeqSet::default(),
            stats: PubStats::default(),
            settle_from: None,
            last_seq: None,
            through_settle: false,
        };
        self.pubs.insert((topology, incarnation), life);
    }

    /// A worker incarnation with these subscriptions became ready.
    pub fn subs_ready(&mut self, topology: Topology, worker: usize, incarnation: u32, label: &str, names: &[&str]) {
        for &name in names {
            let life = SubLife {
                topology,
                worker,
                incarnation,
                label: format!("{label}/{name}"),
                name: name.into(),
                ready_at: Instant::now(),
                stats: SubStats::default(),
                through_settle: false,
                streams: BTreeMap::new(),
            };
            self.subs.insert((worker, incarnation, name.to_string()), life);
        }
    }

    /// A subscription reported new runs of publisher `incarnation`.
    pub fn received(&mut self, key: &(usize, u32, String), incarnation: u32, runs: &[(u64, u64)]) {
        let Some(life) = self.subs.get_mut(key) else { return };
        let at = Instant::now();
        let stream = life.streams.entry(incarnation).or_default();
        for &(first, last) in runs {
            match stream.last_mut() {
                Some(before) if first <= before.last => {
                    // The subscriber's tracker refuses such numbers; a run that still
                    // overlaps means the report itself is wrong.
                    let what = format!("{} reported run {first}..={last} after ..={}", life.label, before.last);
                    self.error(what);
                    return;
                }
                // A run that goes on where the last one ended: one run, dated by its start
                // (a gap before it is certain from then on).
                Some(before) if first == before.last + 1 => before.last = last,
                _ => stream.push(Run { first, last, at }),
            }
        }
    }

    /// A subscription's counters alone.
    pub fn sub_stats(&mut self, key: &(usize, u32, String), stats: SubStats) {
        if let Some(life) = self.subs.get_mut(key) {
            life.stats = stats;
        }
    }

    /// A publisher excused a number (for any reason: a failed publish is reported as an
    /// error too, and excusing it keeps it from being counted twice).
    pub fn excused(&mut self, topology: Topology, incarnation: u32, seq: u64) {
        if let Some(p) = self.pubs.get_mut(&(topology, incarnation)) {
            p.excused.insert(seq);
        }
    }

    /// A wrong message.
    pub fn fault(&mut self, topology: Topology, subscription: String, fault: Fault, what: String) {
        *self.fault_counts.entry(fault).or_default() += 1;
        *self.faults_by_topology.entry(topology).or_default() += 1;
        if self.faults.len() < KEEP {
            eprintln!("soak: {subscription}: {what}");
            self.faults.push(FaultRecord { subscription, fault, what });
        }
    }

    /// An unexpected error.
    pub fn error(&mut self, what: String) {
        self.error_count += 1;
        if self.errors.len() < KEEP {
            eprintln!("soak: error: {what}");
            self.errors.push(what);
        }
    }

    /// A worker incarnation died or was killed: it lives through nothing more.
    pub fn died(&mut self, worker: usize, incarnation: u32) {
        for p in self.pubs.values_mut().filter(|p| p.worker == worker && p.incarnation == incarnation) {
            p.through_settle = false;
        }
        for s in self.subs.values_mut().filter(|s| s.worker == worker && s.incarnation == incarnation) {
            s.through_settle = false;
        }
    }

    /// A worker incarnation was stopped.
    pub fn stopped(&mut self, worker: usize, incarnation: u32) {
        self.stops.push((worker, incarnation, Instant::now(), None));
    }

    /// A worker incarnation was continued.
    pub fn continued(&mut self, worker: usize, incarnation: u32) {
        let now = Instant::now();
        if let Some(s) = self.stops.iter_mut().rev().find(|s| s.0 == worker && s.1 == incarnation && s.3.is_none()) {
            s.3 = Some(now);
        }
    }

    /// Whether the subscription's process was stopped when `p` started.
    fn stopped_at_start(&self, s: &SubLife, p: &PubLife) -> bool {
        self.stops.iter().any(|&(w, k, from, to)| {
            w == s.worker && k == s.incarnation && from <= p.spawned_at && to.is_none_or(|t| p.spawned_at <= t)
        })
    }

    /// The settle phase begins with these worker incarnations alive.
    pub fn settle_begins(&mut self, alive: &[(usize, u32)]) {
        for p in self.pubs.values_mut() {
            p.through_settle = alive.contains(&(p.worker, p.incarnation));
        }
        for s in self.subs.values_mut() {
            s.through_settle = alive.contains(&(s.worker, s.incarnation));
        }
    }

    /// Whether every pair that lived through the settle phase has received what it is owed
    /// of it (what the finish waits for before it stops the subscriptions; gaps of the chaos
    /// never fill, so they are not waited for).
    pub fn settle_delivered(&self) -> bool {
        self.subs.values().filter(|s| s.through_settle).all(|s| {
            let publishers = self.pubs.range((s.topology, 0)..=(s.topology, u32::MAX)).map(|(_, p)| p);
            publishers.filter(|p| p.through_settle).all(|p| {
                let (Some(first), Some(last)) = (p.settle_from, p.last_seq) else { return true };
                let mut got = p.excused.clone();
                for r in s.streams.get(&p.incarnation).into_iter().flatten() {
                    got.insert_range(r.first, r.last);
                }
                got.uncovered(first, last).is_empty()
            })
        })
    }

    /// Owed numbers that did not arrive. With `lag`, only runs the controller learnt of that
    /// long ago count, and the settle phase is not looked at (the continuous check); without,
    /// everything (the final verdict).
    pub fn losses(&self, lag: Option<Duration>) -> Vec<Loss> {
        let cutoff = lag.map(|l| Instant::now().checked_sub(l).unwrap_or_else(Instant::now));
        let mut out = Vec::new();
        for s in self.subs.values() {
            let publishers = self.pubs.range((s.topology, 0)..=(s.topology, u32::MAX)).map(|(_, p)| p);
            // Only pairs that exchanged something can owe a gap or a head; pairs that lived
            // through the settle phase together owe its messages whatever they exchanged.
            let settled = |p: &PubLife| lag.is_none() && s.through_settle && p.through_settle;
            for p in publishers.filter(|p| s.streams.contains_key(&p.incarnation) || settled(p)) {
                let runs: Vec<(u64, u64)> = s.streams.get(&p.incarnation).map_or_else(Vec::new, |rs| {
                    rs.iter().filter(|r| cutoff.is_none_or(|c| r.at <= c)).map(|r| (r.first, r.last)).collect()
                });
                let same_process = p.worker == s.worker && p.incarnation == s.incarnation;
                let head_from = (same_process || s.ready_at < p.spawned_at).then_some(1);
                let tail = match (settled(p), p.settle_from, p.last_seq) {
                    (true, Some(first), Some(last)) => Some((first, last)),
                    _ => None,
                };
                let gone = missing(&runs, &p.excused, Owed { head_from, tail });
                if !gone.is_empty() {
                    out.push(Loss {
                        topology: s.topology,
                        subscription: s.label.clone(),
                        publisher: p.label.clone(),
                        missing: gone,
                        note: self.stopped_at_start(s, p).then_some(NOT_CONNECTED),
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscription ready before its publisher started, in another process.
    fn pair() -> (Ledger, (usize, u32, String)) {
        let mut l = Ledger::default();
        l.subs_ready(Topology::Shm, 0, 0, "shm-sub#0", &["shm"]);
        std::thread::sleep(Duration::from_millis(2));
        l.pub_started(Topology::Shm, 0, 1, "shm-pub#0".into());
        (l, (0, 0, "shm".to_string()))
    }

    #[test]
    fn a_synthetic_gap_fails_the_loss_check_until_it_is_excused() {
        let (mut l, sub) = pair();
        l.received(&sub, 0, &[(1, 3)]);
        l.received(&sub, 0, &[(4, 10), (13, 20)]);
        let losses = l.losses(None);
        assert_eq!(losses.len(), 1);
        assert_eq!(losses[0].missing, [(11, 12)]);
        assert_eq!((losses[0].subscription.as_str(), losses[0].publisher.as_str()), ("shm-sub#0/shm", "shm-pub#0"));
        assert_eq!(losses[0].count(), 2);
        // The continuous check waits for reports to settle: nothing is certain yet.
        assert!(l.losses(Some(LOSS_LAG)).is_empty());
        l.excused(Topology::Shm, 0, 11);
        l.excused(Topology::Shm, 0, 12);
        assert!(l.losses(None).is_empty());
    }

    #[test]
    fn the_head_is_owed_when_the_subscription_was_there_first_and_the_note_says_if_it_was_stopped() {
        let (mut l, sub) = pair();
        l.received(&sub, 0, &[(5, 9)]);
        assert_eq!(l.losses(None)[0].missing, [(1, 4)]);
        assert_eq!(l.losses(None)[0].note, None);

        let mut l = Ledger::default();
        l.subs_ready(Topology::Device, 0, 0, "device-sub#0", &["device"]);
        l.stopped(0, 0);
        std::thread::sleep(Duration::from_millis(2));
        l.pub_started(Topology::Device, 3, 1, "device-pub#3".into());
        l.continued(0, 0);
        l.received(&(0, 0, "device".to_string()), 3, &[(1, 4), (29, 40)]);
        let losses = l.losses(None);
        assert_eq!(losses[0].missing, [(5, 28)]);
        assert_eq!(losses[0].note, Some(NOT_CONNECTED));
    }

    #[test]
    fn the_settle_phase_is_owed_to_pairs_that_lived_through_it() {
        let settled = || {
            let (mut l, sub) = pair();
            l.received(&sub, 0, &[(1, 100)]);
            l.settle_begins(&[(0, 0), (1, 0)]);
            let p = l.pubs.get_mut(&(Topology::Shm, 0)).unwrap();
            (p.settle_from, p.last_seq) = (Some(90), Some(120));
            (l, sub)
        };
        let (mut l, sub) = settled();
        assert_eq!(l.losses(None)[0].missing, [(101, 120)]);
        assert!(l.losses(Some(Duration::ZERO)).is_empty(), "the continuous check does not look at the tail");
        assert!(!l.settle_delivered());
        l.received(&sub, 0, &[(101, 119)]);
        assert!(!l.settle_delivered());
        l.excused(Topology::Shm, 0, 120);
        assert!(l.settle_delivered());
        assert!(l.losses(None).is_empty());

        let (mut l, _) = settled();
        l.died(0, 0);
        assert!(l.losses(None).is_empty(), "nothing is owed to a subscription that died");
        assert!(l.settle_delivered());
    }
}
