//! `freight dds config`: the DDS configuration freight's network plane joins a domain
//! with, each setting with its reason, and what overrides it.

use clap::{Args, Subcommand};
use freight::DdsConfig;
use freight_dds::{EffectiveConfig, UserSource, RECEIVE_BUFFER_REQUEST};

/// `freight dds ...`
#[derive(Debug, Subcommand)]
pub enum DdsCommand {
    /// Print the Cyclone DDS configuration a freight process started here gets.
    #[command(long_about = CONFIG_ABOUT)]
    Config(ConfigArgs),
}

const CONFIG_ABOUT: &str = "\
Print the Cyclone DDS configuration a freight process started with this environment gets:
the discovery range (ROS_AUTOMATIC_DISCOVERY_RANGE, ROS_STATIC_PEERS, ROS_LOCALHOST_ONLY,
read as rcl reads them), the network interface datagrams are sized for, each setting freight
chooses with its reason, the user's configuration that overrides them (CYCLONEDDS_URI), and
the kernel's cap on socket receive buffers. --xml prints the exact configuration Cyclone gets.";

/// Options of `freight dds config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print only the configuration Cyclone DDS gets, as XML (a comma-separated list:
    /// freight's settings, then CYCLONEDDS_URI).
    #[arg(long)]
    xml: bool,
}

/// Runs one `freight dds` command.
pub fn run(cmd: &DdsCommand) -> Result<(), String> {
    match cmd {
        DdsCommand::Config(args) => {
            let effective = DdsConfig::default().effective();
            if args.xml {
                println!("{}", effective.xml());
            } else {
                print!("{}", report(&effective, kernel_receive_buffer_max()));
            }
            Ok(())
        }
    }
}

/// `net.core.rmem_max`: the largest socket receive buffer an unprivileged request gets.
fn kernel_receive_buffer_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/core/rmem_max").ok()?.trim().parse().ok()
}

/// The human-readable report.
fn report(c: &EffectiveConfig, rmem_max: Option<u64>) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    let d = &c.discovery;
    let peers = if d.static_peers.is_empty() { "none".to_string() } else { d.static_peers.join(", ") };
    line(format!("Discovery range: {} (static peers: {peers})", d.range.name()));
    match &c.sized_for {
        Some(i) => line(format!(
            "Interface: {} {} (MTU {}), the one Cyclone DDS picks{}",
            i.name,
            i.address,
            i.mtu.map_or_else(|| "unknown".into(), |m| m.to_string()),
            if i.loopback { "; no other interface is up" } else { "" }
        )),
        None => line("Interface: none found; datagrams sized for MTU 1500".into()),
    }
    line(String::new());
    line("freight's settings (Cyclone DDS configuration, under Domain):".into());
    let width = c.settings.iter().map(|s| s.path.len() + s.value.len() + 3).max().unwrap_or(0);
    for s in &c.settings {
        line(format!("  {:width$}  {}", format!("{} = {}", s.path, s.value), s.reason));
    }
    line(String::new());
    match &c.user {
        Some(u) => line(format!(
            "Overridden by: {} = {} (applied after freight's settings; where both set something, it wins)",
            match u.source {
                UserSource::Environment => "CYCLONEDDS_URI",
                UserSource::Code => "DdsConfig::xml",
            },
            u.text
        )),
        None => line("Overridden by: nothing (CYCLONEDDS_URI is not set)".into()),
    }
    if let Some(max) = rmem_max {
        if max < RECEIVE_BUFFER_REQUEST {
            line(format!(
                "Note: the kernel caps socket receive buffers at {} KiB (net.core.rmem_max); frames that \
                 arrive faster than they are read need repair rounds. As root: sysctl -w net.core.rmem_max={}",
                max >> 10,
                RECEIVE_BUFFER_REQUEST
            ));
        }
    }
    for w in &c.warnings {
        line(format!("Warning: {w}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_dds::{DiscoveryOptions, Interface, UserConfig};

    #[test]
    fn the_report_names_every_setting_the_override_and_the_kernel_cap() {
        let lo = Interface {
            name: "lo".into(),
            address: [127, 0, 0, 1].into(),
            mtu: Some(65536),
            loopback: true,
            multicast: false,
            point_to_point: false,
        };
        let discovery = DiscoveryOptions::from_values(Some("LOCALHOST"), Some("10.0.0.9"), None);
        let user = Some(UserConfig { source: UserSource::Environment, text: "file:///etc/c.xml".into() });
        let c = EffectiveConfig::new(discovery, vec![lo], user, Vec::new());
        let text = report(&c, Some(212_992));
        assert!(text.contains("Discovery range: LOCALHOST (static peers: 10.0.0.9)"), "{text}");
        assert!(text.contains("Interface: lo 127.0.0.1 (MTU 65536)"), "{text}");
        for s in &c.settings {
            assert!(text.contains(&format!("{} = {}", s.path, s.value)), "{} missing:\n{text}", s.path);
        }
        assert!(text.contains("Overridden by: CYCLONEDDS_URI = file:///etc/c.xml"), "{text}");
        assert!(text.contains("net.core.rmem_max"), "{text}");
        assert!(!report(&c, Some(16 << 20)).contains("Note:"), "no note when the cap is high enough");
    }
}
