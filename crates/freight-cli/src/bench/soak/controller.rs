//! The controller: starts the graph, runs the phases (see the module above), does the
//! chaos, samples the system, and turns what it saw into the verdict.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::chaos::{Action, Planner};
use super::fleet::{Event, Fleet, Line, State, GRAPH};
use super::ledger::{Ledger, LOSS_LAG, NOT_CONNECTED, NOT_CONNECTED_WHY};
use super::protocol::{Command, Fault, Mode, Report, Topology};
use super::report::{ChaosCounts, DeviceHolds, Files, Outcome, Phases, SubscriptionRow, TopologyRow, WorkerSample};
use super::verdict::{self, Evidence};
use super::{pool, BenchError, SoakArgs};
use super::{
    settle_span, tail, DEAD_HOLD_LIMIT, READY_LIMIT, SAMPLE_INTERVAL, SAMPLE_READINGS, SETTLE_WARM, STALE_MARGIN,
    STALL_LIMIT,
};
use crate::resources::{self, Memory};

/// This host's shared memory, as iceoryx2 and the device pools use it.
const SHM: &str = "/dev/shm";
const ICEORYX2: &str = "/tmp/iceoryx2";
/// How iceoryx2's global management file (one per host, never removed) ends.
const GLOBAL_MGMT: &str = ".global_mgmt";
/// The warm-up lasts at least this long (three steady periods), and at most the limit.
const WARMUP_MIN: Duration = Duration::from_secs(3);
const WARMUP_LIMIT: Duration = Duration::from_secs(30);
/// Chaos lasts at least this long, however long the warm-up took.
const CHAOS_MIN: Duration = Duration::from_secs(3);
/// Bounds of the finishing steps: publishers stopping, subscriptions draining and
/// finishing, workers exiting, device holds coming back.
const STEP_LIMIT: Duration = Duration::from_secs(5);
/// After a crash in the chaos phase, the next incarnation starts this much later.
const CRASH_RESTART: Duration = Duration::from_millis(500);
/// How often the continuous checks run and progress is printed.
const CHECK_PERIOD: Duration = Duration::from_secs(1);
const PROGRESS_PERIOD: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Start,
    WarmUp,
    Chaos,
    Recover,
    Settle,
    Finish,
    Exit,
}

/// A sample of a worker's fds and memory.
type Sample = BTreeMap<(usize, u32), (String, usize, Memory)>;

struct Soak {
    seed: u64,
    fleet: Fleet,
    ledger: Ledger,
    phase: Phase,
    planner: Planner,
    started: Instant,
    duration: Duration,
    deadline: Instant,
    counts: ChaosCounts,
    /// Failures of the `survivors` check.
    survivors: Vec<String>,
    /// Subscriptions that received nothing in the warm-up.
    cold: Vec<String>,
    /// Messages each subscription (by name) received in the warm-up.
    warm_received: HashMap<String, u64>,
    files: Files,
    /// Fds and memory after the warm-up, and at the settle samples A and B.
    baseline: Sample,
    samples: (Sample, Sample),
    device: DeviceHolds,
    /// Dead readers seen holding device blocks, since when.
    dead_holders: HashMap<u32, Instant>,
    /// Losses already printed.
    printed_losses: HashSet<(String, String, (u64, u64))>,
    next_check: Instant,
    next_progress: Instant,
}

/// Runs the soak and returns what it found.
pub fn run(args: &SoakArgs, seed: u64) -> Result<Outcome, BenchError> {
    let exe = std::env::current_exe().map_err(|e| {
        BenchError::new(
            format!("cannot find the freight executable to start workers: {e}"),
            "run freight from a path that still exists",
        )
    })?;
    let now = Instant::now();
    let mut soak = Soak {
        seed,
        fleet: Fleet::new(exe, seed, args.processes - GRAPH.len()),
        ledger: Ledger::default(),
        phase: Phase::Start,
        // Replaced when the chaos begins, so that its first action comes half a second in.
        planner: Planner::new(seed, now),
        started: now,
        duration: args.duration,
        deadline: now + args.duration,
        counts: ChaosCounts::default(),
        survivors: Vec::new(),
        cold: Vec::new(),
        warm_received: HashMap::new(),
        files: Files::default(),
        baseline: Sample::new(),
        samples: (Sample::new(), Sample::new()),
        device: DeviceHolds::default(),
        dead_holders: HashMap::new(),
        printed_losses: HashSet::new(),
        next_check: now,
        next_progress: now + PROGRESS_PERIOD,
    };
    eprintln!(
        "soak: seed {seed}, {} worker processes, {:.0} s (replay with --seed {seed})",
        args.processes,
        args.duration.as_secs_f64()
    );
    // Ctrl-C ends the soak between phases (each phase's waits end at once): a verdict on a
    // cut run would name failures that are only the cut. Dropping the soak kills the workers.
    let interrupted = || {
        BenchError::new(
            format!("interrupted {:.1} s into the soak", now.elapsed().as_secs_f64()),
            "run it again for a verdict",
        )
    };
    soak.start()?;
    soak.warm_up();
    let warm_end = Instant::now();
    soak.chaos();
    let chaos_end = Instant::now();
    soak.recover();
    soak.settle();
    if crate::stop::requested() {
        return Err(interrupted());
    }
    soak.finish();
    if crate::stop::requested() {
        return Err(interrupted());
    }
    let phases = Phases {
        warmup_s: (warm_end - soak.started).as_secs_f64(),
        chaos_s: (chaos_end - warm_end).as_secs_f64(),
        tail_s: chaos_end.elapsed().as_secs_f64(),
    };
    Ok(soak.outcome(seed, args, phases))
}

impl Soak {
    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Starts the subscribers, then the publishers, and waits until all are ready.
    fn start(&mut self) -> Result<(), BenchError> {
        let (subscribers, publishers): (Vec<usize>, Vec<usize>) =
            (0..self.fleet.workers.len()).partition(|&s| !self.fleet.workers[s].role.publishes());
        for group in [subscribers, publishers] {
            for &slot in &group {
                self.spawn(slot);
            }
            let ready =
                self.pump_until(READY_LIMIT, |s| group.iter().all(|&w| s.fleet.workers[w].state == State::Running));
            if !ready {
                let late: Vec<String> = group
                    .iter()
                    .filter(|&&w| self.fleet.workers[w].state != State::Running)
                    .map(|&w| self.fleet.workers[w].label())
                    .collect();
                return Err(BenchError::new(
                    format!(
                        "the graph did not start: {} not ready within {} s",
                        late.join(", "),
                        READY_LIMIT.as_secs()
                    ),
                    "see the workers' messages above",
                ));
            }
        }
        Ok(())
    }

    fn warm_up(&mut self) {
        self.phase = Phase::WarmUp;
        let t0 = Instant::now();
        self.pump_until(WARMUP_LIMIT, |s| {
            t0.elapsed() >= WARMUP_MIN && s.ledger.subs.values().all(|l| l.stats.received > 0)
        });
        for life in self.ledger.subs.values() {
            *self.warm_received.entry(sub_name(&self.fleet, life.worker, &life.name)).or_default() +=
                life.stats.received;
            if life.stats.received == 0 {
                self.cold.push(life.label.clone());
            }
        }
        self.files.shm_baseline = count(SHM);
        self.files.iceoryx2_baseline = count(ICEORYX2);
        self.files.shm_bytes_baseline = resources::used_bytes(Path::new(SHM)).unwrap_or(0);
        self.baseline = self.sample();
        eprintln!(
            "soak: {:.1} s: warmed up; baseline {} files in /dev/shm, {} in /tmp/iceoryx2",
            self.elapsed(),
            self.files.shm_baseline,
            self.files.iceoryx2_baseline
        );
    }

    fn chaos(&mut self) {
        self.phase = Phase::Chaos;
        let now = Instant::now();
        let end = self.deadline.checked_sub(tail(self.duration)).unwrap_or(now).max(now + CHAOS_MIN);
        self.planner = Planner::new(self.seed, now);
        self.broadcast(Command::Mode(Mode::Chaos));
        self.pump_until(end - now, |_| false);
    }

    /// Continues every stopped worker and restarts every one that is down.
    fn recover(&mut self) {
        self.phase = Phase::Recover;
        let now = Instant::now();
        for slot in 0..self.fleet.workers.len() {
            match self.fleet.workers[slot].state {
                State::Stopped { .. } => self.resume(slot),
                State::Down { .. } => self.fleet.workers[slot].state = State::Down { restart_at: Some(now) },
                State::Starting | State::Running => {}
            }
        }
        self.pump_until(READY_LIMIT, |s| s.fleet.workers.iter().all(|w| w.state == State::Running));
        self.pump_until(Duration::from_secs(1), |_| false);
        eprintln!("soak: {:.1} s: chaos over, every worker running", self.elapsed());
    }

    fn settle(&mut self) {
        self.phase = Phase::Settle;
        let alive: Vec<(usize, u32)> = self
            .fleet
            .workers
            .iter()
            .enumerate()
            .filter(|(_, w)| w.state == State::Running)
            .map(|(slot, w)| (slot, w.incarnation))
            .collect();
        self.ledger.settle_begins(&alive);
        self.broadcast(Command::Mode(Mode::Steady));
        // A is taken once every subscription has received as well: one restarted in the
        // recovery may get its first message only now, and what a subscription makes at its
        // first DDS message (its wake-up notifier) would count as growth from A to B.
        let t0 = Instant::now();
        self.pump_until(SETTLE_WARM + READY_LIMIT, |s| {
            t0.elapsed() >= SETTLE_WARM
                && s.ledger.subs.values().filter(|l| l.through_settle).all(|l| l.stats.received > 0)
        });
        self.samples.0 = self.sample();
        self.files.remote_a = self.remote_files();
        self.pump_until(settle_span(self.duration), |_| false);
        self.samples.1 = self.sample();
        self.files.remote_b = self.remote_files();
    }

    fn finish(&mut self) {
        self.phase = Phase::Finish;
        let publishers: Vec<usize> =
            (0..self.fleet.workers.len()).filter(|&s| self.fleet.workers[s].role.publishes()).collect();
        for &slot in &publishers {
            self.fleet.send(slot, Command::Stop);
        }
        let stopped = self.pump_until(STEP_LIMIT, |s| {
            publishers.iter().all(|&slot| {
                let w = &s.fleet.workers[slot];
                s.ledger.pubs.get(&(w.role.topology(), w.incarnation)).is_none_or(|p| p.last_seq.is_some())
            })
        });
        if !stopped {
            self.survivors.push(format!("a publisher did not stop within {} s", STEP_LIMIT.as_secs()));
        }
        // Drain: what the publishers sent last reaches the subscriptions.
        self.pump_until(STEP_LIMIT, |s| s.ledger.settle_delivered());
        self.broadcast(Command::Finish);
        let finished = self.pump_until(STEP_LIMIT, |s| s.fleet.workers.iter().all(|w| w.finished));
        if !finished {
            let late: Vec<String> = self.fleet.workers.iter().filter(|w| !w.finished).map(|w| w.label()).collect();
            self.survivors.push(format!("{} did not finish within {} s", late.join(", "), STEP_LIMIT.as_secs()));
        }
        self.read_pools();
        self.files.shm_end = count(SHM);
        self.files.iceoryx2_end = count(ICEORYX2);
        self.files.shm_bytes_end = resources::used_bytes(Path::new(SHM)).unwrap_or(0);
        self.phase = Phase::Exit;
        self.broadcast(Command::Exit);
        let exited =
            self.pump_until(STEP_LIMIT, |s| s.fleet.workers.iter().all(|w| matches!(w.state, State::Down { .. })));
        if !exited {
            for slot in 0..self.fleet.workers.len() {
                if !matches!(self.fleet.workers[slot].state, State::Down { .. }) {
                    let label = self.fleet.workers[slot].label();
                    self.survivors.push(format!("{label} did not exit within {} s when told to", STEP_LIMIT.as_secs()));
                    if let Err(e) = self.fleet.kill(slot) {
                        self.survivors.push(e);
                    }
                    self.fleet.workers[slot].state = State::Down { restart_at: None };
                }
            }
        }
        self.files.shm_after_exit = count(SHM);
        self.files.iceoryx2_after_exit = count(ICEORYX2);
        for dir in [SHM, ICEORYX2] {
            let left = resources::list_files(Path::new(dir)).unwrap_or_default();
            self.files.left_after_exit.extend(
                left.iter()
                    .map(|p| p.display().to_string())
                    // iceoryx2's one file per host, which it keeps on purpose.
                    .filter(|p| !p.ends_with(GLOBAL_MGMT)),
            );
        }
    }

    /// Waits until the device pools hold nothing (bounded), and records what they hold.
    fn read_pools(&mut self) {
        let end = Instant::now() + STEP_LIMIT;
        loop {
            let d = &mut self.device;
            (d.pools, d.blocks_in_use, d.holds) = (0, 0, 0);
            d.unreadable.clear();
            d.holders.clear();
            for (path, creator) in pool::pools(Path::new(SHM)) {
                d.pools += 1;
                match pool::read(&path) {
                    Ok(u) => {
                        d.blocks_in_use += u.blocks_in_use;
                        d.holds += u.holds;
                        let who = |pid: u32| {
                            let w = self.fleet.workers.iter().find(|w| w.pid() == Some(pid));
                            w.map_or_else(|| format!("pid {pid}"), |w| w.label())
                        };
                        for &r in &u.readers {
                            *d.holders.entry(format!("{} in {}'s pool", who(r), who(creator))).or_default() += 1;
                        }
                    }
                    Err(e) => d.unreadable.push(e),
                }
            }
            if (d.blocks_in_use == 0 && d.holds == 0) || Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Each running worker's fds and memory: the least of [`SAMPLE_READINGS`] readings over a
    /// second of traffic. One reading may catch a worker with its period's largest message
    /// alive (64 MiB of heap in `intra`, where messages are heap allocations passed by
    /// pointer) and take it for growth; a leak raises the least reading as well.
    fn sample(&mut self) -> Sample {
        let mut out = Sample::new();
        for reading in 0..SAMPLE_READINGS {
            if reading > 0 {
                self.pump_until(SAMPLE_INTERVAL, |_| false);
            }
            for (slot, w) in self.fleet.workers.iter().enumerate() {
                let Some(pid) = w.pid().filter(|_| w.state == State::Running) else { continue };
                let (Some(fds), Some(mem)) = (resources::fd_count(pid), resources::memory(pid)) else { continue };
                out.entry((slot, w.incarnation))
                    .and_modify(|(_, least_fds, least_mem)| {
                        *least_fds = fds.min(*least_fds);
                        if mem.anon_kib < least_mem.anon_kib {
                            *least_mem = mem;
                        }
                    })
                    .or_insert((w.label(), fds, mem));
            }
        }
        out
    }

    /// The other host's /dev/shm and /tmp/iceoryx2 files, seen through its worker's root.
    fn remote_files(&self) -> Option<(usize, usize)> {
        let w = self.fleet.workers.iter().find(|w| w.role.remote() && w.state == State::Running)?;
        let root = format!("/proc/{}/root", w.pid()?);
        Some((
            resources::count_files(&Path::new(&root).join("dev/shm"))?,
            resources::count_files(&Path::new(&root).join("tmp/iceoryx2"))?,
        ))
    }

    fn broadcast(&mut self, command: Command) {
        for slot in 0..self.fleet.workers.len() {
            self.fleet.send(slot, command);
        }
    }

    fn spawn(&mut self, slot: usize) {
        let mode = if self.phase == Phase::Chaos { Mode::Chaos } else { Mode::Steady };
        match self.fleet.spawn(slot, mode) {
            Ok(()) => {
                let w = &self.fleet.workers[slot];
                if w.role.publishes() {
                    self.ledger.pub_started(w.role.topology(), w.incarnation, slot, w.label());
                }
            }
            Err(e) => {
                self.survivors.push(e);
                self.fleet.workers[slot].state = State::Down { restart_at: None };
            }
        }
    }

    fn resume(&mut self, slot: usize) {
        self.fleet.signal(slot, libc::SIGCONT);
        self.ledger.continued(slot, self.fleet.workers[slot].incarnation);
        let w = &mut self.fleet.workers[slot];
        w.state = State::Running;
        w.last_heard = Instant::now();
        w.continued_at = Some(w.last_heard);
    }

    /// Handles events and does the periodic duties for up to `limit`, or until `done`.
    /// Returns whether `done` became true.
    fn pump_until(&mut self, limit: Duration, done: impl Fn(&Soak) -> bool) -> bool {
        let end = Instant::now() + limit;
        loop {
            if done(self) {
                return true;
            }
            let now = Instant::now();
            if now >= end || crate::stop::requested() {
                return false;
            }
            if let Some(event) = self.fleet.next_event((end - now).min(Duration::from_millis(20))) {
                self.handle(event);
                // Take whatever else is queued before looking at the clock again.
                while let Some(event) = self.fleet.next_event(Duration::ZERO) {
                    self.handle(event);
                }
            }
            self.duties(Instant::now());
        }
    }

    fn handle(&mut self, ev: Event) {
        let w = &mut self.fleet.workers[ev.slot];
        let current = ev.incarnation == w.incarnation;
        let topology = w.role.topology();
        let label = format!("{}#{}", w.name, ev.incarnation);
        if current {
            w.last_heard = Instant::now();
        }
        let report = match ev.line {
            Line::Report(r) => r,
            Line::Unreadable(line) => return self.ledger.error(format!("{label} printed {line:?}")),
        };
        match report {
            Report::Ready => {
                if current && w.state == State::Starting {
                    w.state = State::Running;
                }
                let names = w.role.subscriptions();
                self.ledger.subs_ready(topology, ev.slot, ev.incarnation, &label, names);
            }
            Report::Mode { mode, from } => {
                if self.phase == Phase::Settle && mode == Mode::Steady {
                    if let Some(p) = self.ledger.pubs.get_mut(&(topology, ev.incarnation)) {
                        p.settle_from = Some(from);
                    }
                }
            }
            Report::Excused { seq, .. } => self.ledger.excused(topology, ev.incarnation, seq),
            Report::Published(stats) => {
                if let Some(p) = self.ledger.pubs.get_mut(&(topology, ev.incarnation)) {
                    p.stats = stats;
                }
            }
            Report::Stopped { last_seq } => {
                if let Some(p) = self.ledger.pubs.get_mut(&(topology, ev.incarnation)) {
                    p.last_seq = Some(last_seq);
                }
            }
            Report::Received { sub, stats, streams } => {
                let key = (ev.slot, ev.incarnation, sub);
                self.ledger.sub_stats(&key, stats);
                for runs in streams.iter().filter(|r| r.publisher == topology.publisher_id()) {
                    self.ledger.received(&key, runs.incarnation, &runs.runs);
                }
            }
            Report::Fault { sub, fault, what } => self.ledger.fault(topology, format!("{label}/{sub}"), fault, what),
            Report::Fallback { sub, incarnation, seq } => {
                let publisher = self.fleet.workers.iter().find(|p| p.role.topology() == topology && p.role.publishes());
                let alive = publisher.is_some_and(|p| p.incarnation == incarnation && p.pid().is_some());
                // A subscription that was stopped may hold more than its share of the pool
                // when it is continued; freight then sends it host copies for a while.
                let fell_behind = self.fleet.workers[ev.slot].continued_at.is_some_and(|t| t.elapsed() < STALE_MARGIN);
                if alive && fell_behind {
                    self.device.share_fallbacks += 1;
                } else if alive {
                    let what = format!(
                        "message {seq} of publisher {}#{incarnation} (a loan) came as host bytes, not fake-device \
                         memory, while its publisher was alive",
                        topology.publisher_id()
                    );
                    self.ledger.fault(topology, format!("{label}/{sub}"), Fault::Path, what);
                } else {
                    self.device.host_fallbacks += 1;
                }
            }
            Report::Error { what } => self.ledger.error(format!("{label}: {what}")),
            Report::Finished => {
                if current {
                    w.finished = true;
                }
            }
        }
    }

    fn duties(&mut self, now: Instant) {
        for (slot, status) in self.fleet.reap() {
            let w = &mut self.fleet.workers[slot];
            let label = w.label();
            self.ledger.died(slot, w.incarnation);
            if self.phase == Phase::Exit {
                if !status.success() {
                    self.survivors.push(format!("{label} ended with {status} when told to exit"));
                }
                w.state = State::Down { restart_at: None };
                continue;
            }
            self.counts.crashes += 1;
            self.survivors.push(format!(
                "{label} died unasked ({status}) {:.1} s into the soak",
                self.started.elapsed().as_secs_f64()
            ));
            eprintln!("soak: {label} died unasked: {status}");
            w.state = State::Down { restart_at: (self.phase == Phase::Chaos).then_some(now + CRASH_RESTART) };
        }
        for slot in 0..self.fleet.workers.len() {
            let w = &self.fleet.workers[slot];
            match w.state {
                State::Stopped { until } if now >= until => self.resume(slot),
                State::Down { restart_at: Some(at) } if now >= at => {
                    self.counts.restarts += 1;
                    self.spawn(slot);
                }
                State::Starting if now - w.spawned_at > READY_LIMIT => {
                    let label = w.label();
                    self.survivors.push(format!("{label} was not ready {} s after it started", READY_LIMIT.as_secs()));
                    self.kill(slot, (self.phase == Phase::Chaos).then_some(now + CRASH_RESTART));
                }
                // Workers report until they are told to stop and finish.
                State::Running
                    if self.phase < Phase::Finish && now - w.last_heard > STALL_LIMIT && !w.stall_reported =>
                {
                    let label = w.label();
                    self.survivors.push(format!(
                        "{label} went silent for {} s while running ({:.1} s into the soak)",
                        STALL_LIMIT.as_secs(),
                        self.started.elapsed().as_secs_f64()
                    ));
                    self.fleet.workers[slot].stall_reported = true;
                }
                _ => {}
            }
        }
        if self.phase == Phase::Chaos {
            let running: Vec<usize> =
                (0..self.fleet.workers.len()).filter(|&s| self.fleet.workers[s].state == State::Running).collect();
            let down = self.fleet.workers.len() - running.len();
            let workers = &self.fleet.workers;
            if let Some((slot, action)) = self.planner.next(now, &running, down, |w| !workers[w].witness) {
                let what = match action {
                    Action::Kill { restart_after } => {
                        format!("SIGKILL, restart in {:.2} s", restart_after.as_secs_f64())
                    }
                    Action::Stop { resume_after } => format!("SIGSTOP for {:.2} s", resume_after.as_secs_f64()),
                };
                eprintln!("soak: {:.2} s: {} {what}", self.elapsed(), self.fleet.workers[slot].label());
                match action {
                    Action::Kill { restart_after } => {
                        self.counts.kills += 1;
                        self.kill(slot, Some(now + restart_after));
                    }
                    Action::Stop { resume_after } => {
                        self.counts.stops += 1;
                        if self.fleet.signal(slot, libc::SIGSTOP) {
                            self.fleet.workers[slot].state = State::Stopped { until: now + resume_after };
                            self.ledger.stopped(slot, self.fleet.workers[slot].incarnation);
                        }
                    }
                }
            }
        }
        if now >= self.next_check && matches!(self.phase, Phase::WarmUp | Phase::Chaos | Phase::Recover | Phase::Settle)
        {
            self.next_check = now + CHECK_PERIOD;
            self.print_new_losses();
            self.check_dead_holders(now);
        }
        if now >= self.next_progress {
            self.next_progress = now + PROGRESS_PERIOD;
            let received: u64 = self.ledger.subs.values().map(|s| s.stats.received).sum();
            eprintln!(
                "soak: {:.0} s: {} kills, {} stops, {received} messages received, {} wrong, {} errors",
                self.elapsed(),
                self.counts.kills,
                self.counts.stops,
                self.ledger.fault_counts.values().sum::<u64>(),
                self.ledger.error_count
            );
        }
    }

    /// SIGKILLs a worker; restarts it at `restart_at`, if given.
    fn kill(&mut self, slot: usize, restart_at: Option<Instant>) {
        if let Err(e) = self.fleet.kill(slot) {
            self.survivors.push(e);
        }
        let w = &mut self.fleet.workers[slot];
        self.ledger.died(slot, w.incarnation);
        w.state = State::Down { restart_at };
    }

    /// The continuous loss check: prints each loss once, as soon as it is certain.
    fn print_new_losses(&mut self) {
        for loss in self.ledger.losses(Some(LOSS_LAG)) {
            for &range in &loss.missing {
                if self.printed_losses.insert((loss.subscription.clone(), loss.publisher.clone(), range)) {
                    eprintln!(
                        "soak: LOSS {:.1} s: {} did not receive messages {}..={} of {} ({})",
                        self.elapsed(),
                        loss.subscription,
                        range.0,
                        range.1,
                        loss.publisher,
                        loss.topology.as_str()
                    );
                }
            }
        }
    }

    /// Holds of dead readers in the device publisher's pool must go within
    /// [`DEAD_HOLD_LIMIT`] while that publisher runs (its reaper gives them back).
    fn check_dead_holders(&mut self, now: Instant) {
        let Some(w) = self.fleet.workers.iter().find(|w| w.role.topology() == Topology::Device && w.role.publishes())
        else {
            return;
        };
        let (Some(pid), State::Running) = (w.pid(), w.state) else {
            // A stopped or restarting publisher reaps nothing: the clock starts again after.
            self.dead_holders.clear();
            return;
        };
        let label = w.label();
        let Some((path, _)) = pool::pools(Path::new(SHM)).into_iter().find(|(_, creator)| *creator == pid) else {
            return;
        };
        let Ok(usage) = pool::read(&path) else { return };
        self.dead_holders.retain(|reader, _| usage.readers.contains(reader));
        for reader in usage.readers {
            if freight::clock::process_alive(reader) {
                continue;
            }
            let since = *self.dead_holders.entry(reader).or_insert(now);
            let note = format!("{label}'s pool: dead reader {reader} still holds a block");
            if now - since > DEAD_HOLD_LIMIT && !self.device.late.iter().any(|l| l.starts_with(&note)) {
                eprintln!("soak: {note} after {} s", DEAD_HOLD_LIMIT.as_secs());
                self.device.late.push(format!("{note} {:.1} s after it was first seen", (now - since).as_secs_f64()));
            }
        }
    }

    fn outcome(self, seed: u64, args: &SoakArgs, phases: Phases) -> Outcome {
        let losses = self.ledger.losses(None);
        let mut topologies = Vec::new();
        for t in Topology::ALL {
            let mut row = TopologyRow {
                topology: t,
                published: 0,
                queue_full: 0,
                dds_timeout: 0,
                unmatched: 0,
                pool_exhausted: 0,
                loans: 0,
                copies: 0,
                bytes: 0,
                largest: 0,
                subscriptions: Vec::new(),
                lost: losses.iter().filter(|l| l.topology == t).map(|l| l.count()).sum(),
                wrong: self.ledger.faults_by_topology.get(&t).copied().unwrap_or(0),
            };
            for ((_, _), p) in self.ledger.pubs.range((t, 0)..=(t, u32::MAX)) {
                let s = &p.stats;
                row.published += s.published;
                row.queue_full += s.queue_full;
                row.dds_timeout += s.dds_timeout;
                row.unmatched += s.unmatched;
                row.pool_exhausted += s.pool_exhausted;
                row.loans += s.loans;
                row.copies += s.copies;
                row.bytes += s.bytes;
                row.largest = row.largest.max(s.max_size);
            }
            // In the order of the workers, over their incarnations.
            let mut subs: BTreeMap<(usize, &str), SubscriptionRow> = BTreeMap::new();
            for life in self.ledger.subs.values().filter(|l| l.topology == t) {
                let name = sub_name(&self.fleet, life.worker, &life.name);
                let r = subs.entry((life.worker, &life.name)).or_insert_with(|| SubscriptionRow {
                    received_in_warmup: self.warm_received.get(&name).copied().unwrap_or(0),
                    name,
                    received: 0,
                    bytes: 0,
                    unusable_at_join: 0,
                    host_at_join: 0,
                });
                r.received += life.stats.received;
                r.bytes += life.stats.bytes;
                r.unusable_at_join += life.stats.unusable_at_join;
                r.host_at_join += life.stats.host_at_join;
            }
            row.subscriptions = subs.into_values().collect();
            topologies.push(row);
        }
        let workers: Vec<WorkerSample> = self
            .samples
            .0
            .iter()
            .filter_map(|(key, (label, fds_a, a))| {
                let (_, fds_b, b) = self.samples.1.get(key)?;
                let baseline = self.baseline.get(key).map(|(_, fds, mem)| (*fds, *mem));
                let witness = self.fleet.workers[key.0].witness;
                Some(WorkerSample { worker: label.clone(), witness, fds: (*fds_a, *fds_b), a: *a, b: *b, baseline })
            })
            .collect();
        let checks = verdict::checks(&Evidence {
            survivors: &self.survivors,
            counts: &self.counts,
            ledger: &self.ledger,
            topologies: &topologies,
            losses: &losses,
            files: &self.files,
            workers: &workers,
            device: &self.device,
            cold: &self.cold,
        });
        let notes = if losses.iter().any(|l| l.note == Some(NOT_CONNECTED)) {
            vec![format!("{NOT_CONNECTED}: {NOT_CONNECTED_WHY}")]
        } else {
            Vec::new()
        };
        Outcome {
            seed,
            duration_s: args.duration.as_secs_f64(),
            processes: args.processes,
            phases,
            topologies,
            chaos: self.counts,
            files: self.files,
            workers,
            device: self.device,
            losses,
            faults: self.ledger.faults,
            errors: self.ledger.errors,
            survivors: self.survivors,
            checks,
            notes,
        }
    }
}

/// A subscription's name over incarnations: `worker/subscription`.
fn sub_name(fleet: &Fleet, worker: usize, name: &str) -> String {
    format!("{}/{name}", fleet.workers[worker].name)
}

fn count(dir: &str) -> usize {
    resources::count_files(Path::new(dir)).unwrap_or(0)
}
