//! `freight bench soak` end to end: a short chaos soak in the namespaces the command makes,
//! whose JSON must show every check passing, processes killed and stopped, and traffic on
//! every topology. It needs root; the message a user without root gets is checked as
//! `nobody`. (The checks' logic has unit tests of its own: `src/bench/soak/`.)

use std::process::Command;

use freight_testkit::{skip, Lack, PrivateDir};
use serde_json::Value;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_short_soak_kills_stops_and_finds_nothing_wrong() {
    if !is_root() {
        return skip("freight bench soak", Lack::Setup, "needs root (network and mount namespaces, tmpfs mounts)");
    }
    let dir = PrivateDir::new("freight-bench-soak-test");
    let json = dir.path().join("soak.json");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "soak", "--duration", "20s", "--json"])
        .arg(&json)
        .output()
        .expect("run freight bench soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no JSON ({e}):\n{stdout}\n{stderr}"));
    let report: Value = serde_json::from_str(&text).expect("the JSON parses");
    let checks = report["checks"].as_array().expect("checks");
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(
        names,
        ["survivors", "errors", "loss", "order", "bytes", "path", "shm-files", "fds", "rss", "device-holds", "traffic"]
    );
    let failed: Vec<&Value> = checks.iter().filter(|c| c["passed"] != true).collect();
    assert!(failed.is_empty(), "failed checks: {failed:#?}\n{stdout}");
    assert!(out.status.success(), "exit status {:?} with every check passing:\n{stderr}", out.status);
    assert!(report["chaos"]["kills"].as_u64().is_some_and(|n| n > 0), "{}", report["chaos"]);
    assert!(report["chaos"]["stops"].as_u64().is_some_and(|n| n > 0), "{}", report["chaos"]);
    let topologies = report["topologies"].as_array().expect("topologies");
    let seen: Vec<&str> = topologies.iter().filter_map(|t| t["topology"].as_str()).collect();
    assert_eq!(seen, ["shm", "intra", "device", "dds"]);
    for t in topologies {
        let subs = t["subscriptions"].as_array().expect("subscriptions");
        assert!(!subs.is_empty(), "{t}");
        for s in subs {
            assert!(s["received"].as_u64().is_some_and(|n| n > 0), "nothing received: {s}");
        }
        assert!(t["published"].as_u64().is_some_and(|n| n > 0), "{t}");
        assert!(t["loans"].as_u64().is_some_and(|n| n > 0) && t["copies"].as_u64().is_some_and(|n| n > 0), "{t}");
    }
    assert_eq!(topologies[0]["largest"], 64 << 20, "the shared-memory pair carries 64 MiB messages");
    assert!(stdout.contains("soak passed"), "{stdout}");
    assert!(stderr.contains(&format!("seed {}", report["seed"])), "the seed is printed for a replay:\n{stderr}");
}

#[test]
fn bad_options_are_refused_before_anything_starts() {
    let freight = env!("CARGO_BIN_EXE_freight");
    let out = Command::new(freight).args(["bench", "soak", "--duration", "5s"]).output().expect("run freight");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 20 s"), "{out:?}");
    let out = Command::new(freight).args(["bench", "soak", "--processes", "3"]).output().expect("run freight");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--processes 3 is too few"), "{out:?}");
}

#[test]
fn without_root_it_says_what_it_needs() {
    let Some(mut cmd) = freight_testkit::unprivileged("bench soak without root", env!("CARGO_BIN_EXE_freight")) else {
        return;
    };
    let out = cmd.args(["bench", "soak"]).output().expect("run freight bench soak");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.starts_with("error: freight bench soak needs root"), "{stderr}");
    assert!(stderr.contains("network namespace") && stderr.contains("sudo freight bench soak"), "{stderr}");
}
