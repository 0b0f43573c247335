//! `freight bench`: the latency benchmark harness.
//!
//! # Measurement protocol
//!
//! Every row of the result table is one *(transport, wait mode, message size)* triple and is
//! measured like this:
//!
//! * **Two sides.** A publisher and a subscriber. For every transport except `intra` and
//!   `memcpy` they live in two processes: the bench process runs the publisher on a dedicated
//!   thread and starts the subscriber as a child process (`std::env::current_exe()` with the
//!   hidden `freight bench peer` subcommand). `intra` uses two threads of the bench process;
//!   `memcpy` uses a single thread (see below).
//! * **Pinning.** When the process may run on at least two CPUs (what `nproc` reports), the
//!   publisher is pinned to the first allowed CPU (CPU 0 on an unrestricted machine) and the
//!   subscriber to the second (CPU 1) with `sched_setaffinity`. Pinning failures are ignored:
//!   the numbers are still valid, only noisier.
//! * **Ping-pong.** The publisher writes a 16-byte [`Header`](transport::Header) `{seq: u64, t_send_ns: u64}`
//!   into the first bytes of the payload, where `t_send_ns` is `CLOCK_MONOTONIC` read as late
//!   as possible before the send, and sends. The subscriber receives, reads the header, reads
//!   `CLOCK_MONOTONIC` again and records the one-way latency `now - t_send_ns`. It then sends a
//!   small ack (the `seq`) back on a return channel, and the publisher waits for that ack before
//!   it sends the next message. There is therefore exactly one message in flight, and the
//!   round-trip rate is what the table reports as msgs/s. `CLOCK_MONOTONIC` is system-wide on
//!   Linux, so a one-way latency across processes is meaningful.
//! * **Small payloads.** The header is always carried, so the minimum wire size is
//!   [`HEADER_LEN`](transport::HEADER_LEN) (16) bytes: an `8B` row moves 16 bytes. The table and the JSON report the
//!   *requested* size, because that is what a user asked about; the difference only matters
//!   below 16 bytes, where latency does not depend on size anyway.
//! * **Warm-up.** The first [`WARMUP_ITERATIONS`] round trips (or as many as fit in
//!   [`WARMUP_MAX`], at least one) are discarded: they include page faults, first connection
//!   setup and cold caches.
//! * **End of a row.** A row ends after `--iterations` measured round trips or after
//!   `--duration-per-row` seconds, whichever comes first, but never with fewer than
//!   [`MIN_SAMPLES`] samples. The publisher then sends a stop message (`seq == u64::MAX`),
//!   which the subscriber acks before it reports its samples.
//! * **Fan-out** (`--subscribers N`, the `fanout` module). For `shm-loan`, `shm-copy` and
//!   `iceoryx2` a row may have N subscriber processes, pinned round robin to the CPUs after
//!   the publisher's (with fewer CPUs than N + 1 they share cores). Every message goes to all
//!   N and the next one only after all N acked; a message's latency is the largest of its N
//!   one-way latencies (to the last subscriber). The table and JSON then add `subscribers`
//!   and `publish_p50_us`: the median time the publisher spent inside the transport's send
//!   (loan, header, publish, and in block mode the wake-up), timed by the harness around it.
//! * **Results.** The subscriber reports all its latency samples to the publisher side: as
//!   JSON lines on the child's stdout for process transports, over a channel for threads.
//!   Statistics are p50 / p99 / max (nearest-rank percentiles) and msgs/s = measured round
//!   trips divided by the wall time of the measured part of the row.
//! * **Time limits.** Every row, including its child process, is bounded by
//!   [`ROW_TIMEOUT`]; on error or timeout the child is killed and reaped.
//! * **Wait modes.** `spin`: both sides busy-poll (non-blocking receive in a loop with
//!   `core::hint::spin_loop()`). `block`: the waiting side sleeps in the OS until the sender
//!   wakes it (for raw iceoryx2: an event service next to each pub/sub service; the sender
//!   `notify()`s after `send()`; for `dds`: a condition variable that the DDS reader's
//!   data-available listener signals from Cyclone's receive thread).
//! * **The `memcpy` floor.** One thread copies `size` bytes between two pre-allocated,
//!   pre-faulted heap buffers; the header is written into the source before the copy and read
//!   from the destination after it, so the sample is the time of one copy (plus two clock
//!   reads). It has no wait mode; it is measured once and reported under each requested wait
//!   so that the "vs baseline" column has a baseline for each.
//! * **`--lang python`.** The same protocol in Python, Python to Python, busy-polling:
//!   freight's Python API against the iceoryx2 Python binding, measured in the same run. It
//!   lives in `python/freight/bench.py` (`python -m freight.bench latency`); [`run_python`]
//!   only forwards the options to it (see the `python` module).
//!
//! `freight bench ros2` (the `ros2` module) is a separate benchmark with its own protocol
//! notes: freight against stock rclpy on Fast DDS, whole ROS 2 messages, one run, one host,
//! in a private network namespace. `freight bench throughput` (the `throughput` module) runs a
//! publisher in a tight loop to N subscriber processes and documents its own protocol.
//! `freight bench soak` (the `soak` module) is a chaos soak, not a measurement: its module
//! documents the graph, the chaos and every check. `freight bench scale` (the `scale`
//! module) starts many processes with many topics and measures the graph, not the data. `freight bench pipeline` (the `pipeline`
//! module) reproduces seed 002's CPU–GPU pipelines and documents its protocol.

mod args;
mod cpp;
mod dds;
mod fanout;
mod freight_impl;
mod freight_transports;
mod harness;
mod iceoryx2_raw;
mod memcpy;
mod paused;
mod peer;
mod pipeline;
pub(crate) mod plot;
mod private_host;
pub(crate) mod python;
mod record;
mod report;
mod ros2;
mod scale;
mod soak;
mod stats;
mod sys;
mod throughput;
mod transport;
mod unshare;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

pub use args::{format_size, parse_seconds, parse_size, Lang, LatencyArgs, PeerArgs, ThroughputArgs, TransportKind};
pub use fanout::Fanout;
pub use harness::RunPlan;
pub use paused::{run as run_paused, PausedArgs};
pub use pipeline::{run as run_pipeline, run_worker as run_pipeline_worker, PipelineArgs, PipelineWorkerArgs};
pub use record::{run as run_record, RecordBenchArgs};
pub use report::RowStats;
pub use ros2::{run as run_ros2, run_peer as run_ros2_peer, Ros2Args, Ros2PeerArgs};
pub use scale::{run as run_scale, run_worker as run_scale_worker, ScaleArgs, ScaleWorkerArgs};
pub use soak::{run as run_soak, run_worker as run_soak_worker, SoakArgs, SoakWorkerArgs};
pub use throughput::run as run_throughput;
pub use transport::{Placement, Transport, WaitMode};

/// Warm-up round trips discarded at the start of every row.
pub const WARMUP_ITERATIONS: u64 = 50;
/// Upper bound on the time spent warming up, so that 128 MiB copies do not warm up for seconds.
pub const WARMUP_MAX: Duration = Duration::from_millis(500);
/// A row never ends with fewer samples than this, whatever `--duration-per-row` says: a p99 of
/// a handful of samples would be meaningless.
pub const MIN_SAMPLES: u64 = 20;
/// Hard limit for one row, child process included.
pub const ROW_TIMEOUT: Duration = Duration::from_secs(60);

/// An error of the bench harness, printed as `error: <what>; <fix>`.
#[derive(Debug, thiserror::Error)]
#[error("{what}; {fix}")]
pub struct BenchError {
    what: String,
    fix: String,
}

impl BenchError {
    /// Creates an error from what went wrong and what the user can do about it.
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { what: what.into(), fix: fix.into() }
    }

    /// What went wrong, without the advice.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// What the user can do about it.
    pub fn fix(&self) -> &str {
        &self.fix
    }

    /// Prefixes the "what" part with context, keeping the advice.
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        Self { what: format!("{context}: {}", self.what), fix: self.fix }
    }
}

/// All transports this build can measure: the baselines plus whatever freight registers in
/// [`freight_transports::freight_transports`].
pub fn registered_transports() -> Vec<Box<dyn Transport>> {
    let mut all: Vec<Box<dyn Transport>> = vec![
        Box::new(iceoryx2_raw::RawIceoryx2::baseline()),
        Box::new(iceoryx2_raw::RawIceoryx2::threadsafe()),
        Box::new(memcpy::Memcpy),
        Box::new(dds::Dds),
    ];
    all.extend(freight_transports::freight_transports());
    all.extend(cpp::all());
    all
}

/// Looks up an implementation by transport name. An accepted name without an implementation is
/// an error (never a silent skip): a benchmark that quietly drops rows is worse than none.
pub fn find_transport(name: &str) -> Result<Box<dyn Transport>, BenchError> {
    resolve_transports(&[name]).map(|mut found| found.remove(0))
}

/// Looks up all `names` at once, so that the error lists every missing one.
fn resolve_transports(names: &[&str]) -> Result<Vec<Box<dyn Transport>>, BenchError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for &name in names {
        match registered_transports().into_iter().find(|t| t.name() == name) {
            Some(t) => found.push(t),
            None => missing.push(format!("`{name}`")),
        }
    }
    if missing.is_empty() {
        return Ok(found);
    }
    let available: Vec<&'static str> = registered_transports().iter().map(|t| t.name()).collect();
    let what = match missing.len() {
        1 => format!("transport {} has", missing[0]),
        _ => format!("transports {} have", missing.join(", ")),
    };
    Err(BenchError::new(
        format!("{what} no implementation in this build yet"),
        format!("pick from the implemented ones, e.g. --transports {}", available.join(",")),
    ))
}

/// Fails early if `path` cannot be an output file: its directory must exist.
fn check_output_path(path: &Path, flag: &str) -> Result<(), BenchError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(BenchError::new(
            format!("cannot write {flag} {}: it is a directory", path.display()),
            format!("pass a file name, e.g. {flag} {}", path.join("out").display()),
        ));
    }
    if !dir.is_dir() {
        return Err(BenchError::new(
            format!("cannot write {flag} {}: {} is not a directory", path.display(), dir.display()),
            format!("create the directory first or pass another {flag} path"),
        ));
    }
    Ok(())
}

/// Everything one latency benchmark run needs, independent of how it was invoked
/// (`freight bench latency` or `freight demo`).
#[derive(Debug, Clone)]
pub struct LatencyJob {
    /// Requested payload sizes in bytes.
    pub sizes: Vec<usize>,
    /// Transports in table order.
    pub transports: Vec<TransportKind>,
    /// Wait modes in table order.
    pub waits: Vec<WaitMode>,
    /// Iteration and time budget of every row.
    pub plan: RunPlan,
    /// Where to write the JSON rows, if anywhere.
    pub json: Option<PathBuf>,
    /// Where to write the PNG plot, if anywhere.
    pub plot: Option<PathBuf>,
    /// A title printed above the table.
    pub title: Option<String>,
}

impl LatencyJob {
    /// Builds a job from the command-line arguments, validating them.
    pub fn from_args(args: &LatencyArgs) -> Result<Self, BenchError> {
        if args.python.is_some() {
            return Err(BenchError::new(
                "--python only applies to --lang python",
                "add --lang python to measure the Python API, or drop --python",
            ));
        }
        if args.user_type {
            return Err(BenchError::new(
                "--user-type only applies to --lang python",
                "add --lang python to measure a user's message type from Python, or drop --user-type",
            ));
        }
        let mut sizes = Vec::new();
        for &size in &args.sizes {
            if !sizes.contains(&size) {
                sizes.push(size);
            }
        }
        let mut transports = Vec::new();
        for &t in args.transports.as_deref().unwrap_or(args.lang.default_transports()) {
            if !transports.contains(&t) {
                transports.push(t);
            }
        }
        let plan = RunPlan::new(args.iterations, args.duration_per_row)?;
        Ok(Self {
            sizes,
            transports,
            waits: args.wait.modes(),
            plan,
            json: args.json.clone(),
            plot: args.plot.clone(),
            title: None,
        })
    }
}

/// Runs a latency job with one subscriber per row: measures every row, prints the table to
/// stdout, writes the optional JSON and PNG files. Progress goes to stderr.
pub fn run_latency(job: &LatencyJob) -> Result<Vec<RowStats>, BenchError> {
    run_latency_fanout(job, &Fanout::single())
}

/// Entry point of `freight bench latency` (Rust): the job and the subscriber counts of
/// `args`, checked, then measured as [`run_latency_fanout`] does.
pub fn run_latency_args(args: &LatencyArgs) -> Result<Vec<RowStats>, BenchError> {
    let job = LatencyJob::from_args(args)?;
    let fanout = Fanout::new(&args.subscribers, &job.transports)?;
    run_latency_fanout(&job, &fanout)
}

/// Runs a latency job once per subscriber count of `fanout` (see the `fanout` module), as
/// [`run_latency`] does.
pub fn run_latency_fanout(job: &LatencyJob, fanout: &Fanout) -> Result<Vec<RowStats>, BenchError> {
    sys::quiet_iceoryx2_logs();
    if fanout.shown() && job.plot.is_some() {
        return Err(BenchError::new(
            "--plot draws one line per transport and wait, not one per number of subscribers",
            "drop --plot, or plot a run with --subscribers 1",
        ));
    }
    // Resolve everything up front: an unimplemented transport or a missing font should fail
    // in the first second, not after minutes of measuring.
    let names: Vec<&str> = job.transports.iter().map(|t| t.as_str()).collect();
    let transports = resolve_transports(&names)?;
    if let Some(path) = &job.json {
        check_output_path(path, "--json")?;
    }
    if let Some(path) = &job.plot {
        check_output_path(path, "--plot")?;
        plot::check_font()?;
    }
    let rows = harness::run_all(&transports, job, fanout)?;
    let table = report::render_table(&rows, job.title.as_deref());
    sys::print_stdout(&table);
    if let Some(path) = &job.json {
        report::write_json(path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &job.plot {
        let inline: Vec<&str> =
            transports.iter().filter(|t| t.placement() == Placement::Inline).map(|t| t.name()).collect();
        plot::write_plot(path, &rows, &inline)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(rows)
}

/// Entry point of `freight bench latency --lang python`: runs the Python benchmark in the
/// interpreter that `--python` or `$FREIGHT_PYTHON` names and returns its exit status.
pub fn run_python(args: &LatencyArgs) -> Result<ExitCode, BenchError> {
    if args.subscribers.iter().any(|&n| n != 1) {
        return Err(BenchError::new(
            "--subscribers applies to --lang rust only",
            "drop --subscribers, or measure fan-out with the Rust transports",
        ));
    }
    python::run(args)
}

/// Entry point of the hidden `freight bench peer` subcommand (the subscriber child process).
/// Returns whether the row succeeded; failures are reported to the parent on stdout, so the
/// caller only sets the exit code.
pub fn run_peer(args: &PeerArgs) -> bool {
    sys::quiet_iceoryx2_logs();
    peer::run_child(args)
}
