//! The byte budget of `freight view` (`--max-bandwidth`): a token bucket that
//! may go into debt.
//!
//! A browser on Wi-Fi cannot take a 4K camera at 30 Hz (1 GB/s), and a
//! bucket that admitted only messages smaller than its content would never pass
//! a frame larger than the burst. So a message goes out whenever the bucket is
//! not in debt, and its size is then taken from the bucket, which may go
//! negative; the bucket refills at the rate, up to a burst of a tenth of a
//! second. Over any window of T seconds what goes out is at most
//! `rate * T + burst + one message`, and on average the rate. The decision is
//! made before the message is encoded, so a skipped message costs nothing.
//!
//! Tokens are counted in nanobytes (bytes times 10^9): a refill is then
//! `elapsed ns * bytes per second`, exact, with no division and no rounding.
//!
//! [`Budget`] splits `--max-bandwidth` into two such buckets, so that a
//! camera frame's debt does not hold back the small messages of other topics
//! (transforms, odometry, diagnostics): a tenth is kept for messages of at
//! most [`SMALL`] bytes, which may also use the rest while it is not in debt.

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// Nanobytes per byte.
const NANO: i128 = 1_000_000_000;

/// Messages up to this size count as small: they have a share of the budget
/// of their own.
pub const SMALL: usize = 64 << 10;

/// The small messages' share of the budget: one part in this many.
const SMALL_SHARE: u64 = 10;

/// How long the bucket may save up for: its burst is the rate times this.
const BURST: Duration = Duration::from_millis(100);

/// A token bucket of `rate` bytes per second that lends to one message at a time.
#[derive(Debug, Clone)]
pub struct Throttle {
    /// Bytes per second.
    rate: NonZeroU64,
    /// Most nanobytes the bucket holds (the burst).
    capacity: i128,
    /// Nanobytes in the bucket; negative while a message's debt is paid off.
    tokens: i128,
    /// When `tokens` was last brought up to date.
    last: Instant,
}

impl Throttle {
    /// A full bucket of `rate` bytes per second, at `now`.
    pub fn new(rate: NonZeroU64, now: Instant) -> Self {
        let capacity = burst_nanobytes(rate);
        Throttle { rate, capacity, tokens: capacity, last: now }
    }

    /// Whether a message may go out at `now`: the bucket is not in debt.
    pub fn ready(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 0
    }

    /// Takes `bytes` (the message that went out) from the bucket.
    pub fn spend(&mut self, bytes: usize) {
        // usize fits in i128 on every target Rust has, and bytes * 10^9 does too
        // (2^64 * 10^9 < 2^94); saturating keeps it sound were either not so.
        let cost = i128::try_from(bytes).ok().and_then(|b| b.checked_mul(NANO)).unwrap_or(i128::MAX);
        self.tokens = self.tokens.saturating_sub(cost);
    }

    /// Adds what the time since the last refill earned, up to the burst.
    fn refill(&mut self, now: Instant) {
        // A clock that went backwards earns nothing, and does not move `last` back.
        let Some(elapsed) = now.checked_duration_since(self.last) else { return };
        self.last = now;
        let earned = i128::try_from(elapsed.as_nanos()).ok().and_then(|ns| ns.checked_mul(i128::from(self.rate.get())));
        self.tokens = match earned {
            Some(e) => self.tokens.saturating_add(e).min(self.capacity),
            // Too much to count: far more than the burst.
            None => self.capacity,
        };
    }
}

/// The byte budget of all topics: a bucket for every message, and one kept
/// for small messages (see the module docs).
#[derive(Debug, Clone)]
pub struct Budget {
    /// Nine tenths of the rate: any message.
    all: Throttle,
    /// A tenth: messages of at most [`SMALL`] bytes, when `all` is in debt.
    small: Throttle,
}

/// The bucket a message was admitted by: its cost goes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    All,
    Small,
}

impl Budget {
    /// Full buckets of `rate` bytes per second in all, at `now`.
    pub fn new(rate: NonZeroU64, now: Instant) -> Self {
        let small = NonZeroU64::new(rate.get() / SMALL_SHARE).unwrap_or(NonZeroU64::MIN);
        let all = NonZeroU64::new(rate.get() - small.get()).unwrap_or(NonZeroU64::MIN);
        Budget { all: Throttle::new(all, now), small: Throttle::new(small, now) }
    }

    /// Whether a message expected to be `expected` bytes (its topic's last
    /// one: it is not encoded yet) may go out at `now`, and on which bucket.
    pub fn admit(&mut self, expected: usize, now: Instant) -> Option<Admitted> {
        if self.all.ready(now) {
            Some(Admitted::All)
        } else if expected <= SMALL && self.small.ready(now) {
            Some(Admitted::Small)
        } else {
            None
        }
    }

    /// Takes the `bytes` of a message that went out. One that turned out
    /// larger than [`SMALL`] (a topic's first frame, expected at 0 bytes) is
    /// charged to the bucket of all messages, never to the small one.
    pub fn spend(&mut self, admitted: Admitted, bytes: usize) {
        match admitted {
            Admitted::Small if bytes <= SMALL => self.small.spend(bytes),
            _ => self.all.spend(bytes),
        }
    }
}

/// The burst in nanobytes: `rate * BURST`, at least one byte.
fn burst_nanobytes(rate: NonZeroU64) -> i128 {
    i128::from(rate.get())
        .checked_mul(i128::try_from(BURST.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(i128::MAX)
        .max(NANO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(bytes_per_s: u64) -> NonZeroU64 {
        NonZeroU64::new(bytes_per_s).expect("a test rate is not zero")
    }

    #[test]
    fn a_full_bucket_admits_a_burst_then_refills_at_the_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(rate(1_000), t0);
        // Burst: 100 ms of 1000 B/s.
        for _ in 0..10 {
            assert!(t.ready(t0));
            t.spend(10);
        }
        assert!(t.ready(t0), "exactly empty is not in debt");
        t.spend(1);
        assert!(!t.ready(t0));
        // One byte of debt is paid after 1 ms at 1000 B/s.
        assert!(!t.ready(t0 + Duration::from_micros(999)));
        assert!(t.ready(t0 + Duration::from_millis(1)));
    }

    #[test]
    fn a_message_larger_than_the_burst_goes_out_and_its_debt_is_paid_at_the_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(rate(1_000_000), t0);
        assert!(t.ready(t0));
        // A 33 MB frame against 1 MB/s with a 100 kB burst: 33.1 s of debt.
        t.spend(33_177_600);
        assert!(!t.ready(t0 + Duration::from_secs(33)));
        assert!(t.ready(t0 + Duration::from_millis(33_078)));
    }

    #[test]
    fn idle_time_saves_up_no_more_than_the_burst() {
        let t0 = Instant::now();
        let mut t = Throttle::new(rate(1_000), t0);
        let later = t0 + Duration::from_secs(3600);
        assert!(t.ready(later));
        t.spend(101);
        assert!(!t.ready(later), "an hour idle must not buy more than 100 ms of bytes");
    }

    #[test]
    fn what_goes_out_in_a_window_is_at_most_rate_times_window_plus_burst_plus_one_message() {
        let t0 = Instant::now();
        let r = 2_000_000u64;
        let mut t = Throttle::new(rate(r), t0);
        let (msg, window) = (300_000usize, Duration::from_secs(5));
        let mut sent = 0u64;
        // Offered at 100 Hz: 30 MB/s against 2 MB/s.
        let mut now = t0;
        while now < t0 + window {
            if t.ready(now) {
                t.spend(msg);
                sent += msg as u64;
            }
            now += Duration::from_millis(10);
        }
        let bound = r * 5 + r / 10 + msg as u64;
        assert!(sent <= bound, "{sent} > {bound}");
        assert!(sent >= r * 5 - msg as u64, "{sent}: the budget was not used");
    }

    /// A 4K camera offered at 30 times the budget beside a 1 kB topic at
    /// 100 Hz: the camera gets most of the budget, and the small topic every
    /// message, where one shared bucket skipped it while a frame's debt lasted.
    #[test]
    fn small_messages_go_out_while_a_frame_s_debt_is_paid() {
        let t0 = Instant::now();
        let r = 20_000_000u64;
        let mut b = Budget::new(rate(r), t0);
        let mut single = Throttle::new(rate(r), t0);
        let (frame, small) = (33_177_600usize, 1_000usize);
        let (mut frame_bytes, mut small_sent, mut small_single) = (0u64, 0u32, 0u32);
        let mut last_frame = 0;
        for ms in 0..10_000u64 {
            let now = t0 + Duration::from_millis(ms);
            if ms % 33 == 0 {
                if let Some(a) = b.admit(last_frame, now) {
                    b.spend(a, frame);
                    frame_bytes += frame as u64;
                    last_frame = frame;
                }
                if single.ready(now) {
                    single.spend(frame);
                }
            }
            if ms % 10 == 0 {
                if let Some(a) = b.admit(small, now) {
                    b.spend(a, small);
                    small_sent += 1;
                }
                if single.ready(now) {
                    single.spend(small);
                    small_single += 1;
                }
            }
        }
        assert_eq!(small_sent, 1000, "every small message went out");
        assert!(small_single < 100, "one shared bucket let {small_single} of 1000 through");
        // The camera: at most its nine tenths over 10 s, plus a burst and the frame in debt.
        let all = r - r / 10;
        assert!(frame_bytes <= all * 10 + all / 10 + frame as u64, "{frame_bytes}");
        assert!(frame_bytes >= all * 10 - frame as u64, "the camera did not get its share: {frame_bytes}");
    }

    #[test]
    fn a_topic_s_first_frame_admitted_as_small_is_charged_to_the_bucket_of_all() {
        let t0 = Instant::now();
        let mut b = Budget::new(rate(1_000_000), t0);
        b.all.spend(10_000_000); // in debt: only the small bucket admits
        let a = b.admit(0, t0).expect("a small bucket is full");
        assert_eq!(a, Admitted::Small);
        b.spend(a, 33_177_600);
        assert!(b.admit(SMALL, t0).is_some(), "the small bucket is untouched by a frame");
        assert!(b.admit(SMALL + 1, t0).is_none(), "a large message waits for the bucket of all");
    }

    #[test]
    fn extreme_sizes_rates_and_times_saturate_instead_of_overflowing() {
        let t0 = Instant::now();
        let mut t = Throttle::new(rate(u64::MAX), t0);
        assert!(t.ready(t0));
        t.spend(usize::MAX);
        t.spend(usize::MAX);
        // Two messages of usize::MAX bytes at u64::MAX bytes per second: two seconds of debt.
        assert!(!t.ready(t0 + Duration::from_secs(1)));
        assert!(t.ready(t0 + Duration::from_secs(3)));
        // elapsed ns * rate overflows i128: the bucket is simply full.
        let mut idle = Throttle::new(rate(u64::MAX), t0);
        idle.spend(usize::MAX);
        assert!(idle.ready(t0 + Duration::from_secs(u64::MAX / 4)));

        let mut slow = Throttle::new(rate(1), t0);
        assert!(slow.ready(t0), "the burst is at least one byte");
        slow.spend(usize::MAX);
        assert!(!slow.ready(t0 + Duration::from_secs(1_000_000)));
        // A clock that goes backwards earns nothing and is not an error.
        assert!(!slow.ready(t0));
    }
}
