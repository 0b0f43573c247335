//! The baseline rows of `freight bench record`: stock rclpy writing the same stream with the
//! `mcap` Python writer, what a Python user records with today.
//!
//! Both roles are [`SCRIPT`] run by the stock ROS 2 Jazzy interpreter (`.venv-ros-jazzy`,
//! rclpy on rmw_fastrtps_cpp from PyPI, with `mcap` from `scripts/requirements-ros-jazzy.txt`)
//! on their defaults: the environment less [`STOCK_ENV_REMOVED`], rclpy's default profile
//! (reliable, keep last 10, as `freight topic pub`'s rows). Stock Fast DDS discovers by
//! multicast, so the whole benchmark runs in a private network namespace when the baseline
//! is on (see the parent module). The row is counted as freight's is: published from the
//! publisher, recorded and lost from the recorder's sequence numbers, the rate from the
//! recorder's first message until its file is synced.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::super::ros2::STOCK_ENV_REMOVED;
use super::super::sys::run_bounded;
use super::super::BenchError;
use super::{dies_with_this_process, finish_within, Recorder, Row, Stream, KEEP_ALIVE_S};

/// The stock side, embedded: stock rclpy and `mcap` only.
pub const SCRIPT: &str = include_str!("rclpy_mcap.py");

/// Seconds the interpreter has to import rclpy and mcap and answer the probe.
const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// The stock recorder ready to run rows: its interpreter, and the script and the schemas
/// written to the work directory.
pub struct Baseline {
    python: PathBuf,
    script: PathBuf,
    work: PathBuf,
}

/// What the publisher prints at its end (`SENT {...}`).
#[derive(Debug, Deserialize)]
struct Sent {
    published: u64,
    /// From the first publish to the last.
    seconds: f64,
    all_acked: bool,
}

/// What the recorder prints at its end (`RECORDED {...}`).
#[derive(Debug, Deserialize)]
struct Recorded {
    received: u64,
    lost: u64,
    bytes: u64,
    seconds: f64,
    cpu_s: f64,
    peak_rss_kib: u64,
}

impl Baseline {
    /// Writes the script and the schemas to `work` and checks that `python` imports rclpy
    /// and mcap; returns the baseline and what it runs on (rmw and mcap version).
    pub fn prepare(python: &Path, work: &Path) -> Result<(Baseline, String), BenchError> {
        let install = "scripts/install-deps.sh installs .venv-ros-jazzy with mcap (or `.venv-ros-jazzy/bin/pip \
                       install -r scripts/requirements-ros-jazzy.txt`); --ros-jazzy PYTHON names another, \
                       --no-baseline leaves it out";
        if python.components().count() > 1 && !python.exists() {
            return Err(BenchError::new(format!("{} does not exist", python.display()), install));
        }
        let script = work.join("rclpy_mcap.py");
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).map_err(|e| {
                BenchError::new(format!("cannot write {}: {e}", path.display()), "check the --dir directory")
            })
        };
        write(&script, SCRIPT)?;
        for stream in [Stream::FourK, Stream::Cloud] {
            let schema = freight_bag::Schema::built_in(stream.type_name()).ok_or_else(|| {
                BenchError::new(
                    format!("freight knows no definition of {}", stream.type_name()),
                    "this build is broken: report it",
                )
            })?;
            write(&schema_path(work, stream), &schema.ros2msg)?;
        }
        let baseline = Baseline { python: python.to_path_buf(), script, work: work.to_path_buf() };
        let out = run_bounded(baseline.command(&["probe"]), PROBE_LIMIT)
            .map_err(|e| BenchError::new(format!("cannot run {}: {e}", python.display()), install))?;
        let text = String::from_utf8_lossy(&out.0);
        match text.lines().find_map(|l| l.strip_prefix("PROBE ")) {
            Some(detail) if out.1 => Ok((baseline, detail.trim().to_string())),
            _ => {
                let stderr = String::from_utf8_lossy(&out.2);
                // The last line of a traceback is the exception, e.g. "ModuleNotFoundError: ...".
                let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
                Err(BenchError::new(format!("{} cannot run the stock recorder: {last}", python.display()), install))
            }
        }
    }

    /// The interpreter running the script with `args`, on stock defaults.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script).args(args).stdin(Stdio::null());
        for var in STOCK_ENV_REMOVED {
            cmd.env_remove(var);
        }
        cmd
    }

    /// One row: the stock publisher at `rate` for `seconds`, the stock recorder writing
    /// `<work>/<name>.mcap`. The file stays for the caller to delete or keep.
    pub fn row(&self, stream: Stream, rate: f64, seconds: f64, disk: f64) -> Result<(Row, PathBuf), String> {
        let bag = self.work.join(format!("rclpy-mcap-{}-{rate}.mcap", stream.bytes()));
        let count = (rate * seconds).round().max(1.0) as u64;
        // The publisher's own waits (60 s for a match, 60 s for the acks) and the row itself.
        let limit = Duration::from_secs_f64(seconds * 3.0 + 150.0);
        let (path, schema) = (bag.to_string_lossy(), schema_path(&self.work, stream));
        let mut recorder =
            self.command(&["rec", super::topic(), stream.stock_kind(), &path, &schema.to_string_lossy()]);
        recorder.stdout(Stdio::piped()).stderr(Stdio::piped());
        dies_with_this_process(&mut recorder);
        let recorder = recorder.spawn().map_err(|e| format!("starting the stock recorder: {e}"))?;
        let mut publisher = self.command(&["pub", super::topic(), stream.stock_kind()]);
        publisher.args(stream.stock_dims()).args(["--rate", &rate.to_string(), "--count", &count.to_string()]);
        publisher.args(["--keep-alive", &KEEP_ALIVE_S.to_string()]);
        dies_with_this_process(&mut publisher);
        let started = Instant::now();
        let published = run_bounded(publisher, limit);
        // As freight's recorder, the stock one takes what is still delivered after the
        // signal, then finishes and syncs its file: part of the row.
        // SAFETY: kill only sends a signal to the child we started.
        unsafe { libc::kill(recorder.id() as libc::pid_t, libc::SIGINT) };
        let out = finish_within(recorder, limit, "the stock recorder")?;
        let wall = started.elapsed().as_secs_f64().max(seconds);
        let (pub_out, pub_finished, pub_err) = published?;
        let pub_text = String::from_utf8_lossy(&pub_out);
        let sent: Sent = summary(&pub_text, "SENT ").ok_or_else(|| {
            let state = if pub_finished { "printed no summary" } else { "failed" };
            format!("the stock publisher {state}: {}{}", pub_text.trim(), String::from_utf8_lossy(&pub_err).trim())
        })?;
        let rec_text = String::from_utf8_lossy(&out.stdout);
        let recorded: Recorded = summary(&rec_text, "RECORDED ").ok_or_else(|| {
            format!(
                "the stock recorder printed no summary: {}{}",
                rec_text.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
        if !sent.all_acked {
            println!("  stock publisher: not every message was acknowledged within its wait");
        }
        // rclpy serializes (copies) every message in `publish`: at a high rate the publisher,
        // not the recorder, may be what holds the row back. Say so rather than hide it.
        let intended = (count - 1) as f64 / rate;
        if sent.seconds > intended * 1.1 + 0.05 {
            println!(
                "  stock publisher: {} messages took {:.2} s instead of {intended:.2} s: it could not keep {rate} Hz",
                sent.published, sent.seconds
            );
        }
        let recorded_mb_s = recorded.bytes as f64 / recorded.seconds.max(1e-9) / 1e6;
        let row = Row {
            recorder: Recorder::RclpyMcap,
            stream,
            rate_hz: rate,
            offered_mb_s: rate * stream.bytes() as f64 / 1e6,
            published: sent.published,
            recorded: recorded.received,
            // Messages after the last one received are not gaps: count them from the publisher.
            lost: recorded.lost.max(sent.published.saturating_sub(recorded.received)),
            recorded_mb_s,
            fraction_of_disk: recorded_mb_s * 1e6 / disk,
            recorder_cpu_cores: recorded.cpu_s / wall,
            recorder_peak_mib: recorded.peak_rss_kib / 1024,
            // The stock recorder's own report has no split (its DDS shared memory is small).
            recorder_private_mib: None,
            bag: None,
        };
        Ok((row, bag))
    }
}

fn schema_path(work: &Path, stream: Stream) -> PathBuf {
    work.join(format!("{}.msg", stream.type_name().replace('/', "_")))
}

/// The JSON after `prefix` on one of `text`'s lines.
fn summary<T: serde::de::DeserializeOwned>(text: &str, prefix: &str) -> Option<T> {
    text.lines().find_map(|l| serde_json::from_str(l.strip_prefix(prefix)?).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_read_from_their_line() {
        let text = "noise\nRECORDED {\"received\": 3, \"lost\": 1, \"unreadable\": 0, \"bytes\": 99, \
                    \"seconds\": 1.5, \"cpu_s\": 0.5, \"peak_rss_kib\": 2048}\n";
        let r: Recorded = summary(text, "RECORDED ").expect("a summary");
        assert_eq!((r.received, r.lost, r.bytes, r.peak_rss_kib), (3, 1, 99, 2048));
        assert!(summary::<Sent>(text, "SENT ").is_none());
        assert!(summary::<Recorded>("RECORDED {broken", "RECORDED ").is_none());
    }

    #[test]
    fn the_script_is_stock_rclpy_and_mcap_only() {
        assert!(!SCRIPT.lines().any(|l| l.contains("import freight") || l.contains("from freight")));
        assert!(SCRIPT.contains("raw=True") && SCRIPT.contains("os.fsync"));
    }
}
