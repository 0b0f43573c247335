//! `freight bench scale` end to end: more processes with DDS on one host than
//! `rmw_cyclonedds` lets start (it allows 32 participants), each with topics of its own
//! and another's, in the private host the command makes, then one process of each Python
//! stack (freight's, stock rclpy Jazzy and Kilted: the venvs `make test` installs). It needs
//! root.

use std::path::Path;
use std::process::Command;

use freight_testkit::{skip, Lack, PrivateDir};
use serde_json::Value;

#[test]
fn thirty_six_processes_match_list_and_leave_nothing_behind() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("freight bench scale", Lack::Setup, "needs root (a private network namespace and tmpfs)");
    }
    let dir = PrivateDir::new("freight-bench-scale-test");
    let json = dir.path().join("scale.json");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        // The default interpreter paths are relative to the workspace root.
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .args(["bench", "scale", "--processes", "36", "--endpoints", "4", "--topics", "72", "--per-process", "20"])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run freight bench scale");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight bench scale failed:\n{stdout}\n{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON")).expect("it parses");
    assert_eq!(r["topics_listed"], 72, "{r}");
    assert_eq!(r["left_by_killed"], Value::Array(vec![]), "a killed worker left files: {r}");
    assert_eq!(r["left_at_exit"], Value::Array(vec![]), "{r}");
    // Descriptors of the workers were read (a worker with none would not be running).
    assert!(r["fds_per_process"][1].as_u64().unwrap() > 0, "{r}");
    assert!(stdout.contains("left by a killed one   none"), "{stdout}");
    // The one-process comparison ran on every stack, and read real processes.
    let stacks: Vec<&str> = r["per_process"].as_array().unwrap().iter().filter_map(|p| p["stack"].as_str()).collect();
    assert_eq!(stacks, ["freight", "rclpy jazzy", "rclpy kilted"], "{r}");
    for p in r["per_process"].as_array().unwrap() {
        let costs = &p["outcome"]["Ok"];
        assert_eq!(costs["endpoints"], 40, "{p}");
        assert!(costs["fds"][1].as_u64().unwrap() > 0 && costs["rss_mib"][1].as_f64().unwrap() > 1.0, "{p}");
    }
    assert!(stdout.contains("one process, 20 publishers and 20 subscriptions"), "{stdout}");
}
