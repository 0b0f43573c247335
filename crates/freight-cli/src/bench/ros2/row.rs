//! Running the rows of `freight bench ros2`: a subscriber process and a publisher process per
//! row, each pinned to its CPU, their stdout read line by line with every wait bounded.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::stats::percentile;
use super::super::sys::{lines_of, pin_current_thread, run_bounded, tail_of, CpuPlan};
use super::namespace::loopback_bytes;
use super::report::{Measured, Outcome, Row};
use super::{
    BenchError, MessageKind, Plan, Stack, FREIGHT_PY_SCRIPT, PROTOCOL_SCRIPT, STOCK_ENV_REMOVED, STOCK_SCRIPT,
};
use crate::private_dir::PrivateDir;
use crate::stop;

/// How long a peer may take to say READY (rclpy's import and init take seconds on a busy
/// machine).
const START_LIMIT: Duration = Duration::from_secs(60);
/// A row's hard limit beyond its measuring time: the handshake, the warm-up, the stop.
const ROW_SLACK: Duration = Duration::from_secs(150);
/// How long the subscriber may take to report once the publisher has.
const REPORT_LIMIT: Duration = Duration::from_secs(30);
/// Keep this much of a peer's stderr for the failure message.
const STDERR_KEEP: usize = 2000;

/// Measures every (message, stack) row of `plan`, printing progress to stderr.
pub fn run_all(plan: &Plan) -> Result<Vec<Row>, BenchError> {
    let work = WorkDir::create()?;
    let cpus = CpuPlan::detect();
    eprintln!(
        "bench ros2: {} rows in a private network namespace; publisher on CPU {}, subscriber on CPU {}; \
         {} warm-up, then {} round trips or {:.1} s per row",
        plan.messages.len() * plan.stacks.len(),
        cpu_name(cpus.publisher),
        cpu_name(cpus.subscriber(0)),
        plan.warmup,
        plan.count,
        plan.duration.as_secs_f64()
    );
    // One probe per stack: can its interpreter run its script's imports?
    let mut probes: HashMap<Stack, Result<String, String>> = HashMap::new();
    for &stack in &plan.stacks {
        let probe = probe(plan, stack, &work);
        match &probe {
            Ok(detail) => eprintln!("bench ros2: {}: {detail}", stack.label()),
            Err(why) => eprintln!("bench ros2: {}: not run: {why}", stack.label()),
        }
        probes.insert(stack, probe);
    }
    let mut rows = Vec::new();
    let total = plan.messages.len() * plan.stacks.len();
    for &message in &plan.messages {
        for &stack in &plan.stacks {
            let outcome = if stop::requested() {
                Outcome::NotRun("interrupted".into())
            } else {
                match &probes[&stack] {
                    Err(why) => Outcome::NotRun(why.clone()),
                    Ok(_) => {
                        eprint!(
                            "bench ros2: [{}/{total}] {} · {} ... ",
                            rows.len() + 1,
                            stack.label(),
                            message.label()
                        );
                        let outcome = measure(plan, stack, message, &cpus, &work, rows.len());
                        eprintln!("{}", outcome.brief());
                        outcome
                    }
                }
            };
            let detail = probes[&stack].as_ref().ok().cloned();
            rows.push(Row { stack, message, detail, outcome });
        }
    }
    Ok(rows)
}

fn cpu_name(cpu: Option<usize>) -> String {
    cpu.map_or("(any)".into(), |c| c.to_string())
}

/// A private directory for the embedded scripts, removed when dropped.
struct WorkDir(PrivateDir);

impl WorkDir {
    fn create() -> Result<WorkDir, BenchError> {
        let fail = |e: std::io::Error| {
            BenchError::new(
                format!(
                    "cannot write the peer scripts to a private directory under {}: {e}",
                    std::env::temp_dir().display()
                ),
                "check $TMPDIR",
            )
        };
        let dir = PrivateDir::new("freight-bench-ros2").map_err(fail)?;
        std::fs::write(dir.path().join("stock_rclpy.py"), STOCK_SCRIPT).map_err(fail)?;
        std::fs::write(dir.path().join("freight_py.py"), FREIGHT_PY_SCRIPT).map_err(fail)?;
        // Both import it from their own directory (the first entry of sys.path).
        std::fs::write(dir.path().join("bench_protocol.py"), PROTOCOL_SCRIPT).map_err(fail)?;
        Ok(WorkDir(dir))
    }

    fn script(&self, stack: Stack) -> Option<PathBuf> {
        match stack {
            Stack::Jazzy | Stack::Kilted => Some(self.0.path().join("stock_rclpy.py")),
            Stack::FreightPy => Some(self.0.path().join("freight_py.py")),
            Stack::FreightRs => None,
        }
    }
}

/// The command that starts one peer of `stack`, with the stack's environment, before its
/// protocol arguments.
fn base_command(plan: &Plan, stack: Stack, work: &WorkDir) -> Result<Command, String> {
    let mut cmd = match (plan.interpreter(stack), work.script(stack)) {
        (Some(python), Some(script)) => {
            let mut cmd = Command::new(python);
            cmd.arg(script);
            cmd
        }
        _ => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the freight executable: {e}"))?;
            let mut cmd = Command::new(exe);
            cmd.args(["bench", "ros2-peer"]);
            cmd
        }
    };
    match stack {
        Stack::Jazzy | Stack::Kilted => {
            for var in STOCK_ENV_REMOVED {
                cmd.env_remove(var);
            }
        }
        // freight's peers are local-only; they must not read a DDS configuration either.
        Stack::FreightPy | Stack::FreightRs => {
            cmd.env_remove("CYCLONEDDS_URI");
        }
    }
    cmd.stdin(Stdio::null());
    Ok(cmd)
}

/// Checks that `stack` can run here and says what it runs on.
fn probe(plan: &Plan, stack: Stack, work: &WorkDir) -> Result<String, String> {
    let python = match plan.interpreter(stack) {
        None => return Ok(format!("freight {} (this binary)", env!("CARGO_PKG_VERSION"))),
        Some(p) => p,
    };
    let how = match stack {
        Stack::Jazzy => "--ros-jazzy PYTHON; scripts/install-deps.sh installs it (make test does)",
        Stack::Kilted => "--ros-kilted PYTHON; scripts/install-deps.sh installs it (make test does)",
        _ => "--python PYTHON or $FREIGHT_PYTHON; `make wheel` and pip install target/wheels/freight-*.whl",
    };
    if python.components().count() > 1 && !python.exists() {
        return Err(format!("{} does not exist (give {how})", python.display()));
    }
    let mut cmd = base_command(plan, stack, work)?;
    cmd.arg("probe");
    let out =
        run_bounded(cmd, START_LIMIT).map_err(|e| format!("cannot run {}: {e} (give {how})", python.display()))?;
    let text = String::from_utf8_lossy(&out.0);
    match text.lines().find_map(|l| l.strip_prefix("PROBE ")) {
        Some(detail) if out.1 => Ok(detail.trim().to_string()),
        _ => {
            let stderr = String::from_utf8_lossy(&out.2);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
            Err(format!("{} cannot run the {} peer: {last} (give {how})", python.display(), stack.as_str()))
        }
    }
}

/// One running peer process. Dropping it kills and reaps the process.
struct Peer {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    role: &'static str,
}

/// Why a peer did not say what was expected.
enum PeerFailure {
    TimedOut(String),
    Failed(String),
}

impl Peer {
    fn start(mut cmd: Command, role: &'static str, cpu: Option<usize>) -> Result<Peer, PeerFailure> {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: pin_current_thread fills a cpu_set_t on the
        // stack and makes one sched_setaffinity system call; it neither allocates nor locks.
        // The pinning is inherited by every thread the peer starts.
        unsafe {
            cmd.pre_exec(move || {
                pin_current_thread(cpu);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| PeerFailure::Failed(format!("cannot start the {role}: {e}")))?;
        let lines = lines_of(child.stdout.take().expect("stdout is piped"));
        let stderr = tail_of(child.stderr.take().expect("stderr is piped"), STDERR_KEEP);
        Ok(Peer { child, lines, stderr, role })
    }

    /// The rest of the line that starts with `prefix`, waiting up to `limit`. An `ERROR` line,
    /// an exit, the limit or Ctrl-C end the wait with the reason.
    fn expect(&mut self, prefix: &str, limit: Duration) -> Result<String, PeerFailure> {
        let end = Instant::now() + limit;
        loop {
            if stop::requested() {
                return Err(PeerFailure::Failed("interrupted".into()));
            }
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix).and_then(|r| r.strip_prefix(' ').or(Some(r))) {
                        return Ok(rest.to_string());
                    }
                    if let Some(what) = line.strip_prefix("ERROR ") {
                        let what = format!("{}: {what}", self.role);
                        return Err(if what.contains("timed out") {
                            PeerFailure::TimedOut(what)
                        } else {
                            PeerFailure::Failed(what)
                        });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    // Let the stderr reader catch up with the process's last words.
                    std::thread::sleep(Duration::from_millis(100));
                    let stderr = self.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
                    return Err(PeerFailure::Failed(format!(
                        "the {} exited ({status}) before {prefix}: {last}",
                        self.role
                    )));
                }
                Err(RecvTimeoutError::Timeout) if Instant::now() > end => {
                    return Err(PeerFailure::TimedOut(format!(
                        "the {} did not say {prefix} within {:.0} s; killed",
                        self.role,
                        limit.as_secs_f64()
                    )));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // A peer that reported has exited or is about to: give it a moment, then kill.
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A unique topic per row: this process and the row index.
fn topic(index: usize) -> String {
    format!("/freight_bench_ros2_{}_{index}", std::process::id())
}

/// Measures one row.
fn measure(plan: &Plan, stack: Stack, message: MessageKind, cpus: &CpuPlan, work: &WorkDir, index: usize) -> Outcome {
    match measure_row(plan, stack, message, cpus, work, index) {
        Ok(m) => Outcome::Measured(m),
        Err(PeerFailure::TimedOut(what)) => Outcome::TimedOut(what),
        Err(PeerFailure::Failed(what)) => Outcome::Failed(what),
    }
}

fn measure_row(
    plan: &Plan,
    stack: Stack,
    message: MessageKind,
    cpus: &CpuPlan,
    work: &WorkDir,
    index: usize,
) -> Result<Measured, PeerFailure> {
    let topic = topic(index);
    let command = |role: &str| -> Result<Command, PeerFailure> {
        let mut cmd = base_command(plan, stack, work).map_err(PeerFailure::Failed)?;
        cmd.args([role, &topic]).args(message.peer_args()).args([
            "--warmup",
            &plan.warmup.to_string(),
            "--count",
            &plan.count.to_string(),
            "--duration",
            &plan.duration.as_secs_f64().to_string(),
        ]);
        Ok(cmd)
    };
    let row_end = Instant::now() + START_LIMIT * 2 + plan.duration + ROW_SLACK;
    let loopback_before = loopback_bytes();
    let mut sub = Peer::start(command("sub")?, "subscriber", cpus.subscriber(0))?;
    sub.expect("READY", START_LIMIT)?;
    let mut publisher = Peer::start(command("pub")?, "publisher", cpus.publisher)?;
    publisher.expect("READY", START_LIMIT)?;
    let result = publisher.expect("RESULT", row_end.saturating_duration_since(Instant::now()))?;
    let samples = sub.expect("SAMPLES", REPORT_LIMIT)?;
    let bad_json =
        |what: &str, e: serde_json::Error| PeerFailure::Failed(format!("the {what} report is not JSON: {e}"));
    let result: serde_json::Value = serde_json::from_str(&result).map_err(|e| bad_json("publisher's", e))?;
    let samples: serde_json::Value = serde_json::from_str(&samples).map_err(|e| bad_json("subscriber's", e))?;
    let round_trips = result["round_trips"].as_u64().unwrap_or(0);
    let elapsed_ns = result["elapsed_ns"].as_u64().unwrap_or(0);
    let latency_ns: Vec<u64> =
        samples["latency_ns"].as_array().map(|a| a.iter().filter_map(|v| v.as_u64()).collect()).unwrap_or_default();
    drop((publisher, sub));
    let loopback = loopback_before.zip(loopback_bytes()).map(|(a, b)| b.saturating_sub(a));
    summarize(latency_ns, round_trips, elapsed_ns).map(|m| Measured { loopback_bytes: loopback, ..m })
}

/// The row's statistics; a row without samples failed.
fn summarize(latency_ns: Vec<u64>, round_trips: u64, elapsed_ns: u64) -> Result<Measured, PeerFailure> {
    let mut sorted = latency_ns.clone();
    sorted.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let (Some(p50), Some(p99), Some(&max)) = (percentile(&sorted, 50.0), percentile(&sorted, 99.0), sorted.last())
    else {
        return Err(PeerFailure::Failed("the subscriber measured no message".into()));
    };
    if round_trips != sorted.len() as u64 {
        return Err(PeerFailure::Failed(format!(
            "the publisher counted {round_trips} round trips, the subscriber {} latencies",
            sorted.len()
        )));
    }
    let frames_per_s = if elapsed_ns > 0 { round_trips as f64 / (elapsed_ns as f64 / 1e9) } else { 0.0 };
    Ok(Measured {
        p50_ms: ms(p50),
        p99_ms: ms(p99),
        max_ms: ms(max),
        frames_per_s,
        round_trips,
        elapsed_ns,
        loopback_bytes: None,
        latency_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_summary_uses_nearest_rank_and_counts_round_trips() {
        let m = summarize((1..=100).map(|i| i * 1_000_000).collect(), 100, 2_000_000_000).ok().unwrap();
        assert_eq!(m.p50_ms, 50.0);
        assert_eq!(m.p99_ms, 99.0);
        assert_eq!(m.max_ms, 100.0);
        assert_eq!(m.frames_per_s, 50.0);
        assert!(summarize(vec![], 0, 1).is_err());
        assert!(summarize(vec![1, 2], 3, 1).is_err());
    }
}
