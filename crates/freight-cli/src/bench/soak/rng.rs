//! The soak's one source of randomness: SplitMix64, seeded from `--seed`, so that a run's
//! chaos (victims, actions, pauses) and every worker's message sizes can be replayed.
//!
//! The same mixing function also derives the payload fill ([`mix`]): it is cheap (three
//! multiplies and shifts a word) and every output bit depends on every input bit, so a
//! message's bytes differ from any other message's.

use std::time::Duration;

/// The SplitMix64 increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijection on `u64` that mixes every bit into every other.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seeded generator (SplitMix64). Not for cryptography: for a reproducible soak.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for one part of the run (a worker, the chaos): `seed` and `stream` mixed,
    /// so that parts seeded alike still draw different numbers.
    pub fn derive(seed: u64, stream: u64) -> Self {
        Rng(mix(seed ^ mix(stream.wrapping_add(GOLDEN))))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// A number in `0..n` (`0` when `n` is 0), without modulo bias worth the name: the high
    /// half of a 128-bit product.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `0.0..1.0`.
    pub fn unit(&mut self) -> f64 {
        // 53 random bits: every value a double can hold in [0, 1) at this spacing.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A duration uniformly in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        lo + (hi.saturating_sub(lo)).mul_f64(self.unit())
    }

    /// A size in `lo..=hi` whose logarithm is uniform: as many sizes near 64 B as near 64 KiB.
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (lo, hi) = (lo.max(1) as f64, hi.max(lo.max(1)) as f64);
        let size = (lo.ln() + (hi.ln() - lo.ln()) * self.unit()).exp().round();
        (size as usize).clamp(lo as usize, hi as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_sequence_and_streams_differ() {
        let mut a = Rng::derive(7, 1);
        let a: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let mut b = Rng::derive(7, 1);
        assert_eq!(a, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::derive(7, 1).next_u64(), Rng::derive(7, 2).next_u64());
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Rng::derive(1, 0);
        for _ in 0..10_000 {
            assert!(r.below(3) < 3);
            let s = r.log_uniform(64, 64 << 20);
            assert!((64..=64 << 20).contains(&s), "{s}");
            let d = r.between(Duration::from_millis(200), Duration::from_millis(900));
            assert!(d >= Duration::from_millis(200) && d <= Duration::from_millis(900));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.log_uniform(100, 100), 100);
    }
}
