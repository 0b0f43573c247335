//! What a publisher sends next: the size of each message and whether it is written into a
//! loan or sent with `publish_copy`.
//!
//! * **Steady** (warm-up and settle): a fixed period of [`PERIOD`] messages, the
//!   topology's largest size first (a loan), 1 MiB four times, and 64 B to 64 KiB for the
//!   rest, loans and copies alternating. Every period reaches the same high-water mark of
//!   memory, so what grows from one measurement to the next is a leak, not a bigger message.
//! * **Chaos**: drawn from the worker's seeded generator: 80 % of messages 64 B – 64 KiB,
//!   17 % 64 KiB – 2 MiB, 2.5 % 2 – 16 MiB, 0.5 % 16 – 64 MiB (each log-uniform, cut at the
//!   topology's largest), half of them loans. Most messages are small so that a 60 s run on
//!   a two-core machine stays light; the large ones come a few times a minute.

use super::payload::HEADER_LEN;
use super::rng::Rng;

/// Messages in one steady period.
pub const PERIOD: u64 = 100;

/// One message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    /// Payload bytes.
    pub len: usize,
    /// Written into a loan (else `publish_copy`).
    pub loan: bool,
}

/// The `k`-th message (counting from 0) of the steady schedule, for a topology whose
/// largest message is `max`.
pub fn steady(k: u64, max: usize) -> Next {
    let k = k % PERIOD;
    let len = match k {
        0 => max,
        _ if k % 25 == 12 => 1 << 20,
        _ => 64 << (k % 11),
    };
    Next { len: len.clamp(HEADER_LEN, max), loan: k.is_multiple_of(2) }
}

/// A message of the chaos mix.
pub fn chaos(rng: &mut Rng, max: usize) -> Next {
    let roll = rng.unit();
    let len = if roll < 0.80 {
        rng.log_uniform(64, 64 << 10)
    } else if roll < 0.97 {
        rng.log_uniform(64 << 10, 2 << 20)
    } else if roll < 0.995 {
        rng.log_uniform(2 << 20, 16 << 20)
    } else {
        rng.log_uniform(16 << 20, 64 << 20)
    };
    Next { len: len.clamp(HEADER_LEN, max), loan: rng.chance(0.5) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_period_repeats_and_holds_the_largest_once() {
        let period: Vec<Next> = (0..PERIOD).map(|k| steady(k, 64 << 20)).collect();
        assert_eq!(period, (PERIOD..2 * PERIOD).map(|k| steady(k, 64 << 20)).collect::<Vec<_>>());
        assert_eq!(period.iter().filter(|n| n.len == 64 << 20).count(), 1);
        assert_eq!(period.iter().filter(|n| n.loan).count(), 50);
        assert!(period.iter().all(|n| n.len >= HEADER_LEN));
        assert!((0..PERIOD).all(|k| steady(k, 2 << 20).len <= 2 << 20));
    }

    #[test]
    fn the_chaos_mix_is_mostly_small_and_sometimes_large() {
        let mut rng = Rng::derive(3, 0);
        let sizes: Vec<Next> = (0..20_000).map(|_| chaos(&mut rng, 64 << 20)).collect();
        let small = sizes.iter().filter(|n| n.len <= 64 << 10).count();
        assert!((15_000..17_000).contains(&small), "{small}");
        assert!(sizes.iter().any(|n| n.len > 32 << 20));
        assert!(sizes.iter().all(|n| (HEADER_LEN..=64 << 20).contains(&n.len)));
        let loans = sizes.iter().filter(|n| n.loan).count();
        assert!((9_000..11_000).contains(&loans), "{loans}");
    }
}
