//! `freight bench record`: how close `freight bag record` comes to the disk.
//!
//! First the limit: the output directory's sustained write rate, measured by
//! writing `--disk-bytes` in 8 MiB writes and syncing them. Then, per stream
//! and rate (rising), a `freight topic pub` process publishes for
//! `--seconds` while a `freight bag record` process records it into a new bag
//! in the same directory; the row shows what was published, recorded and
//! lost (the recorder's count from publisher sequence numbers), the rate
//! recorded (bytes over the time from the recorder's first message until it
//! has synced its last file) as a fraction of the disk's, and the
//! recorder's CPU and peak memory. The
//! summary names the highest rate recorded with nothing lost.
//!
//! Streams: `4k`, 3840x2160 BGRA `sensor_msgs/Image` (33 MB); `cloud`, a
//! 55 MB `std_msgs/UInt8MultiArray` (the size of the Qiita seed's point
//! cloud; `freight topic pub` generates no PointCloud2). Each row's bag is
//! deleted after it is counted.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::args::{format_size, parse_size};
use super::sys::run_bounded;
use crate::stop;

const TOPIC: &str = "/freight_bench_record";

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

    fn publisher_args(self) -> Vec<String> {
        match self {
            Stream::FourK => {
                ["sensor_msgs/msg/Image", "--width", "3840", "--height", "2160"].map(String::from).to_vec()
            }
            Stream::Cloud => {
                vec!["std_msgs/msg/UInt8MultiArray".into(), "--size".into(), self.bytes().to_string()]
            }
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
    /// Publish rates to try per stream (Hz), rising; a stream stops at its first rate with losses.
    #[arg(long, value_delimiter = ',', default_value = "5,10,20,30,45,60")]
    pub rates: Vec<f64>,
    /// Seconds each row publishes.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// The recorder's --max-cache-size.
    #[arg(long, default_value = "512MiB", value_parser = parse_size, value_name = "SIZE")]
    pub max_cache_size: u64,
    /// Write the rows as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// One stream at one rate.
#[derive(Debug, Clone, Serialize)]
struct Row {
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
}

/// Runs `freight bench record`.
pub fn run(args: &RecordBenchArgs) -> Result<(), String> {
    stop::install();
    let work = make_work_dir(&args.dir)?;
    let result = measure(args, &work);
    let _ = fs::remove_dir_all(&work);
    let (disk, rows) = result?;
    println!("{}", table(disk, &rows));
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "disk_mb_s": disk / 1e6, "rows": rows });
        fs::write(path, serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn make_work_dir(parent: &Path) -> Result<PathBuf, String> {
    let dir = parent.join(format!(".freight-bench-record-{}", std::process::id()));
    fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn measure(args: &RecordBenchArgs, work: &Path) -> Result<(f64, Vec<Row>), String> {
    let disk = disk_rate(work, args.disk_bytes)?;
    println!(
        "disk: {:.0} MB/s sustained ({} written and synced in {})",
        disk / 1e6,
        format_size(args.disk_bytes),
        work.display()
    );
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let mut rows = Vec::new();
    for &stream in &args.streams {
        for &rate in &args.rates {
            if stop::requested() {
                return Ok((disk, rows));
            }
            let row = one_row(&exe, args, work, stream, rate, disk)?;
            println!(
                "  {:?} at {rate} Hz: published {}, recorded {}, lost {}",
                stream, row.published, row.recorded, row.lost
            );
            let lossy = row.lost > 0 || row.recorded < row.published;
            rows.push(row);
            if lossy {
                break;
            }
        }
    }
    Ok((disk, rows))
}

/// The sustained rate of buffered writes to `dir`, syncing included (bytes/s).
fn disk_rate(dir: &Path, bytes: u64) -> Result<f64, String> {
    let path = dir.join("disk-rate");
    let block = vec![0x5au8; 8 << 20];
    let started = Instant::now();
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&path)?;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])?;
            left -= n as u64;
        }
        f.sync_all()
    };
    let result = write();
    let secs = started.elapsed().as_secs_f64();
    let _ = fs::remove_file(&path);
    result.map_err(|e| format!("measuring the disk in {}: {e}", dir.display()))?;
    Ok(bytes as f64 / secs.max(1e-9))
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
        .args(["bag", "record", TOPIC, "-o"])
        .arg(&bag)
        .args(["--max-cache-size", &args.max_cache_size.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    dies_with_this_process(&mut recorder);
    let recorder = recorder.spawn().map_err(|e| format!("starting the recorder: {e}"))?;
    let mut publisher = Command::new(exe);
    publisher.args(["topic", "pub", TOPIC]).args(stream.publisher_args()).args([
        "--rate",
        &rate.to_string(),
        "--count",
        &count.to_string(),
        "--wait-for-subscribers",
        "1",
    ]);
    dies_with_this_process(&mut publisher);
    let started = Instant::now();
    let published = run_bounded(publisher, limit);
    // The recorder drains its cache after the signal: that is part of the row.
    // SAFETY: kill only sends a signal to the child we started.
    unsafe { libc::kill(recorder.id() as libc::pid_t, libc::SIGINT) };
    let out = recorder.wait_with_output().map_err(|e| format!("waiting for the recorder: {e}"))?;
    // Until the recorder has synced its last file: the rate the disk took,
    // not the rate the page cache took.
    let wall = started.elapsed().as_secs_f64().max(args.seconds);
    let _ = fs::remove_dir_all(&bag);
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
    let recorded = field(&rec_text, "recorded ", 0).ok_or_else(|| {
        format!("the recorder printed no summary: {}{}", rec_text, String::from_utf8_lossy(&out.stderr))
    })?;
    let lost = rec_text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{TOPIC}: ")))
        .and_then(|l| l.split(", ").find_map(|p| p.strip_suffix(" lost")?.parse::<u64>().ok()));
    let cpu =
        rec_text.lines().find_map(|l| l.trim().strip_prefix("recorder: ")?.split(' ').next()?.parse::<f64>().ok());
    let peak =
        rec_text.lines().find_map(|l| l.split("peak resident memory ").nth(1)?.split(' ').next()?.parse::<u64>().ok());
    // The recorder's own measure: bytes over the time from its first message
    // to its last file synced (startup and discovery left out).
    let recorded_mb_s = rec_text
        .lines()
        .find_map(|l| l.split(" synced (").nth(1)?.strip_suffix(" MB/s)")?.parse::<f64>().ok())
        .unwrap_or(recorded as f64 * stream.bytes() as f64 / wall / 1e6);
    Ok(Row {
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

/// The number after `prefix` at the start of a line.
fn field(text: &str, prefix: &str, index: usize) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(prefix)?.split_whitespace().nth(index)?.parse().ok())
}

fn table(disk: f64, rows: &[Row]) -> String {
    let mut out = format!("freight bench record: disk {:.0} MB/s\n\n", disk / 1e6);
    out.push_str("| stream | rate (Hz) | offered (MB/s) | published | recorded | lost | recorded (MB/s) | of disk | recorder CPU (cores) | recorder peak (MiB) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {:?} | {} | {:.0} | {} | {} | {} | {:.0} | {:.0} % | {:.2} | {} |\n",
            r.stream,
            r.rate_hz,
            r.offered_mb_s,
            r.published,
            r.recorded,
            r.lost,
            r.recorded_mb_s,
            r.fraction_of_disk * 100.0,
            r.recorder_cpu_cores,
            r.recorder_peak_mib
        ));
    }
    for stream in [Stream::FourK, Stream::Cloud] {
        let best = rows
            .iter()
            .filter(|r| r.stream == stream && r.lost == 0 && r.recorded >= r.published)
            .max_by(|a, b| a.recorded_mb_s.total_cmp(&b.recorded_mb_s));
        if let Some(b) = best {
            out.push_str(&format!(
                "\n{:?}: highest rate recorded with nothing lost: {} Hz, {:.0} MB/s, {:.0} % of the disk's rate",
                stream,
                b.rate_hz,
                b.recorded_mb_s,
                b.fraction_of_disk * 100.0
            ));
        }
    }
    out
}
