//! The soak's verdict: the table on stdout and the outcome its JSON file holds.

use std::fmt::Write as _;

use serde::Serialize;

use super::ledger::{FaultRecord, Loss};
use super::protocol::Topology;
use crate::bench::args::format_size;
use crate::resources::Memory;

/// Everything a soak found.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The seed that replays it.
    pub seed: u64,
    /// `--duration`, seconds.
    pub duration_s: f64,
    /// Worker processes.
    pub processes: usize,
    /// How long each phase took, seconds.
    pub phases: Phases,
    /// Per topology.
    pub topologies: Vec<TopologyRow>,
    /// What the chaos did.
    pub chaos: ChaosCounts,
    /// Shared-memory files.
    pub files: Files,
    /// Open fds and memory of each worker at the settle samples.
    pub workers: Vec<WorkerSample>,
    /// Fake-device pools.
    pub device: DeviceHolds,
    /// Owed messages that did not arrive.
    pub losses: Vec<Loss>,
    /// Wrong messages (the first 50).
    pub faults: Vec<FaultRecord>,
    /// Unexpected errors (the first 50).
    pub errors: Vec<String>,
    /// What went wrong with the worker processes themselves.
    pub survivors: Vec<String>,
    /// The verdict, check by check.
    pub checks: Vec<Check>,
    /// What the notes of losses mean.
    pub notes: Vec<String>,
}

/// Phase lengths, seconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Phases {
    /// Start and warm-up.
    pub warmup_s: f64,
    /// Chaos.
    pub chaos_s: f64,
    /// Recovery, settle, finish and exit.
    pub tail_s: f64,
}

/// What the chaos did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ChaosCounts {
    /// SIGKILLs.
    pub kills: u64,
    /// SIGSTOPs (each followed by a SIGCONT).
    pub stops: u64,
    /// Incarnations started after the first.
    pub restarts: u64,
    /// Workers that died without being killed.
    pub crashes: u64,
}

/// One topology's traffic.
#[derive(Debug, Clone, Serialize)]
pub struct TopologyRow {
    /// The topology.
    pub topology: Topology,
    /// Messages delivered to every subscription, over all publisher incarnations.
    pub published: u64,
    /// Messages a full reliable queue refused.
    pub queue_full: u64,
    /// DDS writes that timed out.
    pub dds_timeout: u64,
    /// Messages sent while no DDS reader was matched.
    pub unmatched: u64,
    /// Loans an exhausted device pool refused.
    pub pool_exhausted: u64,
    /// Messages written into loans.
    pub loans: u64,
    /// Messages sent with `publish_copy`.
    pub copies: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// The largest message sent.
    pub largest: u64,
    /// Per subscription name, over all its incarnations.
    pub subscriptions: Vec<SubscriptionRow>,
    /// Owed messages missing.
    pub lost: u64,
    /// Wrong messages (any fault).
    pub wrong: u64,
}

/// One subscription's traffic, over all its incarnations.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionRow {
    /// `worker/subscription`.
    pub name: String,
    /// Messages received and verified.
    pub received: u64,
    /// During warm-up.
    pub received_in_warmup: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Device messages without the host copy, taken right after joining.
    pub unusable_at_join: u64,
    /// Device loans taken as the host copy right after joining.
    pub host_at_join: u64,
}

/// Shared-memory files of this host (and of the other, at the settle samples).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Files {
    /// Files in /dev/shm after the warm-up.
    pub shm_baseline: usize,
    /// Once settled, every worker alive, publishers stopped.
    pub shm_end: usize,
    /// After every worker exited.
    pub shm_after_exit: usize,
    /// Files under /tmp/iceoryx2, as above.
    pub iceoryx2_baseline: usize,
    /// See `iceoryx2_baseline`.
    pub iceoryx2_end: usize,
    /// See `iceoryx2_baseline`.
    pub iceoryx2_after_exit: usize,
    /// Bytes /dev/shm's files occupy, after the warm-up and at the end.
    pub shm_bytes_baseline: u64,
    /// See `shm_bytes_baseline`.
    pub shm_bytes_end: u64,
    /// The other host's /dev/shm and /tmp/iceoryx2 files at settle sample A.
    pub remote_a: Option<(usize, usize)>,
    /// At sample B.
    pub remote_b: Option<(usize, usize)>,
    /// Files left in /dev/shm and /tmp/iceoryx2 after every worker exited (but iceoryx2's
    /// global management file).
    pub left_after_exit: Vec<String>,
}

/// One worker at the two settle samples.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerSample {
    /// `name#incarnation`.
    pub worker: String,
    /// A witness: never killed.
    pub witness: bool,
    /// Open fds at A and B.
    pub fds: (usize, usize),
    /// Memory at A.
    pub a: Memory,
    /// Memory at B.
    pub b: Memory,
    /// Fds and memory after the warm-up, when this incarnation lived through the whole chaos.
    pub baseline: Option<(usize, Memory)>,
}

/// Fake-device pools at the end, and dead readers' holds during the soak.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceHolds {
    /// Pools found at the end.
    pub pools: usize,
    /// Blocks in use at the end, over all pools.
    pub blocks_in_use: usize,
    /// Holds at the end.
    pub holds: u64,
    /// Who holds them, and how many.
    pub holders: std::collections::BTreeMap<String, u64>,
    /// Holds of dead readers that stayed longer than the limit.
    pub late: Vec<String>,
    /// Why a pool could not be read, if one could not.
    pub unreadable: Vec<String>,
    /// Loans of a publisher that had died (its pool removed) that reached a subscription
    /// taking device memory as the host copy: freight's documented fallback.
    pub host_fallbacks: u64,
    /// Loans that reached a subscription taking device memory as the host copy while
    /// their publisher lived, shortly after the subscription was stopped: a reader that
    /// holds more than its share of the pool gets host copies (freight's documented rule).
    pub share_fallbacks: u64,
}

/// One check of the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Its name.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// What was measured, or what failed.
    pub detail: String,
}

/// The report as text.
pub fn table(o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "freight bench soak: {:.0} s, seed {}, {} worker processes (warm-up {:.1} s, chaos {:.1} s, settle and checks {:.1} s)\n",
        o.duration_s, o.seed, o.processes, o.phases.warmup_s, o.phases.chaos_s, o.phases.tail_s
    );
    let _ = writeln!(
        s,
        "{:<8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10} {:>10}  {:<28} {:>5} {:>6}",
        "topology",
        "published",
        "excused",
        "loans",
        "copies",
        "largest",
        "sent",
        "received",
        "subscription",
        "lost",
        "wrong"
    );
    for t in &o.topologies {
        let excused = t.queue_full + t.dds_timeout + t.unmatched;
        for (i, sub) in t.subscriptions.iter().enumerate() {
            let first = i == 0;
            let _ = writeln!(
                s,
                "{:<8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10} {:>10}  {:<28} {:>5} {:>6}",
                if first { t.topology.as_str() } else { "" },
                if first { t.published.to_string() } else { String::new() },
                if first { excused.to_string() } else { String::new() },
                if first { t.loans.to_string() } else { String::new() },
                if first { t.copies.to_string() } else { String::new() },
                if first { format_size(t.largest) } else { String::new() },
                if first { format_size(t.bytes) } else { String::new() },
                sub.received,
                sub.name,
                if first { t.lost.to_string() } else { String::new() },
                if first { t.wrong.to_string() } else { String::new() },
            );
        }
    }
    let (qf, dt, um, ex): (u64, u64, u64, u64) = o.topologies.iter().fold((0, 0, 0, 0), |a, t| {
        (a.0 + t.queue_full, a.1 + t.dds_timeout, a.2 + t.unmatched, a.3 + t.pool_exhausted)
    });
    let unusable: u64 = o.topologies.iter().flat_map(|t| &t.subscriptions).map(|s| s.unusable_at_join).sum();
    let host_at_join: u64 = o.topologies.iter().flat_map(|t| &t.subscriptions).map(|s| s.host_at_join).sum();
    let c = &o.chaos;
    let _ = writeln!(
        s,
        "\nchaos:    {} kills ({} restarts), {} stops, {} crashes",
        c.kills, c.restarts, c.stops, c.crashes
    );
    let _ = writeln!(
        s,
        "excused:  {qf} full reliable queues, {dt} DDS write timeouts, {um} DDS writes with no reader; {ex} loans \
         refused by an exhausted device pool"
    );
    let _ = writeln!(
        s,
        "expected: device loans as host copies: {} from dead \
         publishers, {} at a stopped subscription over its share of the pool, {host_at_join} (and {unusable} \
         unusable) at a subscription that joined between loan and publish",
        o.device.host_fallbacks, o.device.share_fallbacks
    );
    let f = &o.files;
    let _ = writeln!(
        s,
        "files:    /dev/shm {} after warm-up, {} settled, {} after exit ({} -> {}); /tmp/iceoryx2 {} -> {} -> {}",
        f.shm_baseline,
        f.shm_end,
        f.shm_after_exit,
        format_size(f.shm_bytes_baseline),
        format_size(f.shm_bytes_end),
        f.iceoryx2_baseline,
        f.iceoryx2_end,
        f.iceoryx2_after_exit
    );
    if let (Some(a), Some(b)) = (f.remote_a, f.remote_b) {
        let _ = writeln!(s, "          other host: /dev/shm {} -> {}, /tmp/iceoryx2 {} -> {}", a.0, b.0, a.1, b.1);
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>13} {:>21} {:>21} {:>21}",
        "worker", "fds (base) A->B", "VmRSS MiB A->B", "RssAnon MiB A->B", "RssShmem MiB A->B"
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    for w in &o.workers {
        let _ = writeln!(
            s,
            "{:<16} {:>6}{:>3}->{:<3} {:>10.1}->{:<10.1} {:>10.1}->{:<10.1} {:>10.1}->{:<10.1}",
            w.worker,
            w.baseline.map_or_else(String::new, |(fds, _)| format!("({fds})")),
            w.fds.0,
            w.fds.1,
            mib(w.a.rss_kib),
            mib(w.b.rss_kib),
            mib(w.a.anon_kib),
            mib(w.b.anon_kib),
            mib(w.a.shmem_kib),
            mib(w.b.shmem_kib)
        );
    }
    let _ = writeln!(s, "\nchecks");
    for c in &o.checks {
        let _ = writeln!(s, "  {}  {:<13} {}", if c.passed { "PASS" } else { "FAIL" }, c.name, c.detail);
    }
    for note in &o.notes {
        let _ = writeln!(s, "\nnote: {note}");
    }
    let failed = o.checks.iter().filter(|c| !c.passed).count();
    let _ = writeln!(
        s,
        "\n{}",
        if failed == 0 { "soak passed".to_string() } else { format!("soak FAILED: {failed} check(s)") }
    );
    s
}
