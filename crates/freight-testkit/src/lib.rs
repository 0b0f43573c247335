//! What freight's tests share: how a test that cannot run on this machine says so, and
//! how a test stops another process for sure.
//!
//! libtest captures what `eprintln!` prints, so a skip reported that way vanishes from a
//! green run. [`skip`] writes to the process's stderr directly, which libtest does not
//! capture: the line is in every log, CI's included. And under `make test`
//! (`FREIGHT_TEST_STRICT=1`, as CI runs it) a test may skip only for what a machine truly
//! lacks, a GPU ([`Lack::Gpu`]); any other reason fails the test, so that a broken install
//! step cannot turn a suite green by skipping it.
//!
//! ```
//! use freight_testkit::{skip, Lack};
//!
//! fn can_make_namespaces() -> bool { true }
//!
//! if !can_make_namespaces() {
//!     return skip("two_hosts", Lack::Setup, "needs root for `unshare --net`");
//! }
//! ```

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The environment variable that makes every skip but a GPU's a failure.
pub const STRICT_VAR: &str = "FREIGHT_TEST_STRICT";

/// Why a test cannot run here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// No usable CUDA device: the one reason a strict run accepts.
    Gpu,
    /// Something `make test` installs or CI provides (root, namespaces, a compiler, an
    /// interpreter): a strict run fails instead.
    Setup,
    /// The user asked for the skip with a `FREIGHT_SKIP_*` variable: a strict run fails too,
    /// since CI sets none.
    OptedOut,
}

/// Whether this run is strict (`FREIGHT_TEST_STRICT=1`).
pub fn strict() -> bool {
    std::env::var_os(STRICT_VAR).is_some_and(|v| v == "1")
}

/// Reports that `test` cannot run here and why: `SKIPPED <test>: <why>` on the real stderr.
/// In a strict run it panics unless `lack` is [`Lack::Gpu`].
#[track_caller]
pub fn skip(test: &str, lack: Lack, why: &str) {
    if strict() && lack != Lack::Gpu {
        panic!("{test} cannot run here: {why} ({STRICT_VAR}=1: only a missing GPU may skip a test)");
    }
    // Not `eprintln!`: libtest captures that, and the skip would not show.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// A directory of this user's only (mode 0700) with a random name under the temporary
/// directory, made by `mkdtemp(3)` — never one that existed before, which a predictable
/// `/tmp/<name>-<pid>` could be — and removed with everything in it when dropped.
///
/// ```
/// let dir = freight_testkit::PrivateDir::new("freight-doc");
/// std::fs::write(dir.path().join("x"), b"1").unwrap();
/// let path = dir.path().to_path_buf();
/// drop(dir);
/// assert!(!path.exists());
/// ```
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Makes `<tmp>/<prefix>-XXXXXX`; panics (it is for tests) when it cannot.
    #[track_caller]
    pub fn new(prefix: &str) -> PrivateDir {
        let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
        let mut bytes = template.as_os_str().as_bytes().to_vec();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated, writable template that mkdtemp fills in place.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        assert!(!made.is_null(), "mkdtemp {}: {}", template.display(), std::io::Error::last_os_error());
        bytes.pop();
        PrivateDir { path: PathBuf::from(OsString::from_vec(bytes)) }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A command that runs `program` as an unprivileged user: the user `nobody` through
/// `setpriv` when this process is root, this process's user otherwise. `None`, after a
/// [`skip`] line naming `test`, when root cannot run `program` as nobody here (no
/// `setpriv`, or a path nobody cannot reach).
pub fn unprivileged(test: &str, program: &str) -> Option<std::process::Command> {
    use std::process::Command;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(Command::new(program));
    }
    const AS_NOBODY: [&str; 3] = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let reachable =
        Command::new("setpriv").args(AS_NOBODY).args([program, "--version"]).output().is_ok_and(|o| o.status.success());
    if !reachable {
        skip(test, Lack::Setup, "cannot run the binary as an unprivileged user here (setpriv, or its path)");
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(AS_NOBODY).arg(program);
    Some(cmd)
}

/// A shell script for `unshare --mount --propagation private sh -c SCRIPT
/// PROGRAM ARGS...`: it gives its mount namespace fresh tmpfs mounts where
/// iceoryx2 keeps its segments (`/dev/shm`) and its service records
/// (`/tmp/iceoryx2`), then runs the program. A process started so shares no
/// shared memory with the test: it is a second "host" on the same network.
pub const OTHER_HOST_MOUNTS: &str = "mkdir -p /tmp/iceoryx2 && mount -t tmpfs tmpfs /dev/shm && \
    mount -t tmpfs tmpfs /tmp/iceoryx2 && exec \"$0\" \"$@\"";

/// Whether [`OTHER_HOST_MOUNTS`] works here (root and `unshare --mount`);
/// if not, says so with [`skip`] for `test`.
pub fn other_host_available(test: &str) -> bool {
    let ok = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", OTHER_HOST_MOUNTS, "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip(test, Lack::Setup, "no private /dev/shm (needs root and `unshare --mount`)");
    }
    ok
}

/// Stops process `pid` with `SIGSTOP` and returns once every one of its threads is
/// stopped. `kill` returns before that: a thread running on another CPU (or on a vCPU the
/// host has not scheduled) goes on for a moment, long enough to serve one more request.
/// Panics if the process is not stopped within 10 s.
pub fn stop_process(pid: u32) {
    let id = libc::pid_t::try_from(pid).expect("a pid fits pid_t");
    // SAFETY: sending a signal touches no memory of this process.
    assert_eq!(unsafe { libc::kill(id, libc::SIGSTOP) }, 0, "SIGSTOP to {pid}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !all_threads_stopped(pid) {
        assert!(std::time::Instant::now() < deadline, "process {pid} did not stop within 10 s");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Whether every thread of `pid` is in state `T` (stopped) or `t` (traced).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().all(|task| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
        matches!(state, Some("T" | "t"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_is_stopped_when_stop_process_returns() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        stop_process(child.id());
        assert!(all_threads_stopped(child.id()));
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(!all_threads_stopped(child.id()), "a reaped process has no threads to be stopped");
    }
}
