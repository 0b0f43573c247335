//! The per-process half of `freight bench scale`: one Python process creates `N`
//! publishers and `N` subscriptions of `std_msgs/UInt8MultiArray` on `N` topics, with
//! freight's Python API and with stock rclpy (Jazzy and Kilted, Fast DDS on its defaults),
//! in the same run — what issue 23 measured by hand. The script is `one_process.py`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::super::python::StackInterpreters;
use super::super::sys::{lines_of, tail_of};
use super::MARK;
use crate::private_dir::PrivateDir;

/// The script, written to a private directory for each run (root runs it).
const SCRIPT: &str = include_str!("one_process.py");
/// How long one stack gets: a stock node makes 600 endpoints in well under a second.
const LIMIT: Duration = Duration::from_secs(120);

/// What one stack's process cost.
#[derive(Debug, Clone, Serialize)]
pub struct OneProcess {
    /// `freight`, `rclpy jazzy`, `rclpy kilted`.
    pub stack: String,
    /// The measurement, or why there is none.
    pub outcome: Result<Costs, String>,
}

/// Creation time, descriptors and resident memory of one process's endpoints.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Costs {
    /// Publishers and subscriptions made (2 N).
    pub endpoints: u32,
    /// Seconds to create them.
    pub create_s: f64,
    /// Open descriptors before (after init and the node) and after.
    pub fds: (usize, usize),
    /// VmRSS before and after, MiB.
    pub rss_mib: (f64, f64),
}

impl Costs {
    /// Descriptors each endpoint added.
    pub fn fds_per_endpoint(&self) -> f64 {
        self.fds.1.saturating_sub(self.fds.0) as f64 / f64::from(self.endpoints.max(1))
    }

    /// MiB each endpoint added.
    pub fn rss_mib_per_endpoint(&self) -> f64 {
        (self.rss_mib.1 - self.rss_mib.0).max(0.0) / f64::from(self.endpoints.max(1))
    }
}

/// Runs the script with each stack's interpreter, `topics` publishers and as many
/// subscriptions each. A stack whose interpreter is missing or fails gets its reason, not
/// a number.
pub fn measure(interpreters: &StackInterpreters, topics: u32) -> Vec<OneProcess> {
    let stacks = [
        ("freight", "freight", interpreters.freight()),
        ("rclpy jazzy", "rclpy", interpreters.ros_jazzy.clone()),
        ("rclpy kilted", "rclpy", interpreters.ros_kilted.clone()),
    ];
    let dir = PrivateDir::new("freight-bench-scale");
    let script = dir.as_ref().map_err(ToString::to_string).and_then(|d| {
        let script = d.path().join("one_process.py");
        std::fs::write(&script, SCRIPT).map(|()| script).map_err(|e| e.to_string())
    });
    stacks
        .into_iter()
        .map(|(stack, api, python)| OneProcess {
            stack: stack.into(),
            outcome: match &script {
                Ok(script) => run(&python, script, api, topics),
                Err(e) => Err(format!("cannot write the script: {e}")),
            },
        })
        .collect()
}

fn run(python: &Path, script: &Path, api: &str, topics: u32) -> Result<Costs, String> {
    if !python.exists() {
        return Err(format!("{} is not installed (make test installs it)", python.display()));
    }
    let mut child = Command::new(python)
        .arg(script)
        .args([api, &topics.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("the script's output is not piped".into());
    };
    let (lines, errors) = (lines_of(stdout), tail_of(stderr, 4096));
    let deadline = Instant::now() + LIMIT;
    let line = loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.starts_with(MARK) => break Some(line),
            Ok(_) => {}
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let Some(line) = line else {
        let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let last = errors.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_owned();
        return Err(format!("no result (within {} s): {last}", LIMIT.as_secs()));
    };
    parse(&line, topics)
}

/// `#scale# ONE <create s> <fds before> <fds after> <rss KiB before> <after>`.
fn parse(line: &str, topics: u32) -> Result<Costs, String> {
    let words: Vec<&str> = line.strip_prefix(MARK).unwrap_or(line).split_whitespace().collect();
    let bad = || format!("an unexpected line from the script: {line:?}");
    let [_, create, fds_before, fds_after, rss_before, rss_after] = words[..] else { return Err(bad()) };
    let kib = |w: &str| w.parse::<u64>().map(|k| k as f64 / 1024.0).map_err(|_| bad());
    Ok(Costs {
        endpoints: topics.saturating_mul(2),
        create_s: create.parse().map_err(|_| bad())?,
        fds: (fds_before.parse().map_err(|_| bad())?, fds_after.parse().map_err(|_| bad())?),
        rss_mib: (kib(rss_before)?, kib(rss_after)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_line_is_read_and_per_endpoint_costs_follow() {
        let c = parse("#scale# ONE 0.180000 10 18 90000 101376", 300).unwrap();
        assert_eq!((c.endpoints, c.fds), (600, (10, 18)));
        assert!((c.create_s - 0.18).abs() < 1e-9);
        assert!((c.fds_per_endpoint() - 8.0 / 600.0).abs() < 1e-9);
        assert!((c.rss_mib_per_endpoint() - 11376.0 / 1024.0 / 600.0).abs() < 1e-9);
        assert!(parse("#scale# ONE 0.1 10", 3).is_err());
        assert!(parse("Traceback (most recent call last):", 3).is_err());
    }
}
