//! The verdict: every check of the soak (see the module above for what each means), from
//! what the controller gathered.

use super::ledger::{Ledger, Loss};
use super::protocol::Fault;
use super::report::{ChaosCounts, Check, DeviceHolds, Files, TopologyRow, WorkerSample};
use super::{ANON_TOLERANCE_KIB, DEAD_HOLD_LIMIT, FD_TOLERANCE, SHM_FILE_TOLERANCE};

/// Failures shown in a check's line; the JSON has all of them.
const SHOWN: usize = 5;

/// What the checks look at.
pub struct Evidence<'a> {
    /// Failures of the processes themselves.
    pub survivors: &'a [String],
    /// What the chaos did.
    pub counts: &'a ChaosCounts,
    /// Everything the workers reported.
    pub ledger: &'a Ledger,
    /// Traffic per topology.
    pub topologies: &'a [TopologyRow],
    /// Owed messages that did not arrive.
    pub losses: &'a [Loss],
    /// Shared-memory files.
    pub files: &'a Files,
    /// Fds and memory of the workers sampled at A and B.
    pub workers: &'a [WorkerSample],
    /// Fake-device pools.
    pub device: &'a DeviceHolds,
    /// Subscriptions that received nothing in the warm-up.
    pub cold: &'a [String],
}

/// Every check, in the order the report lists them.
pub fn checks(e: &Evidence<'_>) -> Vec<Check> {
    let received: u64 = e.topologies.iter().flat_map(|t| &t.subscriptions).map(|s| s.received).sum();
    let c = e.counts;
    vec![
        check(
            "survivors",
            e.survivors.to_vec(),
            format!("{} kills, {} restarts, {} stops; no other process died or stalled", c.kills, c.restarts, c.stops),
        ),
        check("errors", errors(e.ledger), "none".into()),
        check("loss", losses(e.losses), format!("every owed message arrived ({received} received)")),
        check("order", faults(e.ledger, &[Fault::Order]), "increasing, each once".into()),
        check(
            "bytes",
            faults(e.ledger, &[Fault::WrongBytes, Fault::Stale]),
            format!("{received} messages verified byte for byte, none stale"),
        ),
        check("path", faults(e.ledger, &[Fault::Path]), "every message by its topology's transport and memory".into()),
        files(e.files),
        fds(e.workers),
        rss(e.workers),
        device_holds(e.device),
        traffic(e.topologies, e.cold),
    ]
}

fn check(name: &'static str, failures: Vec<String>, ok: String) -> Check {
    let passed = failures.is_empty();
    let detail = if passed {
        ok
    } else {
        let mut s = failures.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ");
        if failures.len() > SHOWN {
            s += &format!("; and {} more (see the JSON)", failures.len() - SHOWN);
        }
        s
    };
    Check { name, passed, detail }
}

fn errors(ledger: &Ledger) -> Vec<String> {
    if ledger.error_count == 0 {
        return Vec::new();
    }
    let mut v = vec![format!("{} error(s)", ledger.error_count)];
    v.extend(ledger.errors.iter().cloned());
    v
}

fn losses(losses: &[Loss]) -> Vec<String> {
    losses
        .iter()
        .map(|l| {
            let ranges: Vec<String> =
                l.missing.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}..={b}") }).collect();
            let note = l.note.map_or_else(String::new, |n| format!(" ({n}: see the note)"));
            format!(
                "{} missed {} of {} ({}){note}",
                l.subscription,
                ranges.join(", "),
                l.publisher,
                l.topology.as_str()
            )
        })
        .collect()
}

fn faults(ledger: &Ledger, kinds: &[Fault]) -> Vec<String> {
    let n: u64 = kinds.iter().map(|k| ledger.fault_counts.get(k).copied().unwrap_or(0)).sum();
    if n == 0 {
        return Vec::new();
    }
    let mut v = vec![format!("{n} message(s)")];
    let listed = ledger.faults.iter().filter(|f| kinds.contains(&f.fault));
    v.extend(listed.map(|f| format!("{}: {}", f.subscription, f.what)));
    v
}

fn files(f: &Files) -> Check {
    let mut failures = Vec::new();
    let grew = |before: usize, after: usize| after > before + SHM_FILE_TOLERANCE;
    if grew(f.shm_baseline, f.shm_end) {
        failures.push(format!("/dev/shm: {} files after the warm-up, {} at the end", f.shm_baseline, f.shm_end));
    }
    if grew(f.iceoryx2_baseline, f.iceoryx2_end) {
        failures.push(format!(
            "/tmp/iceoryx2: {} files after the warm-up, {} at the end",
            f.iceoryx2_baseline, f.iceoryx2_end
        ));
    }
    if !f.left_after_exit.is_empty() {
        failures.push(format!(
            "{} file(s) left after every worker exited: {}",
            f.left_after_exit.len(),
            f.left_after_exit.join(", ")
        ));
    }
    if let (Some(a), Some(b)) = (f.remote_a, f.remote_b) {
        if grew(a.0, b.0) || grew(a.1, b.1) {
            failures.push(format!("the other host: (/dev/shm, /tmp/iceoryx2) files {a:?} at A, {b:?} at B"));
        }
    }
    let ok = format!(
        "/dev/shm {} -> {}, /tmp/iceoryx2 {} -> {} (tolerance {SHM_FILE_TOLERANCE}); none left after exit",
        f.shm_baseline, f.shm_end, f.iceoryx2_baseline, f.iceoryx2_end
    );
    check("shm-files", failures, ok)
}

fn fds(workers: &[WorkerSample]) -> Check {
    let mut failures: Vec<String> = workers
        .iter()
        .filter(|w| w.fds.1 > w.fds.0 + FD_TOLERANCE)
        .map(|w| format!("{}: {} fds at A, {} at B", w.worker, w.fds.0, w.fds.1))
        .collect();
    failures.extend(workers.iter().filter_map(|w| {
        let (before, _) = w.baseline?;
        (w.fds.1 > before + FD_TOLERANCE)
            .then(|| format!("{}: {before} fds after the warm-up, {} after the chaos", w.worker, w.fds.1))
    }));
    let whole = workers.iter().filter(|w| w.baseline.is_some()).count();
    let ok = format!(
        "{} workers from A to B, {whole} of them also since the warm-up: no growth beyond {FD_TOLERANCE}",
        workers.len()
    );
    check("fds", failures, ok)
}

fn rss(workers: &[WorkerSample]) -> Check {
    let mut failures: Vec<String> = workers
        .iter()
        .filter(|w| w.b.anon_kib > w.a.anon_kib + ANON_TOLERANCE_KIB)
        .map(|w| format!("{}: RssAnon {} KiB at A, {} at B", w.worker, w.a.anon_kib, w.b.anon_kib))
        .collect();
    // Only a witness's heap is comparable across the chaos: a publisher's keeps what the
    // allocator retained of the chaos's larger copies, which the steady schedule never makes.
    let witnesses = || workers.iter().filter(|w| w.witness);
    failures.extend(witnesses().filter_map(|w| {
        let (_, before) = w.baseline?;
        (w.b.anon_kib > before.anon_kib + ANON_TOLERANCE_KIB).then(|| {
            format!("{}: RssAnon {} KiB after the warm-up, {} after the chaos", w.worker, before.anon_kib, w.b.anon_kib)
        })
    }));
    let ok = format!(
        "{} workers from A to B, {} witness(es) also since the warm-up: RssAnon growth within {} MiB",
        workers.len(),
        witnesses().filter(|w| w.baseline.is_some()).count(),
        ANON_TOLERANCE_KIB >> 10
    );
    check("rss", failures, ok)
}

fn device_holds(d: &DeviceHolds) -> Check {
    let mut failures = d.late.clone();
    failures.extend(d.unreadable.iter().cloned());
    if d.blocks_in_use > 0 || d.holds > 0 {
        let holders: Vec<String> = d.holders.iter().map(|(who, n)| format!("{n} by {who}")).collect();
        failures.push(format!(
            "{} block(s) in use, {} hold(s), in {} pool(s) at the end; held {}",
            d.blocks_in_use,
            d.holds,
            d.pools,
            holders.join(", ")
        ));
    }
    let ok = format!(
        "{} pool(s) empty at the end; dead readers' holds came back within {} s",
        d.pools,
        DEAD_HOLD_LIMIT.as_secs()
    );
    check("device-holds", failures, ok)
}

fn traffic(topologies: &[TopologyRow], cold: &[String]) -> Check {
    let mut failures: Vec<String> = cold.iter().map(|c| format!("{c} received nothing in the warm-up")).collect();
    for s in topologies.iter().flat_map(|t| &t.subscriptions).filter(|s| s.received == 0) {
        failures.push(format!("{} received nothing", s.name));
    }
    check("traffic", failures, "every subscription received, in the warm-up and overall".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_fails_with_its_first_failures_and_a_count_of_the_rest() {
        let ok = check("x", Vec::new(), "fine".into());
        assert!(ok.passed && ok.detail == "fine");
        let failures: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
        let bad = check("x", failures, "fine".into());
        assert!(!bad.passed);
        assert_eq!(bad.detail, "f0; f1; f2; f3; f4; and 3 more (see the JSON)");
    }

    #[test]
    fn files_fail_when_they_grow_or_stay_behind() {
        let base = Files { shm_baseline: 27, shm_end: 27, iceoryx2_baseline: 64, iceoryx2_end: 64, ..Files::default() };
        assert!(files(&base).passed);
        assert!(!files(&Files { shm_end: 28 + SHM_FILE_TOLERANCE, ..base.clone() }).passed);
        assert!(!files(&Files { left_after_exit: vec!["/dev/shm/x".into()], ..base.clone() }).passed);
        assert!(!files(&Files { remote_a: Some((4, 12)), remote_b: Some((9, 12)), ..base }).passed);
    }
}
