//! `freight doctor`: every check is reported, and a container-sized `/dev/shm` is
//! flagged with the fix.

use std::process::Command;

fn doctor(wrapper: &[&str]) -> String {
    let exe = env!("CARGO_BIN_EXE_freight");
    let out = match wrapper.split_first() {
        Some((program, args)) => Command::new(program).args(args).arg(exe).arg("doctor").output(),
        None => Command::new(exe).arg("doctor").output(),
    }
    .expect("run freight doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn every_check_is_reported() {
    let out = doctor(&[]);
    for what in ["/dev/shm", "in /dev/shm", "local plane", "namespaces", "locked memory", "open files"] {
        assert!(out.lines().any(|l| l.get(6..).is_some_and(|rest| rest.starts_with(what))), "no {what:?} line:\n{out}");
    }
    assert!(out.lines().all(|l| l.starts_with("ok    ") || l.starts_with("warn  ")), "{out}");
}

#[test]
fn a_container_sized_dev_shm_is_flagged_with_the_fix() {
    if !freight_testkit::other_host_available("freight doctor in a 64 MB /dev/shm") {
        return;
    }
    let script = "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec \"$0\" \"$@\"";
    let out = doctor(&["unshare", "--mount", "--propagation", "private", "sh", "-c", script]);
    let line = out.lines().find(|l| l.get(6..).is_some_and(|r| r.starts_with("/dev/shm "))).unwrap_or_default();
    assert!(line.starts_with("warn") && line.contains("of 64.0 MiB free"), "{out}");
    assert!(line.contains("--shm-size"), "{out}");
}
