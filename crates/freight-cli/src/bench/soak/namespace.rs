//! The namespaces the soak runs in.
//!
//! `freight bench soak` re-executes itself as `unshare --net --mount --propagation private
//! sh -c '<PRIVATE_SHM>' freight bench soak ... --inside-namespace`: a network namespace
//! with only a loopback (down until [`enter`] brings it up), and a mount namespace in which
//! /dev/shm and /tmp/iceoryx2 are fresh tmpfs mounts. That is "this host": no DDS packet
//! leaves it, and every shared-memory file in it is the soak's, which is what makes the file
//! counts a check. The `dds-sub` worker is started the same way without `--net`: another
//! mount namespace, other tmpfs mounts, the same loopback: "another host" that freight
//! reaches over DDS only. Namespaces and mounts disappear with their last process.

use std::process::{Command, ExitCode, Stdio};

use super::super::unshare::INSIDE;
use super::BenchError;

/// A shell script that mounts a fresh tmpfs on /dev/shm and on iceoryx2's root directory,
/// then executes its arguments (`$0 "$@"`) in their place.
pub const PRIVATE_SHM: &str = "mkdir -p /tmp/iceoryx2 && mount -t tmpfs tmpfs /dev/shm && \
    mount -t tmpfs tmpfs /tmp/iceoryx2 && exec \"$0\" \"$@\"";

/// Runs this command again in its namespaces and returns its exit status; its stdout and
/// stderr are ours.
pub fn reexec() -> Result<ExitCode, BenchError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::new(
            "freight bench soak needs root: it runs in a private network namespace (unshare --net) \
             with shared memory of its own (tmpfs mounts on /dev/shm and /tmp/iceoryx2), and its DDS \
             pair on a second \"host\" (another mount namespace)",
            "run it as root (sudo freight bench soak ...)",
        ));
    }
    super::super::unshare::reexec(
        &["--net", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM],
        "the soak's namespaces (a network namespace, and a mount namespace with tmpfs mounts)",
        "run it where root may create namespaces and mount tmpfs (a container needs CAP_SYS_ADMIN, e.g. \
         docker run --privileged)",
    )
}

/// Inside: checks that this is a fresh network namespace and brings its loopback up.
pub fn enter() -> Result<(), BenchError> {
    let dev = std::fs::read_to_string("/proc/self/net/dev").map_err(|e| {
        BenchError::new(format!("cannot read /proc/self/net/dev: {e}"), "run it on Linux with /proc mounted")
    })?;
    let interfaces: Vec<&str> = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    if interfaces != ["lo"] {
        return Err(BenchError::new(
            format!(
                "{INSIDE} is only for the re-executed soak; this network namespace has the interfaces {}",
                interfaces.join(", ")
            ),
            "run `freight bench soak` without it",
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
