//! Running a benchmark again inside namespaces of its own (`unshare`): `bench ros2` in a
//! private network namespace, `bench soak` with private shared memory as well. The
//! namespaces disappear with their last process, even after `kill -9`.

use std::process::{Command, ExitCode, Stdio};

use super::BenchError;

/// The hidden flag the re-executed command gets.
pub const INSIDE: &str = "--inside-namespace";

/// Runs this command again as `unshare <prefix> <this executable> <its arguments>
/// --inside-namespace` and returns its exit status; its stdout and stderr are ours.
/// `prefix` ends with what runs the command (`--`, or a shell that execs `"$0" "$@"`);
/// `unshare <prefix> true` is tried first, so that a machine that cannot make `what` is
/// told so, with `hint`.
pub fn reexec(prefix: &[&str], what: &str, hint: &str) -> Result<ExitCode, BenchError> {
    let unshare_missing = |e: std::io::Error| {
        BenchError::new(format!("cannot run `unshare`: {e}"), "install util-linux (apt-get install util-linux)")
    };
    let probe = Command::new("unshare").args(prefix).arg("true").stdin(Stdio::null()).output();
    let probe = probe.map_err(unshare_missing)?;
    if !probe.status.success() {
        return Err(BenchError::new(
            format!("cannot create {what}: `unshare` says: {}", String::from_utf8_lossy(&probe.stderr).trim()),
            hint,
        ));
    }
    let exe = std::env::current_exe().map_err(|e| {
        BenchError::new(
            format!("cannot find the freight executable to re-run it in a namespace: {e}"),
            "run freight from a path that still exists",
        )
    })?;
    // Ctrl-C reaches both processes (one process group); this one waits for the inner one,
    // which stops what it started and prints what it found.
    crate::stop::install();
    let status = Command::new("unshare")
        .args(prefix)
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .arg(INSIDE)
        .status()
        .map_err(unshare_missing)?;
    Ok(super::python::exit_code(status))
}
