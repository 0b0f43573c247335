//! A private "host" for the benchmarks that count shared-memory files and run DDS between
//! processes (`bench soak`, `bench scale`).
//!
//! The command re-executes itself as `unshare --net --mount --propagation private sh -c
//! '<PRIVATE_SHM>' freight bench ... --inside-namespace`: a network namespace with only a
//! loopback (down until [`enter`] brings it up), and a mount namespace in which /dev/shm
//! and /tmp/iceoryx2 are fresh tmpfs mounts. No DDS packet leaves it, and every
//! shared-memory file in it is the command's, which is what makes file counts a check. A
//! process started with [`PRIVATE_SHM`] without `--net` is "another host" on the same
//! loopback, reached over DDS only. Namespaces and mounts disappear with their last process.

use std::process::{Command, ExitCode, Stdio};

use super::unshare::INSIDE;
use super::BenchError;

/// A shell script that mounts a fresh tmpfs on /dev/shm and on iceoryx2's root directory,
/// then executes its arguments (`$0 "$@"`) in their place.
pub const PRIVATE_SHM: &str = "mkdir -p /tmp/iceoryx2 && mount -t tmpfs tmpfs /dev/shm && \
    mount -t tmpfs tmpfs /tmp/iceoryx2 && exec \"$0\" \"$@\"";

/// Runs `command` (`freight bench soak`) again in its private host and returns its exit
/// status; its stdout and stderr are ours. `why` says what it needs the namespaces for.
pub fn reexec(command: &str, why: &str) -> Result<ExitCode, BenchError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::new(
            format!(
                "{command} needs root: it runs in a private network namespace (unshare --net) with \
                 shared memory of its own (tmpfs mounts on /dev/shm and /tmp/iceoryx2){why}"
            ),
            format!("run it as root (sudo {command} ...)"),
        ));
    }
    super::unshare::reexec(
        &["--net", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM],
        "a private host (a network namespace, and a mount namespace with tmpfs mounts)",
        "run it where root may create namespaces and mount tmpfs (a container needs CAP_SYS_ADMIN, e.g. \
         docker run --privileged)",
    )
}

/// Inside: checks that this is a fresh network namespace and brings its loopback up.
pub fn enter(command: &str) -> Result<(), BenchError> {
    let dev = std::fs::read_to_string("/proc/self/net/dev").map_err(|e| {
        BenchError::new(format!("cannot read /proc/self/net/dev: {e}"), "run it on Linux with /proc mounted")
    })?;
    let interfaces: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    if interfaces != ["lo"] {
        return Err(BenchError::new(
            format!(
                "{INSIDE} is only for the re-executed {command}; this network namespace has the interfaces {}",
                interfaces.join(", ")
            ),
            format!("run `{command}` without it"),
        ));
    }
    let out =
        Command::new("ip").args(["link", "set", "lo", "up"]).stdin(Stdio::null()).output().map_err(|e| {
            BenchError::new(format!("cannot run `ip`: {e}"), "install iproute2 (apt-get install iproute2)")
        })?;
    if !out.status.success() {
        return Err(BenchError::new(
            format!("`ip link set lo up` failed: {}", String::from_utf8_lossy(&out.stderr).trim()),
            "check that this kernel supports network namespaces",
        ));
    }
    Ok(())
}
