//! ROS 2's discovery settings, read from the environment as rcl reads them (Jazzy and
//! later): `ROS_AUTOMATIC_DISCOVERY_RANGE`, `ROS_STATIC_PEERS`, and the deprecated
//! `ROS_LOCALHOST_ONLY`.

/// How far automatic discovery reaches (`ROS_AUTOMATIC_DISCOVERY_RANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryRange {
    /// Every node reachable by multicast: ROS 2's default.
    Subnet,
    /// Nodes on this host only: no multicast, unicast discovery to `localhost`.
    Localhost,
    /// No automatic discovery at all, not even on this host.
    Off,
    /// The DDS implementation's own settings, unchanged (`CYCLONEDDS_URI` alone).
    SystemDefault,
}

impl DiscoveryRange {
    /// The name `ROS_AUTOMATIC_DISCOVERY_RANGE` uses.
    pub fn name(self) -> &'static str {
        match self {
            DiscoveryRange::Subnet => "SUBNET",
            DiscoveryRange::Localhost => "LOCALHOST",
            DiscoveryRange::Off => "OFF",
            DiscoveryRange::SystemDefault => "SYSTEM_DEFAULT",
        }
    }
}

/// The ROS 2 discovery settings of this process.
///
/// ```
/// use freight_dds::{DiscoveryOptions, DiscoveryRange};
/// let d = DiscoveryOptions::from_values(Some("LOCALHOST"), Some("192.168.0.7;robot.local"), None);
/// assert_eq!(d.range, DiscoveryRange::Localhost);
/// assert_eq!(d.static_peers, ["192.168.0.7", "robot.local"]);
/// assert!(d.warnings.is_empty());
/// assert_eq!(DiscoveryOptions::from_values(None, None, None).range, DiscoveryRange::Subnet);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryOptions {
    /// The range.
    pub range: DiscoveryRange,
    /// Addresses or host names to discover by unicast (`ROS_STATIC_PEERS`, `;`-separated).
    pub static_peers: Vec<String>,
    /// What rcl would warn about: an unknown range, peers it ignores, the deprecated
    /// variable.
    pub warnings: Vec<String>,
}

/// rcl's limit on one static peer (`RMW_DISCOVERY_OPTIONS_STATIC_PEERS_MAX_LENGTH` − 1).
const MAX_PEER_LEN: usize = 255;

impl DiscoveryOptions {
    /// The settings of this process's environment.
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok();
        Self::from_values(
            var("ROS_AUTOMATIC_DISCOVERY_RANGE").as_deref(),
            var("ROS_STATIC_PEERS").as_deref(),
            var("ROS_LOCALHOST_ONLY").as_deref(),
        )
    }

    /// The settings these variable values give, as rcl derives them: an unset or empty
    /// range is `SUBNET`; an unknown one is `LOCALHOST`, with a warning; peers longer than
    /// rcl's limit are skipped, with a warning; `ROS_LOCALHOST_ONLY=1` (deprecated since
    /// Jazzy) means `LOCALHOST` when no range is given.
    pub fn from_values(range: Option<&str>, static_peers: Option<&str>, localhost_only: Option<&str>) -> Self {
        let mut warnings = Vec::new();
        let range_given = range.is_some_and(|r| !r.is_empty());
        let mut range = match range.unwrap_or("") {
            "" => DiscoveryRange::Subnet,
            "SUBNET" => DiscoveryRange::Subnet,
            "LOCALHOST" => DiscoveryRange::Localhost,
            "OFF" => DiscoveryRange::Off,
            "SYSTEM_DEFAULT" => DiscoveryRange::SystemDefault,
            other => {
                warnings.push(format!(
                    "invalid value {other:?} for ROS_AUTOMATIC_DISCOVERY_RANGE (SUBNET, LOCALHOST, OFF or \
                     SYSTEM_DEFAULT); assuming LOCALHOST, as rcl does"
                ));
                DiscoveryRange::Localhost
            }
        };
        if localhost_only == Some("1") {
            if range_given {
                warnings.push(
                    "ROS_LOCALHOST_ONLY is deprecated and ignored because ROS_AUTOMATIC_DISCOVERY_RANGE is set".into(),
                );
            } else {
                warnings.push(
                    "ROS_LOCALHOST_ONLY is deprecated; use ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST instead".into(),
                );
                range = DiscoveryRange::Localhost;
            }
        }
        let mut peers = Vec::new();
        for peer in static_peers.unwrap_or("").split(';').map(str::trim).filter(|p| !p.is_empty()) {
            if peer.len() > MAX_PEER_LEN {
                warnings
                    .push(format!("a static peer in ROS_STATIC_PEERS is longer than {MAX_PEER_LEN} bytes; skipped"));
            } else if peer.contains(['<', '>', '"', '&']) {
                warnings.push(format!("static peer {peer:?} is not an address or host name; skipped"));
            } else {
                peers.push(peer.to_string());
            }
        }
        if !peers.is_empty() && matches!(range, DiscoveryRange::Off | DiscoveryRange::SystemDefault) {
            warnings.push(format!("ROS_STATIC_PEERS is ignored: ROS_AUTOMATIC_DISCOVERY_RANGE is {}", range.name()));
            peers.clear();
        }
        DiscoveryOptions { range, static_peers: peers, warnings }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_peers_read_as_rcl_reads_them() {
        let d = |r, p, l| DiscoveryOptions::from_values(r, p, l);
        assert_eq!(d(Some(""), None, None).range, DiscoveryRange::Subnet);
        assert_eq!(d(Some("OFF"), None, None).range, DiscoveryRange::Off);
        assert_eq!(d(Some("SYSTEM_DEFAULT"), None, None).range, DiscoveryRange::SystemDefault);
        let bad = d(Some("subnet"), None, None);
        assert_eq!(bad.range, DiscoveryRange::Localhost, "unknown values (case matters) are LOCALHOST");
        assert!(bad.warnings[0].contains("\"subnet\""), "{:?}", bad.warnings);
        let deprecated = d(None, None, Some("1"));
        assert_eq!(deprecated.range, DiscoveryRange::Localhost);
        assert!(deprecated.warnings[0].contains("deprecated"));
        assert_eq!(d(Some("SUBNET"), None, Some("1")).range, DiscoveryRange::Subnet, "the range wins");
        assert_eq!(d(None, None, Some("0")), d(None, None, None));
        let peers = d(None, Some(" 10.0.0.1 ;;host-b; "), None);
        assert_eq!(peers.static_peers, ["10.0.0.1", "host-b"]);
        let off = d(Some("OFF"), Some("10.0.0.1"), None);
        assert!(off.static_peers.is_empty() && off.warnings[0].contains("ignored"));
        let long = "a".repeat(300);
        let hostile = d(None, Some(&format!("{long};<x/>;ok")), None);
        assert_eq!(hostile.static_peers, ["ok"]);
        assert_eq!(hostile.warnings.len(), 2);
    }
}
