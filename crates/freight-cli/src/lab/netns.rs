//! The lab's two hosts: network namespaces joined by a veth pair, each direction shaped to
//! the link rate with `tc tbf`, and packet loss or a dead link made by an nftables rule on
//! the netdev ingress hook of both ends. The ingress hook sees IP fragments one by one, so
//! it drops single fragments as a radio does (this kernel has no netem).
//!
//! Nothing leaves the namespaces: the veth pair is created inside them and has no route
//! out. Dropping [`Link`] deletes both namespaces, and with them the veth pair, the qdiscs
//! and the rules; namespaces left by a lab that was killed are removed by the next one.

use std::process::{Command, Stdio};

/// Every namespace of the lab is named `<PREFIX><pid>-a` / `-b`.
const PREFIX: &str = "freight-lab-";

/// Addresses of the two ends (a private /24 that exists only inside the namespaces).
pub const ADDR_A: &str = "10.231.0.1";
/// See [`ADDR_A`].
pub const ADDR_B: &str = "10.231.0.2";

/// What the link does to packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impairment {
    /// Every packet passes.
    None,
    /// Each packet is dropped with this probability, independently.
    Loss(f64),
    /// Every packet is dropped.
    Down,
}

/// Two namespaces joined by a shaped veth pair. Dropping it removes them.
#[derive(Debug)]
pub struct Link {
    /// Publisher side.
    pub a: String,
    /// Subscriber side.
    pub b: String,
}

/// A step of the setup that failed: the command and what it printed.
#[derive(Debug, thiserror::Error)]
#[error("`{command}` failed: {output}")]
pub struct NetnsError {
    command: String,
    output: String,
}

fn run(args: &[&str]) -> Result<String, NetnsError> {
    let command = args.join(" ");
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| NetnsError { command: command.clone(), output: e.to_string() })?;
    if !out.status.success() {
        let output = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(NetnsError { command, output });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `nft` inside `ns` with `script` on its standard input.
fn nft(ns: &str, script: &str) -> Result<(), NetnsError> {
    use std::io::Write;
    let command = format!("ip netns exec {ns} nft -f - <<< {script:?}");
    let fail = |output: String| NetnsError { command: command.clone(), output };
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(|e| fail(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(())
}

impl Link {
    /// Creates the namespaces and the veth pair, shaped to `link_bps` each way, MTU 1500.
    pub fn create(link_bps: f64) -> Result<Link, NetnsError> {
        remove_stale();
        let pid = std::process::id();
        let link = Link { a: format!("{PREFIX}{pid}-a"), b: format!("{PREFIX}{pid}-b") };
        // From here on a failure drops `link`, which removes whatever was made.
        for ns in [&link.a, &link.b] {
            run(&["ip", "netns", "add", ns])?;
        }
        run(&[
            "ip", "link", "add", "lab0", "netns", &link.a, "type", "veth", "peer", "name", "lab0", "netns", &link.b,
        ])?;
        // tbf: the link rate; a burst of 64 KiB (a few hundred µs at radio rates) and a
        // queue of 50 ms, deeper than one 512 KB sample at 433 Mbit/s (10 ms), so the
        // shaper queues a sample's burst rather than dropping its tail.
        let rate = format!("{}bit", link_bps.round() as u64);
        for (ns, addr) in [(&link.a, ADDR_A), (&link.b, ADDR_B)] {
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", ns, "addr", "add", &format!("{addr}/24"), "dev", "lab0"])?;
            run(&["ip", "-n", ns, "link", "set", "lab0", "mtu", "1500", "up"])?;
            // SPDP discovery is multicast (Cyclone's default); without a route the send fails.
            run(&["ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", "lab0"])?;
            run(&[
                "tc", "-n", ns, "qdisc", "add", "dev", "lab0", "root", "tbf", "rate", &rate, "burst", "64kb",
                "latency", "50ms",
            ])?;
            nft(ns, "table netdev lab {\n chain ingress {\n  type filter hook ingress device lab0 priority 0; policy accept;\n }\n}\n")?;
        }
        Ok(link)
    }

    /// Applies `impairment` to both directions, replacing the previous one.
    pub fn impair(&self, impairment: Impairment) -> Result<(), NetnsError> {
        let rule = match impairment {
            Impairment::None => String::new(),
            // numgen draws per packet; in 1/1_000_000 steps so 1 % and 20 % are exact.
            Impairment::Loss(p) => {
                let ppm = (p * 1e6).round() as u64;
                format!("add rule netdev lab ingress numgen random mod 1000000 < {ppm} drop\n")
            }
            Impairment::Down => "add rule netdev lab ingress drop\n".into(),
        };
        for ns in [&self.a, &self.b] {
            nft(ns, &format!("flush chain netdev lab ingress\n{rule}"))?;
        }
        Ok(())
    }

    /// IP fragments that reached namespace `ns` so far (`Ip: ReasmReqds` of its
    /// `/proc/net/snmp`: fragments received that needed reassembly).
    pub fn ip_fragments(&self, ns: &str) -> Result<u64, NetnsError> {
        let snmp = run(&["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"])?;
        let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
        let (names, values) = (ip.next().unwrap_or_default(), ip.next().unwrap_or_default());
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == "ReasmReqds")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| NetnsError {
                command: format!("ip netns exec {ns} cat /proc/net/snmp"),
                output: "no Ip ReasmReqds counter".into(),
            })
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            // Deleting a namespace deletes its end of the veth pair, and with it the other
            // end, the qdiscs and the nftables table.
            let _ = run(&["ip", "netns", "delete", ns]);
        }
    }
}

/// Removes namespaces of earlier labs whose process is gone (killed before it could clean
/// up).
fn remove_stale() {
    let Ok(list) = run(&["ip", "netns", "list"]) else { return };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let pid = rest.trim_end_matches("-a").trim_end_matches("-b");
        let alive = pid.parse::<u32>().is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = run(&["ip", "netns", "delete", name]);
        }
    }
}

/// Why the lab cannot run on this machine, if it cannot: not root, or a tool missing.
pub fn check_prerequisites() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("freight lab wireless needs root: it creates network namespaces, a veth pair, tc \
                    qdiscs and nftables rules; run it as root (sudo freight lab wireless ...)"
            .into());
    }
    for (tool, package) in [("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")] {
        let found = Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
        if !found {
            return Err(format!("freight lab wireless needs `{tool}`; install it with `apt-get install {package}`"));
        }
    }
    Ok(())
}
