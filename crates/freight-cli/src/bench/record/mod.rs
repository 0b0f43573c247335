//! `freight bench record`: how close `freight bag record` comes to the disk, and how close
//! a stock Python recorder comes.
//!
//! First the limit: the output directory's sustained write rate, measured by
//! writing `--disk-bytes` in 8 MiB writes and syncing them, through the page
//! cache and with `O_DIRECT` (as the recorder writes): the faster counts. Then, per stream
//! and rate (rising), a `freight topic pub` process publishes for
//! `--seconds` while a `freight bag record` process records it into a new bag
//! in the same directory; the row shows what was published, recorded and
//! lost (the recorder's count from publisher sequence numbers), the rate
//! recorded (bytes over the time from the recorder's first message until it
//! has synced its last file) as a fraction of the disk's, and the
//! recorder's CPU and peak memory (for freight's, also its private part).
//!
//! Beside each freight row, the baseline ([`baseline`]): the same stream published by a
//! stock rclpy node and recorded by one that writes every serialized message with the
//! `mcap` Python writer, both of ROS 2 Jazzy from PyPI on their defaults, counted the same
//! way. Stock Fast DDS discovers by multicast, so with the baseline on the whole benchmark
//! re-executes itself in a private network namespace (`unshare --net`, root only) whose
//! loopback carries the multicast, as `freight bench ros2` does; no traffic reaches this
//! machine's interfaces. The baseline is on by default when `.venv-ros-jazzy` (or
//! `--ros-jazzy`) exists and this is root; otherwise a line says it was not run and why.
//!
//! A recorder stops rising at its first rate with losses; a stream ends when both have.
//! The summary names each recorder's highest rate recorded with nothing lost and the ratio
//! of freight's recorded MB/s to the baseline's.
//!
//! Streams: `4k`, 3840x2160 BGRA `sensor_msgs/Image` (33 MB); `cloud`, a
//! 55 MB `std_msgs/UInt8MultiArray` (the size of the Qiita seed's point
//! cloud; `freight topic pub` generates no PointCloud2). Each row's bag is
//! deleted after it is counted, unless `--keep-bags`.

mod baseline;

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::args::{format_size, parse_size};
use super::ros2::namespace;
use super::sys::run_bounded;
use super::BenchError;
use crate::stop;
use baseline::Baseline;

/// The benchmark's topic, one per run: shared memory is the host's, so two
/// runs at once (two tests) would otherwise record each other's messages.
fn topic() -> &'static str {
    static TOPIC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOPIC.get_or_init(|| format!("/freight_bench_record_{}", std::process::id()))
}
/// Seconds each publisher stays after its last message (`freight topic pub --keep-alive`,
/// its default; the stock one the same, after its acks): the recorders' rates count from
/// their first message until synced, so both get their signal as long after the last one.
const KEEP_ALIVE_S: f64 = 1.0;

/// A stream of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stream {
    /// 3840x2160 BGRA images, 33,177,600 bytes each.
    #[value(name = "4k")]
    FourK,
    /// 55 MB messages (57,671,680 bytes), the size of a merged RGB-D point cloud.
    Cloud,
}

impl Stream {
    fn bytes(self) -> u64 {
        match self {
            Stream::FourK => 3840 * 2160 * 4,
            Stream::Cloud => 55 << 20,
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Stream::FourK => "sensor_msgs/msg/Image",
            Stream::Cloud => "std_msgs/msg/UInt8MultiArray",
        }
    }

    fn publisher_args(self) -> Vec<String> {
        match self {
            Stream::FourK => ["--width", "3840", "--height", "2160"].map(String::from).to_vec(),
            Stream::Cloud => vec!["--size".into(), self.bytes().to_string()],
        }
    }

    /// The message as the stock script takes it: its kind, then its dimensions.
    fn stock_kind(self) -> &'static str {
        match self {
            Stream::FourK => "image",
            Stream::Cloud => "array",
        }
    }

    fn stock_dims(self) -> Vec<String> {
        match self {
            Stream::FourK => vec!["3840".into(), "2160".into()],
            Stream::Cloud => vec![self.bytes().to_string()],
        }
    }
}

/// Who records a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Recorder {
    /// `freight topic pub` to `freight bag record`.
    Freight,
    /// Stock rclpy to stock rclpy writing with the `mcap` Python writer.
    RclpyMcap,
}

impl Recorder {
    fn label(self) -> &'static str {
        match self {
            Recorder::Freight => "freight",
            Recorder::RclpyMcap => "rclpy + mcap",
        }
    }
}

/// Options of `freight bench record`.
#[derive(Debug, Clone, Args)]
pub struct RecordBenchArgs {
    /// Where the bags go (the disk under test); a new directory is made in it.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Bytes written to measure the disk's sustained rate.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub disk_bytes: u64,
    /// Streams, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "4k,cloud")]
    pub streams: Vec<Stream>,
    /// Publish rates to try per stream (Hz), rising; a recorder stops at its first rate with
    /// losses, a stream once both have.
    #[arg(long, value_delimiter = ',', default_value = "5,10,20,30,45,60")]
    pub rates: Vec<f64>,
    /// Seconds each row publishes.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// The recorder's --max-cache-size.
    #[arg(long, default_value = "512MiB", value_parser = parse_size, value_name = "SIZE")]
    pub max_cache_size: u64,
    /// Run the baseline beside every row: stock rclpy (ROS 2 Jazzy) recording the same stream
    /// with the `mcap` Python writer, in a private network namespace (root only) [default:
    /// on when the --ros-jazzy interpreter exists and this is root; otherwise a line says why
    /// not].
    #[arg(long, overrides_with = "no_baseline")]
    pub baseline: bool,
    /// Leave the baseline out.
    #[arg(long, overrides_with = "baseline")]
    pub no_baseline: bool,
    /// The stock ROS 2 Jazzy interpreter of the baseline (rclpy, sensor_msgs, mcap).
    #[arg(long, value_name = "PYTHON", default_value = ".venv-ros-jazzy/bin/python")]
    pub ros_jazzy: PathBuf,
    /// Keep every row's bag (freight's directory, the baseline's .mcap) and the work
    /// directory holding them; the JSON names each row's.
    #[arg(long)]
    pub keep_bags: bool,
    /// Write the rows as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Internal: this process is the re-executed benchmark inside its network namespace.
    #[arg(long, hide = true)]
    pub inside_namespace: bool,
}

/// One stream at one rate, by one recorder.
#[derive(Debug, Clone, Serialize)]
struct Row {
    recorder: Recorder,
    stream: Stream,
    rate_hz: f64,
    offered_mb_s: f64,
    published: u64,
    recorded: u64,
    lost: u64,
    /// Bytes recorded per second, from the recorder's first message until it
    /// has synced its last file.
    recorded_mb_s: f64,
    fraction_of_disk: f64,
    recorder_cpu_cores: f64,
    recorder_peak_mib: u64,
    /// Of the peak, the recorder's private memory (cache, buffers): freight's
    /// recorder reports it apart from the publishers' shared memory it read.
    recorder_private_mib: Option<u64>,
    /// The bag, when kept (--keep-bags).
    #[serde(skip_serializing_if = "Option::is_none")]
    bag: Option<PathBuf>,
}

impl Row {
    fn lossless(&self) -> bool {
        self.lost == 0 && self.recorded >= self.published
    }
}

/// Whether the baseline runs, decided before anything is measured.
enum BaselinePlan {
    /// Run it; the run is (or will be re-executed) in a private network namespace.
    Run,
    /// Leave it out, for this reason (printed).
    Skip(String),
}

/// Runs `freight bench record`. With the baseline on, it first re-executes itself in a
/// private network namespace and returns the inner run's exit status.
pub fn run(args: &RecordBenchArgs) -> Result<ExitCode, BenchError> {
    let plan = baseline_plan(args)?;
    if matches!(plan, BaselinePlan::Run) && !args.inside_namespace {
        return namespace::reexec("freight bench record");
    }
    if args.inside_namespace {
        namespace::enter("freight bench record")?;
    }
    stop::install();
    let work = make_work_dir(&args.dir).map_err(|e| BenchError::new(e, "give a writable --dir"))?;
    let result = measure(args, &work, plan);
    if args.keep_bags {
        println!("kept the bags in {}", work.display());
    } else {
        let _ = fs::remove_dir_all(&work);
    }
    let (disk, rows) = result?;
    println!("{}", table(disk, &rows));
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "disk_mb_s": disk / 1e6, "rows": rows });
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| BenchError::new(format!("encoding the rows: {e}"), "report it"))?;
        fs::write(path, text)
            .map_err(|e| BenchError::new(format!("writing {}: {e}", path.display()), "give --json a writable path"))?;
    }
    if stop::requested() {
        return Err(BenchError::new("interrupted", "run it again to measure every row"));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--baseline` insists (an error where it cannot run), `--no-baseline` declines, neither
/// runs it where it can and says why not where it cannot.
fn baseline_plan(args: &RecordBenchArgs) -> Result<BaselinePlan, BenchError> {
    if args.no_baseline {
        return Ok(BaselinePlan::Skip("--no-baseline".into()));
    }
    let python = &args.ros_jazzy;
    let missing = python.components().count() > 1 && !python.exists();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let why_not = if missing {
        Some((
            format!("{} does not exist", python.display()),
            "scripts/install-deps.sh installs .venv-ros-jazzy; --ros-jazzy PYTHON names another interpreter",
        ))
    } else if !root {
        Some((
            "it needs root: stock Fast DDS runs in a private network namespace (unshare --net) so that \
             its multicast discovery reaches no interface of this machine"
                .into(),
            "run it as root (sudo freight bench record ...)",
        ))
    } else {
        None
    };
    match why_not {
        None => Ok(BaselinePlan::Run),
        Some((what, fix)) if args.baseline => Err(BenchError::new(format!("--baseline: {what}"), fix)),
        Some((what, fix)) => Ok(BaselinePlan::Skip(format!("{what} ({fix}; --no-baseline silences this)"))),
    }
}

fn make_work_dir(parent: &Path) -> Result<PathBuf, String> {
    let dir = parent.join(format!(".freight-bench-record-{}", std::process::id()));
    fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn measure(args: &RecordBenchArgs, work: &Path, plan: BaselinePlan) -> Result<(f64, Vec<Row>), BenchError> {
    let (buffered, direct) =
        disk_rate(work, args.disk_bytes).map_err(|e| BenchError::new(e, "give a writable --dir"))?;
    let disk = direct.map_or(buffered, |d| d.max(buffered));
    println!(
        "disk: {:.0} MB/s sustained ({} written and synced in {}: {:.0} MB/s through the page cache, {})",
        disk / 1e6,
        format_size(args.disk_bytes),
        work.display(),
        buffered / 1e6,
        direct.map_or("O_DIRECT refused".to_string(), |d| format!("{:.0} MB/s with O_DIRECT", d / 1e6)),
    );
    let baseline = match plan {
        BaselinePlan::Skip(why) => {
            println!("baseline (stock rclpy + mcap): not run: {why}");
            None
        }
        BaselinePlan::Run => match Baseline::prepare(&args.ros_jazzy, work) {
            Ok((baseline, runs_on)) => {
                println!(
                    "baseline: stock rclpy + mcap ({runs_on}) from {}, in a private network namespace",
                    args.ros_jazzy.display()
                );
                Some(baseline)
            }
            Err(e) if args.baseline => return Err(e.context("--baseline")),
            Err(e) => {
                println!("baseline (stock rclpy + mcap): not run: {} ({})", e.what(), e.fix());
                None
            }
        },
    };
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::new(format!("finding this program: {e}"), "run freight from a path that exists"))?;
    let failed = |e: String| BenchError::new(e, "check the recorders' output above; run the row alone to see more");
    let mut rows = Vec::new();
    for &stream in &args.streams {
        let (mut freight_done, mut baseline_done) = (false, baseline.is_none());
        for &rate in &args.rates {
            if stop::requested() || (freight_done && baseline_done) {
                break;
            }
            if !freight_done {
                let row = one_row(&exe, args, work, stream, rate, disk).map_err(failed)?;
                freight_done = !row.lossless();
                rows.push(report(row));
            }
            if let (Some(b), false) = (&baseline, baseline_done || stop::requested()) {
                let (mut row, bag) = b.row(stream, rate, args.seconds, disk).map_err(failed)?;
                row.bag = keep_or_remove(args, &bag);
                baseline_done = !row.lossless();
                rows.push(report(row));
            }
        }
    }
    Ok((disk, rows))
}

/// Prints the row's counts as it ends, and passes it on.
fn report(row: Row) -> Row {
    println!(
        "  {:?} at {} Hz, {}: published {}, recorded {}, lost {}",
        row.stream,
        row.rate_hz,
        row.recorder.label(),
        row.published,
        row.recorded,
        row.lost
    );
    row
}

/// The bag's path when --keep-bags keeps it; otherwise removes it (counted already).
fn keep_or_remove(args: &RecordBenchArgs, bag: &Path) -> Option<PathBuf> {
    if args.keep_bags {
        return Some(bag.to_path_buf());
    }
    let _ = if bag.is_dir() { fs::remove_dir_all(bag) } else { fs::remove_file(bag) };
    None
}

/// The directory's sustained write rate, bytes/s, measured the two ways a
/// file is written: through the page cache (then synced), and with `O_DIRECT`
/// past it, as `freight bag record` writes where the file system allows
/// (`None` where it does not). The disk's rate is the faster of the two.
fn disk_rate(dir: &Path, bytes: u64) -> Result<(f64, Option<f64>), String> {
    use std::os::unix::fs::OpenOptionsExt;
    const BLOCK: usize = 8 << 20;
    // O_DIRECT writes from memory aligned to the device's block: take an
    // aligned window of a larger allocation.
    let memory = vec![0x5au8; BLOCK + 4096];
    let skip = memory.as_ptr().align_offset(4096);
    let block = &memory[skip..skip + BLOCK];
    let path = dir.join("disk-rate");
    let timed = |flags: i32| -> std::io::Result<f64> {
        let started = Instant::now();
        let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(flags).open(&path)?;
        let mut left = bytes;
        while left > 0 {
            // O_DIRECT writes whole blocks: the last one is cut to 4 KiB multiples.
            let n = (left.min(BLOCK as u64) as usize).next_multiple_of(4096).min(BLOCK);
            f.write_all(&block[..n])?;
            left = left.saturating_sub(n as u64);
        }
        f.sync_all()?;
        Ok(bytes as f64 / started.elapsed().as_secs_f64().max(1e-9))
    };
    let buffered = timed(0);
    let direct = timed(libc::O_DIRECT);
    let _ = fs::remove_file(&path);
    let buffered = buffered.map_err(|e| format!("measuring the disk in {}: {e}", dir.display()))?;
    match direct {
        Ok(rate) => Ok((buffered, Some(rate))),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((buffered, None)),
        Err(e) => Err(format!("measuring the disk with O_DIRECT in {}: {e}", dir.display())),
    }
}

fn one_row(
    exe: &Path,
    args: &RecordBenchArgs,
    work: &Path,
    stream: Stream,
    rate: f64,
    disk: f64,
) -> Result<Row, String> {
    let bag = work.join(format!("row-{}-{rate}", stream.bytes()));
    let count = (rate * args.seconds).round().max(1.0) as u64;
    let limit = Duration::from_secs_f64(args.seconds * 3.0 + 60.0);
    let mut recorder = Command::new(exe);
    recorder
        .args(["bag", "record", topic(), "-o"])
        .arg(&bag)
        .args(["--max-cache-size", &args.max_cache_size.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    dies_with_this_process(&mut recorder);
    let recorder = recorder.spawn().map_err(|e| format!("starting the recorder: {e}"))?;
    let mut publisher = Command::new(exe);
    publisher.args(["topic", "pub", topic(), stream.type_name()]).args(stream.publisher_args()).args([
        "--rate",
        &rate.to_string(),
        "--count",
        &count.to_string(),
        "--wait-for-subscribers",
        "1",
        "--keep-alive",
        &KEEP_ALIVE_S.to_string(),
    ]);
    dies_with_this_process(&mut publisher);
    let started = Instant::now();
    let published = run_bounded(publisher, limit);
    // The recorder drains its cache after the signal: that is part of the row.
    // SAFETY: kill only sends a signal to the child we started.
    unsafe { libc::kill(recorder.id() as libc::pid_t, libc::SIGINT) };
    let out = finish_within(recorder, limit, "freight bag record")?;
    // Until the recorder has synced its last file: the rate the disk took,
    // not the rate the page cache took.
    let wall = started.elapsed().as_secs_f64().max(args.seconds);
    let kept = keep_or_remove(args, &bag);
    let (pub_out, pub_finished, pub_err) = published?;
    if !pub_finished {
        return Err(format!("the publisher did not finish within {limit:?}: {}", String::from_utf8_lossy(&pub_err)));
    }
    let pub_text = String::from_utf8_lossy(&pub_out);
    let rec_text = String::from_utf8_lossy(&out.stdout);
    let published = pub_text
        .lines()
        .filter_map(|l| l.strip_prefix("published ")?.split_whitespace().next()?.parse::<u64>().ok())
        .max()
        .map_or(0, |last| last + 1);
    let recorded = first_number(&rec_text, "recorded ").ok_or_else(|| {
        format!("the recorder printed no summary: {}{}", rec_text, String::from_utf8_lossy(&out.stderr))
    })?;
    let lost = rec_text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{}: ", topic())))
        .and_then(|l| l.split(", ").find_map(|p| p.strip_suffix(" lost")?.parse::<u64>().ok()));
    let cpu =
        rec_text.lines().find_map(|l| l.trim().strip_prefix("recorder: ")?.split(' ').next()?.parse::<f64>().ok());
    let peak =
        rec_text.lines().find_map(|l| l.split("peak resident memory ").nth(1)?.split(' ').next()?.parse::<u64>().ok());
    let private =
        rec_text.lines().find_map(|l| l.split(" MiB: private ").nth(1)?.split(' ').next()?.parse::<u64>().ok());
    // The recorder's own measure: bytes over the time from its first message
    // to its last file synced (startup and discovery left out).
    let recorded_mb_s = rec_text
        .lines()
        .find_map(|l| l.split(" synced (").nth(1)?.strip_suffix(" MB/s)")?.parse::<f64>().ok())
        .unwrap_or(recorded as f64 * stream.bytes() as f64 / wall / 1e6);
    Ok(Row {
        recorder: Recorder::Freight,
        stream,
        rate_hz: rate,
        offered_mb_s: rate * stream.bytes() as f64 / 1e6,
        published,
        recorded,
        lost: lost.unwrap_or(0),
        recorded_mb_s,
        fraction_of_disk: recorded_mb_s * 1e6 / disk,
        recorder_cpu_cores: cpu.unwrap_or(0.0) / wall,
        recorder_peak_mib: peak.unwrap_or(0),
        recorder_private_mib: private,
        bag: kept,
    })
}

/// Makes the child get SIGTERM when this process ends, however it ends: the
/// recorder then finishes its bag and the publisher stops, instead of both
/// running on (and filling the disk) after a killed benchmark.
fn dies_with_this_process(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Waits for `child` (`who`, for messages) to exit, reading its output meanwhile; kills it
/// at `limit`, so that a recorder that hangs after the signal ends its row with an error
/// instead of stalling the benchmark.
fn finish_within(mut child: Child, limit: Duration, who: &str) -> Result<Output, String> {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    }
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| format!("waiting for {who}: {e}"))? {
            Some(status) => break status,
            None if Instant::now() > end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{who} did not finish within {} s of the signal", limit.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Ok(Output { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() })
}

/// The number right after `prefix` at the start of a line.
fn first_number(text: &str, prefix: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(prefix)?.split_whitespace().next()?.parse().ok())
}

fn table(disk: f64, rows: &[Row]) -> String {
    let mut out = format!("freight bench record: disk {:.0} MB/s\n\n", disk / 1e6);
    out.push_str("| stream | rate (Hz) | recorder | offered (MB/s) | published | recorded | lost | recorded (MB/s) | of disk | recorder CPU (cores) | recorder peak (MiB) | of it private (MiB) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {:?} | {} | {} | {:.0} | {} | {} | {} | {:.0} | {:.0} % | {:.2} | {} | {} |\n",
            r.stream,
            r.rate_hz,
            r.recorder.label(),
            r.offered_mb_s,
            r.published,
            r.recorded,
            r.lost,
            r.recorded_mb_s,
            r.fraction_of_disk * 100.0,
            r.recorder_cpu_cores,
            r.recorder_peak_mib,
            r.recorder_private_mib.map_or("—".to_string(), |m| m.to_string())
        ));
    }
    for stream in [Stream::FourK, Stream::Cloud] {
        if let Some(line) = summary(rows, stream) {
            out.push_str(&format!("\n{line}"));
        }
    }
    out
}

/// The stream's line under the table: each recorder's highest rate recorded with nothing
/// lost, and freight's recorded MB/s over the baseline's there.
fn summary(rows: &[Row], stream: Stream) -> Option<String> {
    let of = |recorder: Recorder| rows.iter().filter(move |r| r.stream == stream && r.recorder == recorder);
    let best = |recorder: Recorder| {
        of(recorder).filter(|r| r.lossless()).max_by(|a, b| a.recorded_mb_s.total_cmp(&b.recorded_mb_s))
    };
    let describe = |recorder: Recorder| match best(recorder) {
        Some(b) => format!(
            "{} {} Hz, {:.0} MB/s, {:.0} % of the disk's rate",
            recorder.label(),
            b.rate_hz,
            b.recorded_mb_s,
            b.fraction_of_disk * 100.0
        ),
        None => format!("{} lost messages at every rate tried", recorder.label()),
    };
    of(Recorder::Freight).next()?;
    let mut line = format!("{stream:?}: highest rate recorded with nothing lost: {}", describe(Recorder::Freight));
    if of(Recorder::RclpyMcap).next().is_some() {
        line.push_str(&format!("; {}", describe(Recorder::RclpyMcap)));
        if let (Some(f), Some(b)) = (best(Recorder::Freight), best(Recorder::RclpyMcap)) {
            line.push_str(&format!(
                "; freight/baseline {:.1}x (MB/s recorded with nothing lost)",
                f.recorded_mb_s / b.recorded_mb_s.max(1e-9)
            ));
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(recorder: Recorder, rate_hz: f64, lost: u64, recorded_mb_s: f64) -> Row {
        Row {
            recorder,
            stream: Stream::FourK,
            rate_hz,
            offered_mb_s: 0.0,
            published: 10,
            recorded: 10 - lost,
            lost,
            recorded_mb_s,
            fraction_of_disk: recorded_mb_s / 200.0,
            recorder_cpu_cores: 0.1,
            recorder_peak_mib: 100,
            recorder_private_mib: None,
            bag: None,
        }
    }

    #[test]
    fn the_summary_names_both_best_lossless_rates_and_their_ratio() {
        let rows = [
            row(Recorder::Freight, 5.0, 0, 100.0),
            row(Recorder::RclpyMcap, 5.0, 0, 50.0),
            row(Recorder::Freight, 10.0, 0, 150.0),
            row(Recorder::RclpyMcap, 10.0, 2, 60.0),
        ];
        let line = summary(&rows, Stream::FourK).expect("a line");
        assert!(line.contains("freight 10 Hz, 150 MB/s, 75 %"), "{line}");
        assert!(line.contains("rclpy + mcap 5 Hz, 50 MB/s, 25 %"), "{line}");
        assert!(line.ends_with("freight/baseline 3.0x (MB/s recorded with nothing lost)"), "{line}");
        assert!(summary(&rows, Stream::Cloud).is_none());
    }

    #[test]
    fn a_baseline_that_always_lost_is_named_and_left_out_of_the_ratio() {
        let rows = [row(Recorder::Freight, 5.0, 0, 100.0), row(Recorder::RclpyMcap, 5.0, 1, 50.0)];
        let line = summary(&rows, Stream::FourK).expect("a line");
        assert!(line.ends_with("; rclpy + mcap lost messages at every rate tried"), "{line}");
    }
}
