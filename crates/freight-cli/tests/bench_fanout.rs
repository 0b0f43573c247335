//! End-to-end: `freight bench latency --subscribers` (fan-out) and `freight bench throughput`,
//! run as a user would. They check that the rows exist and hold sane numbers; how fast they
//! are is for BENCHMARKS.md, not for a test.

use std::process::Command;

use freight_testkit::PrivateDir;

fn freight(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_freight")).args(args).output().expect("run freight")
}

fn json_rows(path: &std::path::Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).expect("json written")).expect("valid json")
}

#[test]
fn fanout_rows_measure_the_last_of_several_subscriber_processes() {
    let dir = PrivateDir::new("freight-cli-fanout");
    let json = dir.path().join("rows.json");
    let json_arg = json.to_str().expect("a UTF-8 temporary path");
    let out = freight(&[
        "bench",
        "latency",
        "--subscribers",
        "1,3",
        "--transports",
        "shm-loan,iceoryx2",
        "--sizes",
        "1MiB",
        "--wait",
        "block",
        "--iterations",
        "100",
        "--json",
        json_arg,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight failed: {stderr}");

    let rows = json_rows(&json);
    assert_eq!(rows.len(), 4, "2 transports x 2 subscriber counts: {rows:#?}");
    for transport in ["shm-loan", "iceoryx2"] {
        for n in [1, 3] {
            let row = rows
                .iter()
                .find(|r| r["transport"] == transport && r["subscribers"] == n)
                .unwrap_or_else(|| panic!("no {transport} row with {n} subscribers: {rows:#?}"));
            let p50 = row["p50_us"].as_f64().expect("p50_us is a number");
            assert!(p50 > 0.0, "{row}");
            assert!(row["p99_us"].as_f64().unwrap() >= p50, "{row}");
            assert!(row["publish_p50_us"].as_f64().expect("publish_p50_us is a number") > 0.0, "{row}");
            assert_eq!(row["size_bytes"], 1 << 20, "{row}");
        }
    }

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("transport | wait  | subs |"), "{stdout}");
    assert!(stdout.contains("publish p50 µs"), "{stdout}");
    let shm_loan_3 = stdout
        .lines()
        .find(|l| l.starts_with("shm-loan") && l.contains("|    3 |"))
        .unwrap_or_else(|| panic!("no shm-loan row with 3 subscribers: {stdout}"));
    assert!(shm_loan_3.trim_end().ends_with('x'), "compared with iceoryx2 at 3 subscribers: {shm_loan_3}");
}

#[test]
fn throughput_rows_count_messages_at_every_subscriber() {
    let dir = PrivateDir::new("freight-cli-throughput");
    let json = dir.path().join("rows.json");
    let json_arg = json.to_str().expect("a UTF-8 temporary path");
    let out = freight(&[
        "bench",
        "throughput",
        "--subscribers",
        "1,2",
        "--transports",
        "shm-loan,iceoryx2",
        "--sizes",
        "8B,1MiB",
        "--wait",
        "block",
        "--duration-per-row",
        "0.3",
        "--json",
        json_arg,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight failed: {stderr}");

    let rows = json_rows(&json);
    assert_eq!(rows.len(), 2 * 2 * 2, "{rows:#?}");
    for row in &rows {
        assert!(row["published_per_s"].as_f64().expect("a number") > 0.0, "{row}");
        assert!(row["received_per_s"].as_f64().expect("a number") > 0.0, "{row}");
        let share = row["received_share"].as_f64().expect("a number");
        assert!(share > 0.0 && share <= 1.0, "{row}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("received msgs/s"), "{stdout}");
    assert_eq!(stdout.matches("baseline").count(), 4, "one iceoryx2 row per subscriber count and size: {stdout}");
}

#[test]
fn fanout_refuses_transports_without_subscriber_processes() {
    let out = freight(&["bench", "latency", "--subscribers", "2", "--transports", "intra"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("intra cannot measure more than one subscriber"), "{stderr}");
    assert!(stderr.contains("shm-loan, shm-copy, iceoryx2"), "the transports that can are named: {stderr}");
    assert!(out.stdout.is_empty(), "nothing may be measured");

    let out = freight(&["bench", "throughput", "--transports", "memcpy"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("memcpy cannot be measured for throughput"), "{stderr}");
}
