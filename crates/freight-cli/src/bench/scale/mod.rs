//! `freight bench scale`: many processes with many topics on one host, as a robot's whole
//! stack runs them.
//!
//! # The graph
//!
//! `--processes` worker processes (this binary, the hidden `freight bench scale-worker`) each
//! create `--endpoints` endpoints, half publishers and half subscriptions, of
//! `std_msgs/UInt8MultiArray` on `--topics` topics `/scale/t<k>`: worker `i` publishes the
//! topics `i·E/2 .. (i+1)·E/2` (modulo the topic count) and subscribes to those of worker
//! `i+1`, so every subscription's publisher is in another process. Every worker has the
//! network plane on (DDS on the private loopback), as a node has by default, unless
//! `--local-only`.
//!
//! # The run
//!
//! In a private host (`private_host`: its own loopback, /dev/shm and /tmp/iceoryx2), the
//! workers start at once. Each says when its endpoints exist (`READY`: creation time, open
//! descriptors, resident memory) and when every subscription sees its publisher
//! (`MATCHED`, by `Subscription::publisher_count`). Then the controller times
//! `freight topic list` and `freight topic info` (this host's endpoints, `--spin-time 0`),
//! counts the files in /dev/shm and /tmp/iceoryx2 and what /dev/shm holds, kills one worker
//! with SIGKILL and starts it again (its new node removes what the dead one left), and counts
//! again: the same files, or the dead one left some behind. Last, every worker is told to
//! exit, and both directories must be empty.
//!
//! Nothing is sent: the graph, not the data, is what is measured.
//!
//! # One process against stock ROS 2
//!
//! Then, in the same private host, one Python process makes `--per-process` publishers and
//! as many subscriptions on as many topics, with freight's Python API and with stock rclpy
//! (Jazzy and Kilted on Fast DDS, their defaults): creation time, descriptors and resident
//! memory, before and after ([`one_process`]).

mod one_process;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::Args;
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Context, DdsConfig};
use serde::Serialize;

use self::one_process::OneProcess;
use super::python::StackInterpreters;
use super::sys::lines_of;
use super::{check_output_path, BenchError};
use crate::resources::{fd_count, list_files, memory, used_bytes};

/// The domain of the run (its own loopback: nothing else is on it).
const DOMAIN: u32 = 77;
/// How long workers get to create their endpoints and match, each phase.
const PHASE_LIMIT: Duration = Duration::from_secs(300);
/// The shared-memory directories of the private host.
const DIRS: [&str; 2] = ["/dev/shm", "/tmp/iceoryx2"];
/// What a worker says before each report.
const MARK: &str = "#scale# ";

/// Options of `freight bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// Worker processes.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub processes: u32,

    /// Endpoints per process: half publishers, half subscriptions (even).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub endpoints: u32,

    /// Topics they share.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub topics: u32,

    /// Workers without the network plane (shared memory only), to see what DDS costs.
    #[arg(long)]
    pub local_only: bool,

    /// Topics of the one-process comparison with stock rclpy: one Python process makes
    /// this many publishers and as many subscriptions, on each stack; 0 leaves it out.
    #[arg(long, default_value_t = 300, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=5000))]
    pub per_process: u32,

    #[command(flatten)]
    pub interpreters: StackInterpreters,

    /// Also write the result as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Internal: this process is the re-executed run inside its private host.
    #[arg(long, hide = true)]
    pub inside_namespace: bool,
}

/// Arguments of the hidden `freight bench scale-worker`.
#[derive(Debug, Clone, Args)]
pub struct ScaleWorkerArgs {
    /// Its index, from 0.
    #[arg(long)]
    pub index: u32,
    /// See [`ScaleArgs::processes`].
    #[arg(long)]
    pub processes: u32,
    /// See [`ScaleArgs::endpoints`].
    #[arg(long)]
    pub endpoints: u32,
    /// See [`ScaleArgs::topics`].
    #[arg(long)]
    pub topics: u32,
    /// See [`ScaleArgs::local_only`].
    #[arg(long)]
    pub local_only: bool,
}

/// What one run found.
#[derive(Debug, Serialize)]
pub struct ScaleResult {
    /// Whether the workers had the network plane off.
    pub local_only: bool,
    /// See [`ScaleArgs::processes`].
    pub processes: u32,
    /// See [`ScaleArgs::endpoints`].
    pub endpoints_per_process: u32,
    /// See [`ScaleArgs::topics`].
    pub topics: u32,
    /// Topics with endpoints: all of them, unless there are fewer publishers.
    pub topics_used: u32,
    /// From the start of the workers until every one had created its endpoints.
    pub all_created_s: f64,
    /// From the start of the workers until every subscription saw its publisher.
    pub all_matched_s: f64,
    /// Creation time per endpoint, the mean over workers and the slowest worker's.
    pub create_ms_per_endpoint: (f64, f64),
    /// Open descriptors per worker, mean and most.
    pub fds_per_process: (f64, usize),
    /// Resident memory per worker in MiB, mean and most.
    pub rss_mib_per_process: (f64, f64),
    /// Seconds `freight topic list --spin-time 0` took.
    pub topic_list_s: f64,
    /// Topics `freight topic list` named.
    pub topics_listed: usize,
    /// Seconds `freight topic info /scale/t0 --spin-time 0` took.
    pub topic_info_s: f64,
    /// What /dev/shm held with every worker up.
    pub dev_shm_mib: f64,
    /// Files in /dev/shm and /tmp/iceoryx2 with every worker up.
    pub files: usize,
    /// Files the killed worker left once its successor started, by kind: `+2 .port_tag`
    /// (none expected).
    pub left_by_killed: Vec<String>,
    /// Files left after every worker exited (none expected).
    pub left_at_exit: Vec<String>,
    /// One process with `--per-process` publishers and subscriptions, per stack.
    pub per_process: Vec<OneProcess>,
}

/// Runs `freight bench scale`.
pub fn run(args: &ScaleArgs) -> Result<ExitCode, BenchError> {
    if !args.endpoints.is_multiple_of(2) {
        return Err(BenchError::new(
            format!("--endpoints {} is odd", args.endpoints),
            "give an even number: half publishers, half subscriptions",
        ));
    }
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    if !args.inside_namespace {
        return super::private_host::reexec("freight bench scale", "");
    }
    super::private_host::enter("freight bench scale")?;
    super::sys::quiet_iceoryx2_logs();
    let result = measure(args).map_err(|e| BenchError::new(e, "see the worker's message above"))?;
    print(&result);
    if let Some(path) = &args.json {
        super::report::write_json(path, &result)?;
    }
    let clean = result.left_by_killed.is_empty()
        && result.left_at_exit.is_empty()
        && result.topics_listed >= result.topics_used as usize;
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A running worker.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    index: u32,
}

impl Worker {
    fn start(args: &ScaleArgs, index: u32) -> Result<Worker, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the freight executable: {e}"))?;
        let mut child = Command::new(exe)
            .args(["bench", "scale-worker", "--index", &index.to_string()])
            .args(["--processes", &args.processes.to_string(), "--endpoints", &args.endpoints.to_string()])
            .args(["--topics", &args.topics.to_string()])
            .args(args.local_only.then_some("--local-only"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start worker {index}: {e}"))?;
        let stdout = child.stdout.take().ok_or("a worker without stdout")?;
        Ok(Worker { stdin: child.stdin.take(), lines: lines_of(stdout), child, index })
    }

    /// The words after `MARK word` of the next such line, by `deadline`.
    fn expect(&self, word: &str, deadline: Instant) -> Result<Vec<String>, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let Some(rest) = line.strip_prefix(MARK) else { continue };
                    let mut words = rest.split(' ').map(str::to_owned);
                    if words.next().as_deref() == Some(word) {
                        return Ok(words.collect());
                    }
                }
                Err(RecvTimeoutError::Timeout) => return Err(format!("worker {} said no {word} in time", self.index)),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("worker {} ended before {word}", self.index))
                }
            }
        }
    }

    /// Closes its stdin (the signal to exit) and waits for it.
    fn finish(mut self) -> Result<(), String> {
        drop(self.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("worker {} exited with {status}", self.index));
        }
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn parse<T: std::str::FromStr>(words: &[String], at: usize) -> Result<T, String> {
    words.get(at).and_then(|w| w.parse().ok()).ok_or_else(|| format!("a malformed report {words:?}"))
}

fn files() -> BTreeSet<PathBuf> {
    DIRS.iter().flat_map(|d| list_files(Path::new(d)).unwrap_or_default()).collect()
}

fn ends_with(path: &Path, suffix: &str) -> bool {
    path.to_string_lossy().ends_with(suffix)
}

/// The kinds of file (`.port_tag`, `.data`, ...) of which `after` has more than `before`,
/// as `+2 .port_tag`. The successor of a killed worker has the files it had, with new
/// names; the connections of a publisher and a subscription are left out: a publisher
/// makes one to each subscription that exists when it is created, so their number depends
/// on who started first.
fn excess(before: &BTreeSet<PathBuf>, after: &BTreeSet<PathBuf>) -> Vec<String> {
    let kinds = |files: &BTreeSet<PathBuf>| {
        let mut count = std::collections::BTreeMap::<String, usize>::new();
        for f in files.iter().filter(|f| !ends_with(f, ".connection")) {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let kind = name.rfind('.').map_or(name.clone(), |i| name[i..].to_owned());
            *count.entry(kind).or_default() += 1;
        }
        count
    };
    let (was, is) = (kinds(before), kinds(after));
    is.iter()
        .filter_map(|(kind, &n)| {
            let more = n.saturating_sub(was.get(kind).copied().unwrap_or(0));
            (more > 0).then(|| format!("+{more} {kind}"))
        })
        .collect()
}

fn measure(args: &ScaleArgs) -> Result<ScaleResult, String> {
    let t0 = Instant::now();
    let mut workers = (0..args.processes).map(|i| Worker::start(args, i)).collect::<Result<Vec<_>, _>>()?;
    let deadline = t0 + PHASE_LIMIT;
    let (mut create_ms, mut fds, mut rss_kib) = (Vec::new(), Vec::new(), Vec::new());
    for w in &workers {
        create_ms.push(parse::<f64>(&w.expect("READY", deadline)?, 0)?);
    }
    let all_created_s = t0.elapsed().as_secs_f64();
    for w in &workers {
        w.expect("MATCHED", deadline)?;
    }
    let all_matched_s = t0.elapsed().as_secs_f64();
    for w in &workers {
        fds.push(fd_count(w.child.id()).unwrap_or(0));
        rss_kib.push(memory(w.child.id()).map_or(0, |m| m.rss_kib));
    }
    let (topic_list_s, listed) = timed_tool(&["topic", "list", "--spin-time", "0", "--domain", &DOMAIN.to_string()])?;
    let topics_listed = listed.lines().filter(|l| l.starts_with("/scale/t")).count();
    let (topic_info_s, _) =
        timed_tool(&["topic", "info", "/scale/t0", "--spin-time", "0", "--domain", &DOMAIN.to_string()])?;
    let dev_shm_mib = used_bytes(Path::new(DIRS[0])).unwrap_or(0) as f64 / f64::from(1u32 << 20);
    let before = files();

    // One dies; its successor's node removes what it left.
    let victim = workers.remove(0);
    let index = victim.index;
    drop(victim);
    let successor = Worker::start(args, index)?;
    let deadline = Instant::now() + PHASE_LIMIT;
    successor.expect("MATCHED", deadline)?;
    workers.insert(0, successor);
    let left_by_killed = excess(&before, &files());

    for w in workers {
        w.finish()?;
    }
    // iceoryx2 keeps the host's node counter (`*.global_mgmt`) on purpose: node ids never repeat.
    let left_at_exit: Vec<String> =
        files().into_iter().filter(|f| !ends_with(f, ".global_mgmt")).map(|f| f.display().to_string()).collect();
    let per_process =
        if args.per_process > 0 { one_process::measure(&args.interpreters, args.per_process) } else { Vec::new() };
    let n = args.processes as f64;
    let per_endpoint = f64::from(args.endpoints);
    Ok(ScaleResult {
        local_only: args.local_only,
        processes: args.processes,
        endpoints_per_process: args.endpoints,
        topics: args.topics,
        topics_used: args.topics.min(args.processes.saturating_mul(args.endpoints / 2)),
        all_created_s,
        all_matched_s,
        create_ms_per_endpoint: (
            create_ms.iter().sum::<f64>() / n / per_endpoint,
            create_ms.iter().copied().fold(0.0, f64::max) / per_endpoint,
        ),
        fds_per_process: (fds.iter().sum::<usize>() as f64 / n, fds.iter().copied().max().unwrap_or(0)),
        rss_mib_per_process: (
            rss_kib.iter().sum::<u64>() as f64 / n / 1024.0,
            rss_kib.iter().copied().max().unwrap_or(0) as f64 / 1024.0,
        ),
        topic_list_s,
        topics_listed,
        topic_info_s,
        dev_shm_mib,
        files: before.len(),
        left_by_killed,
        left_at_exit,
        per_process,
    })
}

/// Runs this executable with `args` and returns its time and stdout.
fn timed_tool(args: &[&str]) -> Result<(f64, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the freight executable: {e}"))?;
    let t0 = Instant::now();
    let out = Command::new(exe).args(args).stdin(Stdio::null()).output().map_err(|e| e.to_string())?;
    let took = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!("freight {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn print(r: &ScaleResult) {
    let endpoints = r.processes * r.endpoints_per_process;
    let verdict = |left: &[String]| match left {
        [] => "none".to_string(),
        _ => format!("FAIL: {}{}", left[..left.len().min(4)].join(", "), if left.len() > 4 { ", ..." } else { "" }),
    };
    let rows = [
        (
            "graph",
            format!(
                "{} processes x {} endpoints on {} topics ({endpoints} endpoints), {}",
                r.processes,
                r.endpoints_per_process,
                r.topics,
                if r.local_only { "shared memory only" } else { "with DDS" }
            ),
        ),
        ("all created", format!("{:.2} s", r.all_created_s)),
        ("all matched", format!("{:.2} s", r.all_matched_s)),
        (
            "create / endpoint",
            format!("{:.2} ms mean, {:.2} ms slowest process", r.create_ms_per_endpoint.0, r.create_ms_per_endpoint.1),
        ),
        (
            "fds / process",
            format!(
                "{:.0} mean, {} most ({:.1} per endpoint)",
                r.fds_per_process.0,
                r.fds_per_process.1,
                r.fds_per_process.0 / f64::from(r.endpoints_per_process)
            ),
        ),
        ("RSS / process", format!("{:.1} MiB mean, {:.1} MiB most", r.rss_mib_per_process.0, r.rss_mib_per_process.1)),
        ("topic list", format!("{:.2} s ({} of {} topics)", r.topic_list_s, r.topics_listed, r.topics_used)),
        ("topic info", format!("{:.2} s", r.topic_info_s)),
        ("/dev/shm", format!("{:.1} MiB in use, {} files with /tmp/iceoryx2", r.dev_shm_mib, r.files)),
        ("left by a killed one", verdict(&r.left_by_killed)),
        ("left at exit", verdict(&r.left_at_exit)),
    ];
    let mut out = String::new();
    for (what, value) in rows {
        out.push_str(&format!("{what:<22} {value}\n"));
    }
    if let Some(first) = r.per_process.iter().find_map(|p| p.outcome.as_ref().ok()) {
        let n = first.endpoints / 2;
        out.push_str(&format!("\none process, {n} publishers and {n} subscriptions (Python, after a second idle):\n"));
    }
    for p in &r.per_process {
        let value = match &p.outcome {
            Ok(c) => format!(
                "created in {:.2} s; {} fds ({:.2} per endpoint); {:.1} MiB RSS ({:.3} MiB per endpoint)",
                c.create_s,
                c.fds.1,
                c.fds_per_endpoint(),
                c.rss_mib.1,
                c.rss_mib_per_endpoint()
            ),
            Err(why) => format!("not measured: {why}"),
        };
        out.push_str(&format!("{:<22} {value}\n", p.stack));
    }
    super::sys::print_stdout(&out);
}

/// Runs one worker of `freight bench scale`: creates its endpoints, says `READY <ms>`, waits
/// until every subscription sees its publisher, says `MATCHED <ms>`, then waits for its stdin
/// to close.
pub fn run_worker(args: &ScaleWorkerArgs) -> ExitCode {
    match worker(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("freight bench scale-worker {}: {e}", args.index);
            ExitCode::FAILURE
        }
    }
}

fn worker(args: &ScaleWorkerArgs) -> Result<(), String> {
    super::sys::quiet_iceoryx2_logs();
    let half = args.endpoints / 2;
    let topic = |owner: u32, k: u32| {
        let n = (u64::from(owner) * u64::from(half) + u64::from(k)) % u64::from(args.topics);
        format!("/scale/t{n}")
    };
    let builder = Context::builder().domain_id(DOMAIN);
    let builder = if args.local_only { builder.local_only() } else { builder.dds_config(DdsConfig::loopback()) };
    let ctx = builder.create().map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("scale_{}", args.index)).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let publishers = (0..half)
        .map(|k| node.create_publisher::<UInt8MultiArray>(&topic(args.index, k), 10))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let next = (args.index + 1) % args.processes;
    let subscriptions = (0..half)
        .map(|k| node.create_subscription::<UInt8MultiArray>(&topic(next, k), 10))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    say(&format!("READY {:.3}", t0.elapsed().as_secs_f64() * 1000.0));
    // `publisher_count` looks for dead nodes first (a listing of the host's nodes): asked
    // of one subscription at a time, every 50 ms, so that the looking does not slow the
    // other workers' creation it measures.
    let mut matched = 0;
    while matched < subscriptions.len() {
        if subscriptions[matched].publisher_count() > 0 {
            matched += 1;
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    say(&format!("MATCHED {:.3}", t0.elapsed().as_secs_f64() * 1000.0));
    // Until the controller closes stdin (or dies).
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    drop((subscriptions, publishers));
    Ok(())
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{text}");
    let _ = out.flush();
}
