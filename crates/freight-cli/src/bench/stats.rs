//! Latency statistics of one row.

use std::time::Duration;

/// Summary of one row's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median one-way latency in microseconds.
    pub p50_us: f64,
    /// 99th percentile one-way latency in microseconds.
    pub p99_us: f64,
    /// Largest one-way latency in microseconds.
    pub max_us: f64,
    /// Completed round trips per second over the measured part of the row.
    pub msgs_per_s: f64,
}

impl Summary {
    /// Summarizes latency samples (nanoseconds, any order) and the round-trip count over the
    /// measured wall time. Returns `None` without samples.
    pub fn new(samples_ns: &[u64], round_trips: u64, elapsed: Duration) -> Option<Self> {
        let mut sorted = samples_ns.to_vec();
        sorted.sort_unstable();
        let us = |ns: u64| ns as f64 / 1_000.0;
        let secs = elapsed.as_secs_f64();
        Some(Self {
            p50_us: us(percentile(&sorted, 50.0)?),
            p99_us: us(percentile(&sorted, 99.0)?),
            max_us: us(*sorted.last()?),
            msgs_per_s: if secs > 0.0 { round_trips as f64 / secs } else { 0.0 },
        })
    }
}

/// Nearest-rank percentile of ascending `sorted` samples: the smallest sample such that at
/// least `p` percent of the samples are less than or equal to it. Chosen over interpolation
/// because it always returns a latency that was actually observed. `None` when empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&samples, 50.0), Some(50));
        assert_eq!(percentile(&samples, 99.0), Some(99));
        assert_eq!(percentile(&samples, 100.0), Some(100));
        assert_eq!(percentile(&samples, 0.0), Some(1));
    }

    #[test]
    fn small_and_empty_inputs() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[1, 2], 50.0), Some(1));
        assert_eq!(percentile(&[1, 2], 99.0), Some(2));
        // With 20 samples (the minimum per row) p99 is the maximum.
        let twenty: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&twenty, 99.0), Some(20));
        assert_eq!(percentile(&twenty, 50.0), Some(10));
    }

    #[test]
    fn summary_sorts_and_converts_to_microseconds() {
        let samples = [3_000, 1_000, 2_000, 10_000];
        let s = Summary::new(&samples, 4, Duration::from_secs(2)).unwrap();
        assert_eq!(s.p50_us, 2.0);
        assert_eq!(s.p99_us, 10.0);
        assert_eq!(s.max_us, 10.0);
        assert_eq!(s.msgs_per_s, 2.0);
        assert!(Summary::new(&[], 0, Duration::from_secs(1)).is_none());
    }
}
