//! `freight bench soak`: a chaos soak of freight's planes, memory backends and recovery.
//!
//! # The graph
//!
//! Worker processes (this binary, the hidden `freight bench soak-worker`) publish and
//! subscribe on four topics, one per topology ([`protocol::Topology`]):
//!
//! | topology | publisher | subscriptions | QoS |
//! |---|---|---|---|
//! | `shm` | `shm-pub` | `shm-sub` in another process, and a *witness* per `--processes` above 7 | reliable, keep last 4 |
//! | `intra` | a thread of `intra` | a thread of the same process | reliable, keep last 4 |
//! | `device` | `device-pub`, lending from the fake-device pool | `device-sub`: one subscription that takes `fake-device` memory, one that takes host copies | reliable, keep last 4 |
//! | `dds` | `dds-pub` | `dds-sub` on another "host": a private /dev/shm and /tmp/iceoryx2, reached over DDS only | reliable, keep all |
//!
//! A witness (`shm-witness-1`, ...) is a shared-memory subscriber that the chaos stops but
//! never kills: it lives through every restart of its peers, so what their churn leaks in a
//! survivor (connections, mappings, fds) shows in its numbers from the warm-up to the end.
//!
//! Publishers send 100 messages a second (DDS 50) of changing sizes up to 64 MiB
//! ([`schedule`]), half written into loans, half sent with `publish_copy`. Each payload
//! carries its publisher, incarnation, sequence number, length, publish time and checksum in
//! a header, and a fill derived from them ([`payload`]): every subscription verifies every
//! byte of every message it takes.
//!
//! # Isolation
//!
//! The soak needs root. It re-executes itself under `unshare --net --mount` with fresh tmpfs
//! mounts on /dev/shm and /tmp/iceoryx2 (`bench/private_host.rs`): a network namespace with only a
//! loopback and shared memory nobody else uses, so that its file counts are its own and no
//! DDS traffic reaches the machine's interfaces. The `dds-sub` worker additionally gets a
//! mount namespace of its own, with its own tmpfs mounts: freight takes it for another host.
//! Everything disappears with the processes, even after `kill -9`.
//!
//! # The run
//!
//! `--duration` is the whole run. After the workers are ready, the publishers send the
//! steady schedule while the *warm-up* lasts (at least 3 s, until every subscription has
//! received), then the baseline is taken: files in /dev/shm and /tmp/iceoryx2, every
//! worker's open fds and memory. During *chaos* (all but the last [`tail`] of the run) the
//! controller (this process) picks, every 0.3 to 1.2 s, a random running worker and SIGKILLs
//! it (restarting it 0.1 to 1 s later, as the next incarnation) or SIGSTOPs it for 0.2 to
//! 2.5 s (shorter than DDS's 10 s lease, so a stopped peer is never expired) and then
//! SIGCONTs it; at most two workers are down at once, and the first two actions are one kill
//! and one stop. The seed (`--seed`, else the clock) fixes every choice and is printed. Then
//! *recovery*: every stopped worker is continued and every killed one restarted. *Settle*:
//! the steady schedule again; after [`SETTLE_WARM`], once every subscription has received,
//! every worker's open fds and memory are sampled (A), and again [`settle_span`] later (B:
//! 3 s in a 60 s run, a minute in an hour's), each sample spanning a second. *Finish*:
//! publishers stop and report their last number, subscriptions drain and report, the device
//! pools are read, the files are counted, and every worker is told to exit. The tail is 13 s
//! of a 60 s run.
//!
//! Counts in the table are what each incarnation last reported (every 250 ms), summed: a
//! killed incarnation's last quarter second is missing from them, never from the checks.
//!
//! # Checks
//!
//! Each is reported PASS or FAIL by name; the exit status is 1 if any fails.
//!
//! * `survivors`: no worker process ended unless the controller killed it; every restart
//!   was ready within [`READY_LIMIT`]; every worker exited 0 when told to; no worker went
//!   silent for [`STALL_LIMIT`] while not stopped (a publisher blocked for good, a deadlock).
//! * `errors`: no worker met an error the soak does not expect: a failed loan (but an
//!   exhausted device pool), a publish error other than a full reliable queue, a DDS write
//!   timeout or no reader, a take error other than the one device message that a
//!   subscription joining between its loan and its publish may fail to take
//!   (`TakeError::Unusable`: no host copy was made for it; `TakeError::Import`: its block,
//!   not held for it, was already reused), counted.
//! * `loss`: no reliable message lost between live processes ([`accounting`] defines what
//!   a subscription is owed: gaps between what it received, the head when it was there
//!   before the publisher, everything of the settle phase; less what the publisher was
//!   told it could not deliver). The check also runs during the soak, two seconds behind.
//! * `order`: every subscription received each publisher incarnation's numbers in
//!   increasing order, each once.
//! * `bytes`: no wrong or stale bytes: every payload verified in full; its small fields
//!   match its header; no message published more than [`STALE_MARGIN`] before the
//!   subscription existed (a volatile subscription gets nothing older; the margin covers a
//!   publisher stopped between writing and publishing); each received message is checked
//!   again (header and 64 words) when the next one has arrived, before it is released, so
//!   memory reused while still lent is found.
//! * `path`: every message came the topology's way: `shm` over shared memory in `shm`,
//!   `intra` by pointer, `device` as `fake-device` memory for loans to the subscription that
//!   takes it and as host bytes otherwise, `dds` over the network as `cpu` bytes. A device
//!   loan may come as its host copy when its publisher has died (its pool file is gone) or
//!   the subscription joined between the loan and the publish: freight's documented
//!   fallback, counted, not failed.
//! * `shm-files`: files in this host's /dev/shm and /tmp/iceoryx2 once everything has
//!   settled (every worker alive, publishers stopped) are no more than at the baseline, plus
//!   [`SHM_FILE_TOLERANCE`]; the other host's do not grow from A to B.
//! * `fds`: no surviving worker has more than [`FD_TOLERANCE`] more open fds at B than at A,
//!   nor, if it lived through the whole chaos (a witness, or a worker the dice spared), than
//!   after the warm-up (a leak per restart of a peer).
//! * `rss`: no surviving worker's anonymous resident memory (`RssAnon`: heap, not the
//!   shared memory it maps) grows by more than [`ANON_TOLERANCE_KIB`] from A to B, nor a
//!   witness's from the warm-up to B (a publisher's heap keeps what the allocator retained
//!   of the chaos's large copies, so only a subscription's is comparable across it); VmRSS,
//!   which counts the shared memory a process touches, is reported. Each sample is the
//!   least of [`SAMPLE_READINGS`] readings over a second, so that a message alive at one
//!   reading (in `intra` the steady period's 64 MiB is heap) does not count as growth.
//! * `device-holds`: once the publishers stopped and the subscriptions dropped what they
//!   held, no block of any fake-device pool is in use and no reader holds one; during the
//!   soak, no hold of a dead reader outlives it by more than [`DEAD_HOLD_LIMIT`] while the
//!   pool's publisher runs (freight's reaper promises a second).
//! * `traffic`: every subscription received messages, during warm-up and in total.

mod accounting;
mod chaos;
mod controller;
mod fleet;
mod ledger;
mod payload;
mod pool;
mod protocol;
mod report;
mod rng;
mod schedule;
mod verdict;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::{check_output_path, BenchError};
pub use protocol::{Mode, Role};

/// Steady traffic after recovery before the first sample of fds and memory.
pub const SETTLE_WARM: Duration = Duration::from_secs(3);
/// Time allowed for recovery (every worker running again) and for the finish (stop,
/// drain, finish, exit) when nothing goes wrong.
const RECOVERY_AND_FINISH: Duration = Duration::from_secs(5);

/// Between the two samples of fds and memory: a twentieth of the run, from 3 s to a minute,
/// so that an hour's soak looks for slow leaks over a minute of steady traffic.
pub fn settle_span(duration: Duration) -> Duration {
    (duration / 20).clamp(Duration::from_secs(3), Duration::from_secs(60))
}

/// Readings of a worker's fds and memory that make one sample (A or B), the least of them
/// counting, and the time between two readings: a sample spans a second of traffic.
pub const SAMPLE_READINGS: u32 = 11;
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// The end of the run that is not chaos: recovery, settle with its two samples, and finish
/// (13 s of a 60 s run).
pub fn tail(duration: Duration) -> Duration {
    RECOVERY_AND_FINISH + SETTLE_WARM + settle_span(duration) + 2 * SAMPLE_INTERVAL * (SAMPLE_READINGS - 1)
}

/// The shortest `--duration`: warm-up, some chaos and the tail.
pub const MIN_DURATION: Duration = Duration::from_secs(20);
/// How long a (re)started worker may take to create its endpoints.
pub const READY_LIMIT: Duration = Duration::from_secs(20);
/// A running worker reports every 250 ms; silence this long is a stall.
pub const STALL_LIMIT: Duration = Duration::from_secs(5);
/// How much older than its subscription a message may be (longer than any SIGSTOP).
pub const STALE_MARGIN: Duration = Duration::from_secs(5);
/// How long a dead reader's device hold may stay while the pool's publisher runs.
pub const DEAD_HOLD_LIMIT: Duration = Duration::from_secs(2);
/// Files in /dev/shm or /tmp/iceoryx2 above the baseline that pass.
pub const SHM_FILE_TOLERANCE: usize = 0;
/// Open fds above the earlier sample that pass: a few for what a process opens for a moment
/// (a file it reads, a socket being replaced). A leak per message or per restart of a peer
/// shows as hundreds.
pub const FD_TOLERANCE: usize = 4;
/// Growth of `RssAnon` from A to B that passes, in KiB.
pub const ANON_TOLERANCE_KIB: u64 = 8 << 10;

/// Options of `freight bench soak`.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// The whole run, warm-up, chaos and the final checks included: seconds, or with a unit
    /// (90s, 10m, 1h). At least 20 s.
    #[arg(long, value_parser = parse_duration, default_value = "60s", value_name = "TIME")]
    pub duration: Duration,

    /// Worker processes: the graph needs 7; each one more is a witness, a shared-memory
    /// subscriber that is stopped but never killed (its fds are compared from the warm-up on).
    #[arg(long, default_value_t = 7, value_name = "N")]
    pub processes: usize,

    /// Seed of every random choice (victims, actions, pauses, message sizes) [default: from
    /// the clock; printed].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Internal: this process is the re-executed soak inside its namespaces.
    #[arg(long, hide = true)]
    pub inside_namespace: bool,
}

/// Arguments of the hidden `freight bench soak-worker`.
#[derive(Debug, Clone, Args)]
pub struct SoakWorkerArgs {
    /// What the worker does.
    #[arg(long, value_enum)]
    pub role: Role,
    /// Its name in reports (`shm-witness-1`).
    #[arg(long)]
    pub name: String,
    /// How many times it was restarted.
    #[arg(long, default_value_t = 0)]
    pub incarnation: u32,
    /// The run's seed.
    #[arg(long)]
    pub seed: u64,
    /// What to publish until told otherwise.
    #[arg(long, value_enum)]
    pub mode: Mode,
}

/// Parses `60`, `60s`, `10m`, `1h` or `1.5h` into a duration of at least [`MIN_DURATION`]
/// and at most a week.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    let secs = number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| n * scale)
        .ok_or_else(|| format!("`{text}` is not a duration; write e.g. 60s, 10m or 1h"))?;
    if secs < MIN_DURATION.as_secs_f64() || secs > 7.0 * 86_400.0 {
        return Err(format!(
            "`{text}` is out of range: the soak needs at least {} s (warm-up, chaos, settle) and at most a week",
            MIN_DURATION.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Entry point of `freight bench soak`. Outside the namespaces it checks the options and
/// re-executes itself; inside, it runs the soak and returns 0 when every check passed.
pub fn run(args: &SoakArgs) -> Result<ExitCode, BenchError> {
    if args.processes < fleet::GRAPH.len() {
        return Err(BenchError::new(
            format!("--processes {} is too few: the graph has {} workers", args.processes, fleet::GRAPH.len()),
            format!("give at least {} (more add witnesses: subscribers never killed)", fleet::GRAPH.len()),
        ));
    }
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    if !args.inside_namespace {
        return super::private_host::reexec(
            "freight bench soak",
            ", and its DDS pair on a second \"host\" (another mount namespace)",
        );
    }
    super::private_host::enter("freight bench soak")?;
    crate::stop::install();
    super::sys::quiet_iceoryx2_logs();
    let seed = args.seed.unwrap_or_else(|| rng::mix(freight::clock::monotonic_ns() ^ u64::from(std::process::id())));
    let outcome = controller::run(args, seed)?;
    super::sys::print_stdout(&report::table(&outcome));
    if let Some(path) = &args.json {
        crate::bench::report::write_json(path, &outcome)?;
        eprintln!("wrote {}", path.display());
    }
    let failed: Vec<&str> = outcome.checks.iter().filter(|c| !c.passed).map(|c| c.name).collect();
    if !failed.is_empty() {
        return Err(BenchError::new(
            format!("the soak failed: {}", failed.join(", ")),
            format!("see the checks above; `--seed {seed}` replays the same chaos"),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Entry point of the hidden `freight bench soak-worker`.
pub fn run_worker(args: &SoakWorkerArgs) -> ExitCode {
    super::sys::quiet_iceoryx2_logs();
    worker::run(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        for bad in ["5s", "", "h", "-60s", "soon", "9999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
