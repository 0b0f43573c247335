//! The private network namespace every row of `freight bench ros2` (and `bench paused`)
//! runs in.
//!
//! The command re-executes itself as `unshare --net -- <freight> <its arguments>
//! --inside-namespace`: the child is in a new network namespace that has only a loopback
//! interface, down. There it brings the loopback up, lets it carry multicast and routes
//! 224.0.0.0/4 to it (Fast DDS discovers by multicast), and starts every peer. Nothing in it
//! can reach the host's interfaces, and the namespace disappears with its last process:
//! nothing to clean up, even after `kill -9`.

use std::process::{Command, ExitCode, Stdio};

use super::super::unshare::INSIDE;
use super::BenchError;

/// Runs this command (`command`, e.g. `freight bench ros2`, for messages) again in a new
/// network namespace and returns its exit status. Its stdout and stderr are ours.
pub fn reexec(command: &str) -> Result<ExitCode, BenchError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::new(
            format!(
                "{command} needs root: it runs every stack in a private network namespace \
                 (unshare --net) so that no benchmark traffic, stock Fast DDS's multicast discovery \
                 included, reaches this machine's interfaces"
            ),
            format!("run it as root (sudo {command} ...)"),
        ));
    }
    super::super::unshare::reexec(
        &["--net", "--"],
        "a network namespace",
        "run it where root may create namespaces (a container needs CAP_SYS_ADMIN, e.g. docker run --privileged)",
    )
}

/// Inside the namespace: checks that it is a fresh one and sets up its loopback.
pub fn enter(command: &str) -> Result<(), BenchError> {
    let interfaces = interfaces()?;
    if interfaces != ["lo"] {
        return Err(BenchError::new(
            format!(
                "{INSIDE} is only for the re-executed measurement; this network namespace has the \
                 interfaces {}",
                interfaces.join(", ")
            ),
            format!("run `{command}` without it"),
        ));
    }
    for args in [
        &["link", "set", "lo", "up"][..],
        &["link", "set", "lo", "multicast", "on"],
        &["route", "add", "224.0.0.0/4", "dev", "lo"],
    ] {
        let out = Command::new("ip").args(args).stdin(Stdio::null()).output().map_err(|e| {
            BenchError::new(format!("cannot run `ip`: {e}"), "install iproute2 (apt-get install iproute2)")
        })?;
        if !out.status.success() {
            return Err(BenchError::new(
                format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()),
                "check that this kernel supports network namespaces and multicast on loopback",
            ));
        }
    }
    Ok(())
}

/// The network interfaces of this process's namespace (`/proc/self/net/dev` is per namespace;
/// `/sys/class/net` is the mounting namespace's).
fn interfaces() -> Result<Vec<String>, BenchError> {
    let dev = std::fs::read_to_string("/proc/self/net/dev").map_err(|e| {
        BenchError::new(format!("cannot read /proc/self/net/dev: {e}"), "run it on Linux with /proc mounted")
    })?;
    Ok(parse_interfaces(&dev))
}

/// Bytes received on the loopback so far (in a namespace that has nothing else, every byte
/// any DDS process sent over UDP: discovery, and data that did not go through shared memory).
pub fn loopback_bytes() -> Option<u64> {
    parse_loopback_bytes(&std::fs::read_to_string("/proc/self/net/dev").ok()?)
}

fn parse_loopback_bytes(dev: &str) -> Option<u64> {
    let line = dev.lines().skip(2).find(|l| l.split(':').next().is_some_and(|n| n.trim() == "lo"))?;
    line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()
}

fn parse_interfaces(dev: &str) -> Vec<String> {
    dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(|n| n.trim().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_are_read_from_proc_net_dev() {
        let dev = "Inter-|   Receive                            |  Transmit\n \
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes\n    \
                   lo:       0       0    0    0    0     0          0         0        0\n  \
                   eth0: 1234 5 0 0 0 0 0 0 99\n";
        assert_eq!(parse_interfaces(dev), ["lo", "eth0"]);
        assert_eq!(parse_loopback_bytes(dev), Some(0));
        assert_eq!(parse_loopback_bytes(&dev.replace("lo:       0", "lo: 45184")), Some(45184));
    }
}
