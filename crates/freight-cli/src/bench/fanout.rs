//! Fan-out: one publisher, N subscriber processes (`--subscribers N[,N...]`).
//!
//! Every message goes to all N subscribers. A latency row sends the next message only once all
//! N have acked, so it measures the latency to the *last* subscriber: for each message, the
//! largest of the N one-way latencies. The subscribers are the `bench peer` child processes of
//! a single-subscriber row, started N times; subscriber `i` is pinned to the `i`-th CPU of the
//! allowed ones but the publisher's, round robin (see [`CpuPlan::subscriber`]): with fewer
//! CPUs than N + 1 the processes share cores, and the numbers include the scheduler.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::Instant;

use super::args::TransportKind;
use super::harness::row_timeout;
use super::peer::{ChildPeer, PeerMsg};
use super::sys::CpuPlan;
use super::transport::RowConfig;
use super::BenchError;

/// The most subscribers a row may have: freight's default `Limits` allow 16 subscriptions and
/// 16 publishers per topic (the acks come back on a topic with one publisher per subscriber).
pub const MAX_SUBSCRIBERS: usize = 16;

/// Whether a transport can measure more than one subscriber (and throughput, which starts its
/// subscribers the same way). Only the process transports start their subscribers as
/// `bench peer` processes; `intra` and `memcpy` have no peer process, and the `dds` publisher
/// starts once discovery matched *a* reader, so with several readers it would send before
/// the others joined.
pub fn fans_out(kind: TransportKind) -> bool {
    matches!(
        kind,
        TransportKind::ShmLoan | TransportKind::ShmCopy | TransportKind::Iceoryx2 | TransportKind::Iceoryx2Threadsafe
    )
}

/// The subscriber counts of `--subscribers`, checked against the transports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fanout {
    counts: Vec<usize>,
}

impl Fanout {
    /// One subscriber per row: `freight bench latency` without `--subscribers`.
    pub fn single() -> Self {
        Self { counts: vec![1] }
    }

    /// Validates `counts` (duplicates dropped, order kept) for `transports`.
    pub fn new(counts: &[usize], transports: &[TransportKind]) -> Result<Self, BenchError> {
        let mut unique = Vec::new();
        for &n in counts {
            if n == 0 || n > MAX_SUBSCRIBERS {
                return Err(BenchError::new(
                    format!("--subscribers {n} is out of range"),
                    format!("use 1 to {MAX_SUBSCRIBERS} subscribers (freight's default limit per topic)"),
                ));
            }
            if !unique.contains(&n) {
                unique.push(n);
            }
        }
        let fanout = Self { counts: unique };
        if fanout.shown() {
            let refused: Vec<&str> = transports.iter().filter(|&&t| !fans_out(t)).map(|t| t.as_str()).collect();
            if !refused.is_empty() {
                return Err(refusal(&refused, "measure more than one subscriber"));
            }
        }
        Ok(fanout)
    }

    /// The subscriber counts, in table order.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Whether rows say how many subscribers they had: only when more than one was asked
    /// for, so that the table and JSON of a plain run stay as they were.
    pub fn shown(&self) -> bool {
        self.counts.iter().any(|&n| n > 1)
    }
}

/// The error for transports that cannot `what` (e.g. "measure more than one subscriber"),
/// naming those that can.
pub fn refusal(refused: &[&str], what: &str) -> BenchError {
    let able: Vec<&str> =
        [TransportKind::ShmLoan, TransportKind::ShmCopy, TransportKind::Iceoryx2, TransportKind::Iceoryx2Threadsafe]
            .iter()
            .map(|t| t.as_str())
            .collect();
    BenchError::new(
        format!(
            "{} cannot {what}: only the process transports ({}) start their subscribers as processes",
            refused.join(", "),
            able.join(", ")
        ),
        format!("drop {} from --transports, or use --subscribers 1", refused.join(",")),
    )
}

/// For each message, the latency to the last subscriber: the largest of the subscribers'
/// samples at that position. Each subscriber checked that its samples are in send order, and
/// the caller that all have the same length.
pub fn latency_to_last(per_subscriber: &[Vec<u64>]) -> Vec<u64> {
    let Some((first, rest)) = per_subscriber.split_first() else {
        return Vec::new();
    };
    let mut last = first.clone();
    for samples in rest {
        for (slowest, &s) in last.iter_mut().zip(samples) {
            *slowest = (*slowest).max(s);
        }
    }
    last
}

/// The subscriber processes of one row. Dropping it kills those still running.
pub struct ChildPeers {
    children: Vec<ChildPeer>,
}

impl ChildPeers {
    /// Starts `row.subscribers` subscriber processes, each pinned as `cpus` says, and returns
    /// them with the link their messages arrive on.
    pub fn spawn(
        row: &RowConfig,
        capacity: usize,
        cpus: &CpuPlan,
        deadline: Instant,
    ) -> Result<(Self, PeerLink), BenchError> {
        let (tx, rx) = mpsc::channel();
        let mut children = Vec::new();
        for index in 0..row.subscribers.max(1) {
            // On error the children started so far are killed when `children` drops.
            children.push(ChildPeer::spawn(row, index, capacity, cpus.subscriber(index), deadline, tx.clone())?);
        }
        let link = PeerLink::new(rx, children.len(), "the subscriber process");
        Ok((Self { children }, link))
    }

    /// Waits for every child to exit cleanly after it reported.
    pub fn wait_exit(&mut self, deadline: Instant) -> Result<(), BenchError> {
        let n = self.children.len();
        for (i, child) in self.children.iter_mut().enumerate() {
            child.wait_exit(deadline).map_err(|e| e.context(ordinal("subscriber process", i, n)))?;
        }
        Ok(())
    }

    /// Kills the children still running, reaps them, and returns what is known about the end
    /// of each that has something to say.
    pub fn kill_and_collect(&mut self) -> String {
        let n = self.children.len();
        let reports: Vec<String> = self
            .children
            .iter_mut()
            .enumerate()
            .filter_map(|(i, child)| {
                let report = child.kill_and_collect();
                match (report.trim().is_empty(), n) {
                    (true, _) => None,
                    (false, 1) => Some(report),
                    (false, _) => Some(format!("{}: {report}", ordinal("subscriber", i, n))),
                }
            })
            .collect();
        reports.join("; ")
    }
}

/// "subscriber 3 of 8", or just "subscriber" when there is one.
fn ordinal(what: &str, index: usize, of: usize) -> String {
    if of == 1 {
        what.to_string()
    } else {
        format!("{what} {} of {of}", index + 1)
    }
}

/// The publisher's view of the subscriber side: what each of its subscribers reports.
pub struct PeerLink {
    rx: Receiver<(usize, PeerMsg)>,
    /// Reports that [`PeerLink::check`] saw early: a subscriber that acked the stop message
    /// reports its results while the publisher still waits for the others' acks.
    early: RefCell<VecDeque<(usize, PeerMsg)>>,
    peers: usize,
    who: &'static str,
}

impl PeerLink {
    /// A link to `peers` subscribers whose messages arrive on `rx`, tagged with their index.
    pub fn new(rx: Receiver<(usize, PeerMsg)>, peers: usize, who: &'static str) -> Self {
        Self { rx, early: RefCell::new(VecDeque::new()), peers, who }
    }

    /// How many subscribers report on this link.
    pub fn peers(&self) -> usize {
        self.peers
    }

    fn who(&self, index: usize) -> String {
        ordinal(self.who, index, self.peers)
    }

    fn recv(&self, deadline: Instant, waiting_for: &str) -> Result<(usize, PeerMsg), BenchError> {
        if let Some(msg) = self.early.borrow_mut().pop_front() {
            return Ok(msg);
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(timeout) {
            Ok((i, PeerMsg::Failed { what, fix })) => Err(peer_failed(&self.who(i), &what, &fix)),
            Ok(msg) => Ok(msg),
            Err(RecvTimeoutError::Timeout) => Err(row_timeout(&format!("{waiting_for} from {}", self.who))),
            Err(RecvTimeoutError::Disconnected) => Err(BenchError::new(
                format!("{} ended before reporting {waiting_for}", self.who),
                "see its output for the cause; rerun the same command to check it is reproducible",
            )),
        }
    }

    /// Fails if a subscriber has reported a failure or is gone. Cheap; called while waiting
    /// for acks so that a dead subscriber is noticed within one poll slice. Other reports are
    /// kept for [`PeerLink::collect`], which checks that each is the one it expects.
    pub fn check(&self) -> Result<(), BenchError> {
        match self.rx.try_recv() {
            Err(TryRecvError::Empty) => Ok(()),
            Ok((i, PeerMsg::Failed { what, fix })) => Err(peer_failed(&self.who(i), &what, &fix)),
            Ok(other) => {
                self.early.borrow_mut().push_back(other);
                Ok(())
            }
            // Every subscriber reported and ended; what they reported is still to be read.
            Err(TryRecvError::Disconnected) if !self.early.borrow().is_empty() => Ok(()),
            Err(TryRecvError::Disconnected) => Err(BenchError::new(
                format!("{} ended in the middle of the row", self.who),
                "see its output for the cause; rerun the same command to check it is reproducible",
            )),
        }
    }

    /// Waits until every subscriber reported that its end is open.
    pub fn wait_ready(&self, deadline: Instant) -> Result<(), BenchError> {
        self.collect(deadline, "readiness", |msg| match msg {
            PeerMsg::Ready => Ok(()),
            other => Err(other),
        })
        .map(drop)
    }

    /// Receives one message from each subscriber and returns what `pick` makes of them, in
    /// subscriber order. `pick` gives back a message that is not the one expected.
    pub fn collect<T>(
        &self,
        deadline: Instant,
        waiting_for: &str,
        pick: impl Fn(PeerMsg) -> Result<T, PeerMsg>,
    ) -> Result<Vec<T>, BenchError> {
        let mut got: Vec<Option<T>> = (0..self.peers).map(|_| None).collect();
        while got.iter().any(Option::is_none) {
            let (i, msg) = self.recv(deadline, waiting_for)?;
            let slot = got.get_mut(i).filter(|slot| slot.is_none()).ok_or_else(|| {
                BenchError::new(
                    format!("{} reported {waiting_for} twice", self.who(i)),
                    "this is a bug in the harness; please report it",
                )
            })?;
            *slot = Some(pick(msg).map_err(|other| {
                BenchError::new(
                    format!("{} sent {other:?} instead of {waiting_for}", self.who(i)),
                    "this is a bug in the harness; please report it",
                )
            })?);
        }
        Ok(got.into_iter().flatten().collect())
    }
}

fn peer_failed(who: &str, what: &str, fix: &str) -> BenchError {
    BenchError::new(format!("{who} failed: {what}"), fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_to_last_takes_the_slowest_subscriber_per_message() {
        let per_subscriber = vec![vec![5, 1, 9], vec![2, 7, 3], vec![4, 4, 4]];
        assert_eq!(latency_to_last(&per_subscriber), [5, 7, 9]);
        assert_eq!(latency_to_last(&[vec![1, 2]]), [1, 2]);
        assert!(latency_to_last(&[]).is_empty());
    }

    #[test]
    fn counts_are_checked_and_deduplicated() {
        let t = [TransportKind::ShmLoan, TransportKind::Iceoryx2];
        let f = Fanout::new(&[1, 4, 1, 16], &t).unwrap();
        assert_eq!(f.counts(), [1, 4, 16]);
        assert!(f.shown());
        assert!(!Fanout::new(&[1], &[TransportKind::Intra]).unwrap().shown());
        assert!(Fanout::new(&[0], &t).unwrap_err().to_string().contains("1 to 16"));
        assert!(Fanout::new(&[17], &t).is_err());
    }

    #[test]
    fn transports_without_peer_processes_are_refused_by_name() {
        let t = [TransportKind::Intra, TransportKind::ShmLoan, TransportKind::Memcpy, TransportKind::Dds];
        let err = Fanout::new(&[2], &t).unwrap_err();
        assert!(err.what().starts_with("intra, memcpy, dds cannot"), "{err}");
        assert!(err.what().contains("shm-loan, shm-copy, iceoryx2"), "{err}");
    }
}
