//! `freight bench ros2` end to end: stock rclpy of Jazzy and Kilted (the venvs `make test`
//! installs) against freight's Python and Rust stacks, in the namespace the command makes.
//! It needs root; without root one test checks the message a user gets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use freight_testkit::{skip, Lack, PrivateDir};
use serde_json::Value;

/// The workspace root: the command's default interpreter paths are relative to it.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether namespaces can be made here; prints why not where CI's log shows it.
fn can_run() -> bool {
    if !is_root() {
        skip("freight bench ros2", Lack::Setup, "needs root (a private network namespace)");
        return false;
    }
    true
}

fn bench(args: &[&str], json: &Path) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .current_dir(repo())
        .args(["bench", "ros2", "--quick", "--json"])
        .arg(json)
        .args(args)
        .output()
        .expect("run freight bench ros2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight bench ros2 failed:\n{stderr}");
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| panic!("no JSON ({e}):\n{stderr}"));
    (out, serde_json::from_str(&text).expect("the JSON parses"))
}

fn row<'a>(rows: &'a Value, stack: &str) -> &'a Value {
    rows["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["stack"] == stack)
        .unwrap_or_else(|| panic!("no {stack} row in {rows}"))
}

#[test]
fn every_stack_is_measured_against_real_stock_ros2() {
    if !can_run() {
        return;
    }
    let dir = PrivateDir::new("freight-bench-ros2-test");
    let json = dir.path().join("rows.json");
    let (out, rows) = bench(&[], &json);
    for (stack, runs_on) in [
        ("jazzy", "rmw_fastrtps_cpp, Fast DDS 2.14"),
        ("kilted", "rmw_fastrtps_cpp, Fast DDS 3."),
        ("freight-py", "freight"),
        ("freight-rs", "freight"),
    ] {
        let r = row(&rows, stack);
        assert_eq!(r["status"], "measured", "{stack}: {r}");
        assert!(r["runs_on"].as_str().is_some_and(|s| s.starts_with(runs_on)), "{stack}: {r}");
        assert_eq!(r["bytes"], 1920 * 1080 * 4, "{stack}: {r}");
        let latencies = r["latency_ns"].as_array().expect("latencies");
        assert_eq!(latencies.len() as u64, r["round_trips"].as_u64().expect("round trips"), "{stack}");
        assert!(!latencies.is_empty() && latencies.iter().all(|l| l.as_u64().is_some_and(|ns| ns > 0)), "{r}");
    }
    // The speedup column is computed against the Jazzy row of the same run.
    assert_eq!(row(&rows, "jazzy")["x_vs_stock_jazzy"], 1.0);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().filter(|l| l.contains("Image 1920x1080")).count(), 4, "{table}");
}

#[test]
fn a_missing_interpreter_is_a_row_that_says_so_and_the_rest_is_measured() {
    if !can_run() {
        return;
    }
    let dir = PrivateDir::new("freight-bench-ros2-test");
    let json = dir.path().join("rows.json");
    let (out, rows) = bench(&["--stacks", "jazzy,freight-rs", "--ros-jazzy", "/nonexistent/venv/bin/python"], &json);
    let jazzy = row(&rows, "jazzy");
    assert_eq!(jazzy["status"], "not run", "{jazzy}");
    assert!(jazzy["why"].as_str().is_some_and(|w| w.contains("/nonexistent/venv/bin/python")), "{jazzy}");
    assert_eq!(row(&rows, "freight-rs")["status"], "measured");
    // With no Jazzy row there is nothing to compare with, and the table says why.
    assert!(row(&rows, "freight-rs")["x_vs_stock_jazzy"].is_null());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("not run: /nonexistent/venv/bin/python does not exist"), "{table}");
}

#[test]
fn without_root_it_says_what_it_needs() {
    let Some(mut cmd) = freight_testkit::unprivileged("bench ros2 without root", env!("CARGO_BIN_EXE_freight")) else {
        return;
    };
    let out = cmd.args(["bench", "ros2", "--quick"]).output().expect("run freight bench ros2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("needs root") && stderr.contains("network namespace"), "{stderr}");
}
