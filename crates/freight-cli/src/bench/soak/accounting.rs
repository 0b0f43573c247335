//! Which messages a subscription was owed, and which of them it did not get.
//!
//! # Streams
//!
//! A *stream* is what one subscription incarnation received from one publisher
//! incarnation. Sequence numbers start at 1 in each publisher incarnation, and a publisher
//! reports every number it could not deliver to everyone as *excused*, with the reason
//! (freight told it so: a reliable subscription's queue stayed full past `max_blocking_time`
//! (`QueueFull`, which does not say which subscription missed it, so the number is excused
//! for every subscription of the topic), the DDS write timed out, or no DDS reader was
//! matched). Anything else a publisher sent is *published*: delivered to every subscription
//! connected at the time.
//!
//! # What is owed
//!
//! A subscription is owed, from a publisher incarnation:
//!
//! * every published number between two it received (a *gap*): both processes were alive
//!   and connected on both sides of it;
//! * every published number before the first it received (the *head*), when the
//!   subscription was ready before the publisher process started (it was there to be
//!   found by the publisher's first message);
//! * every published number from the publisher's first message of the settle phase to its
//!   last message (the *tail*), when both incarnations lived through the settle phase, in
//!   which nobody is killed or stopped.
//!
//! Nothing is owed before a stream's first message otherwise (a subscription that joins a
//! running publisher gets what is published once it is connected), nor after the last one
//! when either side was killed. Numbers must also arrive in increasing order, once each
//! ([`Tracker`] refuses anything else).

use std::collections::BTreeMap;

/// Inclusive ranges of sequence numbers, disjoint and merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqSet {
    /// Start -> end (inclusive).
    ranges: BTreeMap<u64, u64>,
}

impl SeqSet {
    /// Adds `first..=last`.
    pub fn insert_range(&mut self, first: u64, last: u64) {
        if first > last {
            return;
        }
        let (mut lo, mut hi) = (first, last);
        // Merge with every range that overlaps or touches.
        let touching: Vec<(u64, u64)> = self
            .ranges
            .range(..=hi.saturating_add(1))
            .rev()
            .take_while(|(_, &e)| e.saturating_add(1) >= lo)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.ranges.remove(&s);
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.ranges.insert(lo, hi);
    }

    /// Adds `seq`.
    pub fn insert(&mut self, seq: u64) {
        self.insert_range(seq, seq);
    }

    /// The parts of `first..=last` that are not in the set.
    pub fn uncovered(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if first > last {
            return out;
        }
        let mut next = first;
        // The range that starts before `first` may still cover it.
        let start = self.ranges.range(..=first).next_back().map_or(first, |(&s, _)| s);
        for (&s, &e) in self.ranges.range(start..=last) {
            if e < next {
                continue;
            }
            if s > next {
                out.push((next, s - 1));
            }
            if e >= last {
                return out;
            }
            next = e + 1;
        }
        out.push((next, last));
        out
    }

    /// The ranges, in order.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }
}

/// A number that came again, or after a larger one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder {
    /// The largest number received before.
    pub after: u64,
    /// The number that came.
    pub seq: u64,
}

/// What one subscription received from one publisher incarnation, as runs of consecutive
/// numbers; kept by the subscriber, which reports the runs as they grow.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    last: Option<u64>,
    /// Runs not reported yet.
    pending: Vec<(u64, u64)>,
    /// Messages received.
    pub count: u64,
}

impl Tracker {
    /// Records `seq`; refuses a number that is not larger than every one before it.
    pub fn record(&mut self, seq: u64) -> Result<(), OutOfOrder> {
        if let Some(after) = self.last.filter(|&l| seq <= l) {
            return Err(OutOfOrder { after, seq });
        }
        match self.pending.last_mut() {
            Some((_, end)) if *end + 1 == seq => *end = seq,
            _ => self.pending.push((seq, seq)),
        }
        self.last = Some(seq);
        self.count += 1;
        Ok(())
    }

    /// The runs received since the last call.
    pub fn take_runs(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.pending)
    }
}

/// What the controller knows of one stream.
#[derive(Debug, Clone, Copy)]
pub struct Owed {
    /// The head is owed from this number (the publisher's first), when the subscription was
    /// ready before the publisher started.
    pub head_from: Option<u64>,
    /// The tail is owed, `first..=last`, when both lived through the settle phase.
    pub tail: Option<(u64, u64)>,
}

/// The owed numbers a stream did not receive, as ranges. `runs` are the received runs in
/// arrival order (increasing, as [`Tracker`] ensures); `excused` the publisher's excused
/// numbers.
pub fn missing(runs: &[(u64, u64)], excused: &SeqSet, owed: Owed) -> Vec<(u64, u64)> {
    let mut owed_ranges: Vec<(u64, u64)> = Vec::new();
    for pair in runs.windows(2) {
        if pair[1].0 > pair[0].1 + 1 {
            owed_ranges.push((pair[0].1 + 1, pair[1].0 - 1));
        }
    }
    if let (Some(from), Some(first)) = (owed.head_from, runs.first()) {
        if first.0 > from {
            owed_ranges.push((from, first.0 - 1));
        }
    }
    if let Some((first, last)) = owed.tail {
        // Everything of the settle phase that is not among the runs.
        let mut received = SeqSet::default();
        runs.iter().for_each(|&(s, e)| received.insert_range(s, e));
        owed_ranges.extend(received.uncovered(first, last));
    }
    let mut out = SeqSet::default();
    for (first, last) in owed_ranges {
        for (s, e) in excused.uncovered(first, last) {
            out.insert_range(s, e);
        }
    }
    out.ranges().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranges: &[(u64, u64)]) -> SeqSet {
        let mut s = SeqSet::default();
        ranges.iter().for_each(|&(a, b)| s.insert_range(a, b));
        s
    }

    const NOTHING_MORE: Owed = Owed { head_from: None, tail: None };

    #[test]
    fn ranges_merge_and_report_what_they_do_not_cover() {
        let s = set(&[(5, 7), (1, 2), (3, 3), (10, 12), (8, 8), (4, 4)]);
        assert_eq!(s.ranges().collect::<Vec<_>>(), [(1, 8), (10, 12)]);
        assert_eq!(s.uncovered(0, 20), [(0, 0), (9, 9), (13, 20)]);
        assert_eq!(s.uncovered(2, 8), []);
        assert_eq!(s.uncovered(11, 11), []);
        assert_eq!(s.uncovered(9, 9), [(9, 9)]);
        assert_eq!(SeqSet::default().uncovered(4, 6), [(4, 6)]);
    }

    #[test]
    fn the_tracker_keeps_runs_and_refuses_repeats_and_reorders() {
        let mut t = Tracker::default();
        for seq in [1, 2, 3, 5, 6, 9] {
            t.record(seq).unwrap();
        }
        assert_eq!(t.take_runs(), [(1, 3), (5, 6), (9, 9)]);
        assert_eq!(t.record(9), Err(OutOfOrder { after: 9, seq: 9 }));
        assert_eq!(t.record(4), Err(OutOfOrder { after: 9, seq: 4 }));
        t.record(10).unwrap();
        assert_eq!(t.take_runs(), [(10, 10)]);
        assert_eq!(t.count, 7);
    }

    #[test]
    fn a_gap_that_nobody_excused_is_a_loss() {
        // The synthetic gap: 4 and 7..=8 never arrived, and the publisher excused only 7.
        let runs = [(1, 3), (5, 6), (9, 20)];
        assert_eq!(missing(&runs, &set(&[(7, 7)]), NOTHING_MORE), [(4, 4), (8, 8)]);
        assert_eq!(missing(&runs, &set(&[(4, 4), (7, 8)]), NOTHING_MORE), []);
    }

    #[test]
    fn the_head_and_tail_count_only_when_owed() {
        let runs = [(3, 10)];
        assert_eq!(missing(&runs, &SeqSet::default(), NOTHING_MORE), []);
        let head = Owed { head_from: Some(1), tail: None };
        assert_eq!(missing(&runs, &SeqSet::default(), head), [(1, 2)]);
        assert_eq!(missing(&runs, &set(&[(1, 2)]), head), []);
        // Settle ran 8..=14; 11..=14 never came, 12 was excused.
        let tail = Owed { head_from: None, tail: Some((8, 14)) };
        assert_eq!(missing(&runs, &set(&[(12, 12)]), tail), [(11, 11), (13, 14)]);
        // Nothing received at all while owed the tail: all of it is missing.
        assert_eq!(missing(&[], &SeqSet::default(), tail), [(8, 14)]);
    }
}
