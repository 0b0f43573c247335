//! `freight bench paused`: a subscriber process stopped and continued (Ctrl-Z and `fg`, a
//! debugger's breakpoint, a frozen container) beside one that is not, stock rclpy against
//! freight's Python API in the same run (issue 21's experiment).
//!
//! # What is measured
//!
//! Per stack, three processes of [`PEER_SCRIPT`]: two subscribers, then a publisher of
//! `--bytes` (1 MiB) `std_msgs/UInt8MultiArray` messages at `--rate` (100 Hz) for
//! `--seconds` (8), all on rclpy's default profile (reliable, volatile, keep last 10). Once
//! the publisher has matched both, the second subscriber gets `SIGSTOP` after `--stop-after`
//! (2 s) and `SIGCONT` `--stop-for` (4 s) later. The row shows what the publisher published
//! (and its target), the publishes that raised, its slowest publish, what the subscriber never
//! stopped received, and what the stopped one received after it was continued — or the
//! exception that ended it.
//!
//! Stacks: `jazzy` and `kilted`, stock rclpy on its defaults (rmw_fastrtps_cpp) in
//! `.venv-ros-jazzy` / `.venv-ros-kilted`, with none of freight imported and the environment
//! less [`STOCK_ENV_REMOVED`]; `freight-py`, freight's Python API on its local plane. Everything
//! runs in a private network namespace (stock Fast DDS discovers by multicast), as
//! `freight bench ros2` does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::args::parse_seconds;
use super::python::StackInterpreters;
use super::ros2::namespace;
use super::ros2::STOCK_ENV_REMOVED;
use super::sys::{lines_of, tail_of};
use super::{check_output_path, BenchError};
use crate::private_dir::PrivateDir;
use crate::stop;

/// The publisher and subscriber script of every stack, embedded.
pub const PEER_SCRIPT: &str = include_str!("paused_peer.py");

const COMMAND: &str = "freight bench paused";
/// How long a process may take to start and match (rclpy's import and init are slow).
const START: Duration = Duration::from_secs(40);
/// Stderr kept per process, for the message of a failed row.
const STDERR_KEEP: usize = 2000;

/// A stack of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// stock rclpy, ROS 2 Jazzy defaults (Fast DDS 2.14).
    Jazzy,
    /// stock rclpy, ROS 2 Kilted defaults (Fast DDS 3.2).
    Kilted,
    /// freight's Python API, shared memory.
    FreightPy,
}

impl Stack {
    fn label(self) -> &'static str {
        match self {
            Stack::Jazzy => "stock rclpy Jazzy",
            Stack::Kilted => "stock rclpy Kilted",
            Stack::FreightPy => "freight Python",
        }
    }

    fn is_stock(self) -> bool {
        self != Stack::FreightPy
    }
}

/// Options of `freight bench paused`.
#[derive(Debug, Clone, Args)]
pub struct PausedArgs {
    /// Stacks, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "jazzy,freight-py")]
    pub stacks: Vec<Stack>,

    /// Seconds the publisher publishes.
    #[arg(long, value_parser = parse_seconds, default_value = "8", value_name = "SECS")]
    pub seconds: Duration,

    /// Messages a second.
    #[arg(long, default_value_t = 100.0, value_name = "HZ")]
    pub rate: f64,

    /// Payload bytes of a message.
    #[arg(long, default_value_t = 1 << 20, value_name = "N")]
    pub bytes: u64,

    /// Seconds after the publisher matched both subscribers when the second is stopped.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub stop_after: Duration,

    /// Seconds it stays stopped.
    #[arg(long, value_parser = parse_seconds, default_value = "4", value_name = "SECS")]
    pub stop_for: Duration,

    #[command(flatten)]
    pub interpreters: StackInterpreters,

    /// Also write the rows as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Internal: this process is the re-executed measurement inside its network namespace.
    #[arg(long, hide = true)]
    pub inside_namespace: bool,
}

/// What the publisher reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Published {
    pub published: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub slowest_ms: f64,
}

/// What a subscriber reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Received {
    pub received: u64,
    pub after_pause: u64,
    /// The exception that ended its loop, if one did.
    pub error: Option<String>,
}

/// One stack's row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub stack: Stack,
    /// Messages the publisher was to send (`rate` x `seconds`).
    pub target: u64,
    pub outcome: Result<Measured, String>,
}

/// A row that ran.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub publisher: Published,
    pub steady: Received,
    pub stopped: Received,
}

/// Entry point: outside the namespace it checks the options and re-executes itself under
/// `unshare --net`; inside, it measures every stack.
pub fn run(args: &PausedArgs) -> Result<ExitCode, BenchError> {
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        return Err(BenchError::new(format!("--rate {} is not a rate", args.rate), "give messages a second, e.g. 100"));
    }
    if args.bytes == 0 || args.bytes > 1 << 30 {
        return Err(BenchError::new(format!("--bytes {} is out of range", args.bytes), "give 1 to 1073741824"));
    }
    if args.stop_after + args.stop_for >= args.seconds {
        return Err(BenchError::new(
            "the subscriber would be continued after the publisher stopped",
            "make --stop-after plus --stop-for shorter than --seconds",
        ));
    }
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    if !args.inside_namespace {
        return namespace::reexec(COMMAND);
    }
    namespace::enter(COMMAND)?;
    stop::install();
    let dir = PrivateDir::new("freight-bench-paused").map_err(script_error)?;
    let script = dir.path().join("paused_peer.py");
    std::fs::write(&script, PEER_SCRIPT).map_err(script_error)?;
    let target = (args.rate * args.seconds.as_secs_f64()).round() as u64;
    let mut rows = Vec::new();
    for (i, &stack) in args.stacks.iter().enumerate() {
        if stop::requested() {
            break;
        }
        eprint!("bench paused: [{}/{}] {} ... ", i + 1, args.stacks.len(), stack.label());
        let topic = format!("/freight_bench_paused_{}_{i}", std::process::id());
        let outcome = measure(args, stack, &script, &topic);
        eprintln!("{}", if outcome.is_ok() { "done" } else { "failed" });
        rows.push(Row { stack, target, outcome });
    }
    super::sys::print_stdout(&table(&rows));
    if let Some(path) = &args.json {
        super::report::write_json(path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    if stop::requested() {
        return Err(BenchError::new("interrupted", "run it again to measure every stack"));
    }
    Ok(ExitCode::SUCCESS)
}

fn script_error(e: std::io::Error) -> BenchError {
    BenchError::new(
        format!("cannot write the peer script to a private directory under {}: {e}", std::env::temp_dir().display()),
        "check $TMPDIR",
    )
}

fn interpreter(args: &PausedArgs, stack: Stack) -> PathBuf {
    match stack {
        Stack::Jazzy => args.interpreters.ros_jazzy.clone(),
        Stack::Kilted => args.interpreters.ros_kilted.clone(),
        Stack::FreightPy => args.interpreters.freight(),
    }
}

/// One stack: two subscribers, the publisher, the stop and the continue.
fn measure(args: &PausedArgs, stack: Stack, script: &Path, topic: &str) -> Result<Measured, String> {
    let python = interpreter(args, stack);
    if !python.exists() {
        return Err(format!("{} is missing (scripts/install-deps.sh installs it)", python.display()));
    }
    let start = |role: &str, extra: &[String]| -> Result<Proc, String> {
        let mut cmd = Command::new(&python);
        cmd.arg(script).args([if stack.is_stock() { "stock" } else { "freight" }, role, topic]).args(extra);
        if stack.is_stock() {
            for var in STOCK_ENV_REMOVED {
                cmd.env_remove(var);
            }
        } else {
            cmd.env_remove("CYCLONEDDS_URI");
        }
        Proc::start(cmd, role)
    };
    let mut steady = start("sub", &[])?;
    steady.expect("READY", START)?;
    let mut stopped = start("sub", &[])?;
    stopped.expect("READY", START)?;
    let mut publisher = start(
        "pub",
        &[
            "--rate".into(),
            args.rate.to_string(),
            "--seconds".into(),
            args.seconds.as_secs_f64().to_string(),
            "--bytes".into(),
            args.bytes.to_string(),
        ],
    )?;
    publisher.expect("MATCHED", START)?;
    let matched = Instant::now();
    stop::sleep(args.stop_after);
    stopped.signal(libc::SIGSTOP)?;
    stop::sleep(args.stop_for);
    stopped.signal(libc::SIGCONT)?;
    let published: Published = publisher.result(args.seconds.saturating_sub(matched.elapsed()) + START)?;
    // What is still on its way arrives.
    stop::sleep(Duration::from_secs(1));
    steady.close_stdin();
    stopped.close_stdin();
    let steady = steady.result(Duration::from_secs(10))?;
    let stopped = stopped.result(Duration::from_secs(10))?;
    Ok(Measured { publisher: published, steady, stopped })
}

/// A peer process spoken to in lines.
struct Proc {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    role: String,
}

impl Proc {
    fn start(mut cmd: Command, role: &str) -> Result<Proc, String> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("cannot start the {role}: {e}"))?;
        let lines = lines_of(child.stdout.take().ok_or("no stdout")?);
        let stderr = tail_of(child.stderr.take().ok_or("no stderr")?, STDERR_KEEP);
        Ok(Proc { child, lines, stderr, role: role.into() })
    }

    /// The rest of the next line starting with `prefix`, within `limit`; an `ERROR` line, an
    /// exit, the limit or Ctrl-C end the wait with the reason.
    fn expect(&mut self, prefix: &str, limit: Duration) -> Result<String, String> {
        let end = Instant::now() + limit;
        loop {
            if stop::requested() {
                return Err("interrupted".into());
            }
            if Instant::now() > end {
                return Err(format!("the {} said no {prefix} within {} s", self.role, limit.as_secs()));
            }
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim_start().to_string());
                    }
                    if let Some(what) = line.strip_prefix("ERROR ") {
                        return Err(format!("{}: {what}", self.role));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    std::thread::sleep(Duration::from_millis(100));
                    let stderr = self.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
                    return Err(format!("the {} exited ({status}) before {prefix}: {last}", self.role));
                }
            }
        }
    }

    fn result<T: for<'de> Deserialize<'de>>(&mut self, limit: Duration) -> Result<T, String> {
        let json = self.expect("RESULT", limit)?;
        serde_json::from_str(&json).map_err(|e| format!("the {}'s result {json:?}: {e}", self.role))
    }

    fn signal(&self, sig: libc::c_int) -> Result<(), String> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(|_| "a pid out of range".to_string())?;
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
        if unsafe { libc::kill(pid, sig) } != 0 {
            return Err(format!("cannot signal the {}: {}", self.role, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Time to exit on its own once its stdin is closed (a killed stock node leaves
        // Fast DDS's segments in /dev/shm); then SIGKILL, which ends a stopped one too.
        self.close_stdin();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The table: one row per stack.
fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "stack                published   errors  slowest publish  steady sub received  stopped sub after SIGCONT\n",
    );
    for row in rows {
        let line = match &row.outcome {
            Ok(m) => {
                let stopped = match &m.stopped.error {
                    None => format!("{} received, went on", m.stopped.after_pause),
                    Some(e) => format!("{} received, then ended: {e}", m.stopped.after_pause),
                };
                format!(
                    "{:<20} {:>5}/{:<5} {:>6}  {:>12.1} ms  {:>19}  {stopped}",
                    row.stack.label(),
                    m.publisher.published,
                    row.target,
                    m.publisher.errors,
                    m.publisher.slowest_ms,
                    m.steady.received,
                )
            }
            Err(why) => format!("{:<20} not measured: {why}", row.stack.label()),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_keeps_the_stock_side_stock() {
        // The stock branch imports rclpy and std_msgs only; freight only in its own branch.
        let stock = PEER_SCRIPT.split("if args.stack == \"stock\":").nth(1).expect("a stock branch");
        let stock = stock.split("else:").next().expect("the branch's end");
        assert!(stock.contains("import rclpy") && !stock.contains("freight"), "{stock}");
    }

    #[test]
    fn a_row_that_ended_in_an_exception_says_so() {
        let received =
            |after, error: Option<&str>| Received { received: 10, after_pause: after, error: error.map(Into::into) };
        let publisher = Published { published: 437, errors: 37, first_error: None, slowest_ms: 110.0 };
        let rows = [Row {
            stack: Stack::FreightPy,
            target: 800,
            outcome: Ok(Measured {
                publisher,
                steady: received(0, None),
                stopped: received(0, Some("ContextError: interrupted by a signal")),
            }),
        }];
        let text = table(&rows);
        assert!(text.contains("437/800"), "{text}");
        assert!(text.contains("then ended: ContextError"), "{text}");
    }
}
