//! The chaos: which worker to hit, how, and when, drawn from the run's seed.

use std::time::{Duration, Instant};

use super::rng::Rng;

/// At most this many workers are stopped, dead or restarting at once: the rest keep the
/// graph's accounting going.
pub const MAX_DOWN: usize = 2;
/// Between two actions.
const GAP: (Duration, Duration) = (Duration::from_millis(300), Duration::from_millis(1200));
/// From a SIGKILL to the restart.
const RESTART: (Duration, Duration) = (Duration::from_millis(100), Duration::from_millis(1000));
/// From a SIGSTOP to the SIGCONT: shorter than DDS's default 10 s lease, so that a stopped
/// peer's DDS endpoints are never expired (which would make its writer forget it and its
/// missed messages unaccountable).
const PAUSE: (Duration, Duration) = (Duration::from_millis(200), Duration::from_millis(2500));

/// What to do to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL it and start its next incarnation after this long.
    Kill {
        /// Until the restart.
        restart_after: Duration,
    },
    /// SIGSTOP it and SIGCONT it after this long.
    Stop {
        /// Until SIGCONT.
        resume_after: Duration,
    },
}

/// Draws the actions.
#[derive(Debug)]
pub struct Planner {
    rng: Rng,
    next_at: Instant,
    killed: bool,
    stopped: bool,
}

impl Planner {
    /// A planner whose first action comes half a second after `start`.
    pub fn new(seed: u64, start: Instant) -> Planner {
        Planner {
            rng: Rng::derive(seed, u64::MAX),
            next_at: start + Duration::from_millis(500),
            killed: false,
            stopped: false,
        }
    }

    /// The action due at `now`, if any: a victim among `running` (slots of workers running
    /// now) and what to do to it; `down` workers are stopped, dead or starting. Workers for
    /// which `killable` is false (witnesses) are only ever stopped. The first two actions
    /// are one kill and one stop, so that even a short run does both.
    pub fn next(
        &mut self,
        now: Instant,
        running: &[usize],
        down: usize,
        killable: impl Fn(usize) -> bool,
    ) -> Option<(usize, Action)> {
        if now < self.next_at {
            return None;
        }
        let can_kill: Vec<usize> = running.iter().copied().filter(|&w| killable(w)).collect();
        if running.is_empty() || down >= MAX_DOWN {
            // Try again soon rather than skip: the pace stays the same on average.
            self.next_at = now + Duration::from_millis(100);
            return None;
        }
        let kill = !can_kill.is_empty()
            && match (self.killed, self.stopped) {
                (false, true) => true,
                (true, false) => false,
                _ => self.rng.chance(0.5),
            };
        let among = if kill { &can_kill } else { running };
        let victim = among[self.rng.below(among.len() as u64) as usize];
        let action = if kill {
            self.killed = true;
            Action::Kill { restart_after: self.rng.between(RESTART.0, RESTART.1) }
        } else {
            self.stopped = true;
            Action::Stop { resume_after: self.rng.between(PAUSE.0, PAUSE.1) }
        };
        self.next_at = now + self.rng.between(GAP.0, GAP.1);
        Some((victim, action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64) -> Vec<(usize, Action)> {
        let t0 = Instant::now();
        let mut p = Planner::new(seed, t0);
        let all = [0, 1, 2, 3, 4, 5, 6];
        (0..600).filter_map(|i| p.next(t0 + Duration::from_millis(100 * i), &all, 0, |w| w != 6)).collect()
    }

    #[test]
    fn a_seed_replays_the_same_chaos_with_both_actions_first() {
        for seed in 0..50 {
            let actions = run(seed);
            assert_eq!(actions, run(seed));
            assert!(actions.len() > 40, "{seed}: one action every 0.3 to 1.2 s");
            let first_two: Vec<bool> = actions[..2].iter().map(|(_, a)| matches!(a, Action::Kill { .. })).collect();
            assert!(first_two.contains(&true) && first_two.contains(&false), "{seed}: {:?}", &actions[..2]);
            assert!((0..7).all(|w| actions.iter().any(|(v, _)| *v == w)), "{seed}: every worker is hit");
            assert!(
                actions.iter().all(|(v, a)| *v != 6 || matches!(a, Action::Stop { .. })),
                "{seed}: the witness is only stopped"
            );
        }
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn nothing_happens_while_too_many_are_down() {
        let t0 = Instant::now();
        let mut p = Planner::new(1, t0);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(p.next(later, &[0, 1], MAX_DOWN, |_| true), None);
        assert_eq!(p.next(later, &[], 0, |_| true), None);
        assert!(p.next(later + Duration::from_millis(100), &[0, 1], 1, |_| true).is_some());
    }
}
