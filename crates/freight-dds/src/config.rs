//! The one place where the DDS domain's configuration comes from.
//!
//! Cyclone DDS reads a list of XML configurations, later ones overriding earlier ones.
//! freight gives it three, in this order:
//!
//! 1. **freight's settings for this host** ([`EffectiveConfig::settings`]), each with
//!    its reason: ROS 2's discovery settings from the environment, applied as
//!    rmw_cyclonedds applies them, and the settings that let large samples through —
//!    datagrams sized for the interface in use, socket buffers, repair bursts and
//!    heartbeats — so that a stock ROS 2 node on its defaults receives a 4K frame or a
//!    55 MB point cloud without any XML;
//! 2. **the user's configuration**: [`DdsConfig::xml`] if given, else
//!    `CYCLONEDDS_URI`, as every Cyclone-based ROS 2 node reads it. It wins over
//!    freight's settings wherever both say something;
//! 3. (in the `freight` crate) the tuned settings of declared large-data streams.
//!
//! `freight dds config` prints all of it; `docs/network.md` explains each setting.

use std::fmt::Write as _;

use crate::interfaces::{cyclone_default_interface, host_interfaces, Interface};
use crate::ros_env::{DiscoveryOptions, DiscoveryRange};

/// The user's part of the DDS domain's configuration.
///
/// ```
/// use freight_dds::DdsConfig;
/// let cfg = DdsConfig::default(); // CYCLONEDDS_URI, if set, over freight's settings
/// assert!(cfg.xml.is_none());
/// let lo = DdsConfig::loopback();  // discovery and data on 127.0.0.1 only
/// assert!(lo.xml.unwrap().contains("127.0.0.1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdsConfig {
    /// A Cyclone DDS configuration: XML, or a `file://` URI, or a comma-separated list
    /// of them (later ones override earlier ones), applied over freight's settings.
    /// `None`: `CYCLONEDDS_URI`, as Cyclone reads it.
    pub xml: Option<String>,
    /// Whether freight's settings for this host come first (the default). `false`:
    /// the user's configuration alone over Cyclone's defaults — what
    /// `freight lab wireless` measures the tuned profile against.
    pub freight_settings: bool,
}

impl Default for DdsConfig {
    fn default() -> Self {
        DdsConfig { xml: None, freight_settings: true }
    }
}

impl DdsConfig {
    /// Discovery and data on the loopback interface only, peers found by unicast
    /// on 127.0.0.1 (loopback has no multicast on most Linux systems). For
    /// tests and single-host setups that must not touch a real network.
    pub fn loopback() -> Self {
        DdsConfig { xml: Some(LOOPBACK.into()), ..DdsConfig::default() }
    }

    /// `xml` (as [`DdsConfig::xml`]) over freight's settings.
    ///
    /// ```
    /// let cfg = freight_dds::DdsConfig::with_xml("<Tracing><Category>config</Category></Tracing>");
    /// assert!(cfg.freight_settings);
    /// ```
    pub fn with_xml(xml: impl Into<String>) -> Self {
        DdsConfig { xml: Some(xml.into()), ..DdsConfig::default() }
    }

    /// The configuration a domain joined now gets: freight's settings for this host and
    /// environment, with the user's configuration over them.
    ///
    /// ```
    /// let effective = freight_dds::DdsConfig::loopback().effective();
    /// let xml = effective.xml();
    /// // freight's settings first, the user's last, so that the user's win:
    /// assert!(xml.find("MaxMessageSize").unwrap() < xml.find("127.0.0.1").unwrap());
    /// for s in &effective.settings {
    ///     println!("{} = {}: {}", s.path, s.value, s.reason);
    /// }
    /// ```
    pub fn effective(&self) -> EffectiveConfig {
        let mut warnings = Vec::new();
        let interfaces = host_interfaces().unwrap_or_else(|e| {
            warnings.push(format!("cannot list the network interfaces ({e}); datagrams sized for MTU 1500"));
            Vec::new()
        });
        let user = match &self.xml {
            Some(xml) => Some(UserConfig { source: UserSource::Code, text: xml.clone() }),
            None => std::env::var("CYCLONEDDS_URI")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .map(|text| UserConfig { source: UserSource::Environment, text }),
        };
        let mut effective = EffectiveConfig::new(DiscoveryOptions::from_env(), interfaces, user, warnings);
        if !self.freight_settings {
            effective.settings.clear();
        }
        effective
    }
}

/// Loopback only: SPDP by unicast to the participant indices 0..=64 on
/// 127.0.0.1, multicast off. `make test` points `CYCLONEDDS_URI` at the same
/// file, so stock peers in tests use it too.
const LOOPBACK: &str = include_str!("../loopback.xml");

/// Where the user's configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSource {
    /// The `CYCLONEDDS_URI` environment variable.
    Environment,
    /// [`DdsConfig::xml`], set in code.
    Code,
}

/// The user's configuration, applied over freight's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserConfig {
    /// Where it came from.
    pub source: UserSource,
    /// The XML, `file://` URI or list of them.
    pub text: String,
}

/// One setting freight gives Cyclone DDS, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Its place in Cyclone's configuration under `Domain`: `General/MaxMessageSize`, or
    /// `Internal/HeartbeatInterval@min` for an attribute.
    pub path: String,
    /// The value, in Cyclone's units (`1472B`, `8MiB`, `1ms`).
    pub value: String,
    /// Why freight chose it.
    pub reason: String,
}

/// The configuration of a DDS domain: freight's settings with their reasons, the user's
/// configuration over them, and what Cyclone gets ([`EffectiveConfig::xml`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveConfig {
    /// ROS 2's discovery settings, from the environment.
    pub discovery: DiscoveryOptions,
    /// The host's interfaces that are up.
    pub interfaces: Vec<Interface>,
    /// The interface datagrams are sized for: the one Cyclone picks by itself, or
    /// loopback when discovery stays on this host (`LOCALHOST`, `OFF`).
    pub sized_for: Option<Interface>,
    /// freight's settings, in the order they are applied.
    pub settings: Vec<Setting>,
    /// The user's configuration, which overrides freight's settings.
    pub user: Option<UserConfig>,
    /// Things the user should know: invalid environment values, what could not be read.
    pub warnings: Vec<String>,
}

/// MTU assumed when the interface's is unknown: Ethernet's and WiFi's.
const DEFAULT_MTU: u32 = 1500;

/// Socket receive buffer freight asks for (the kernel caps it at `net.core.rmem_max`).
pub const RECEIVE_BUFFER_REQUEST: u64 = 8 << 20;

impl EffectiveConfig {
    /// freight's settings for this discovery, these interfaces and this user
    /// configuration (no I/O: [`DdsConfig::effective`] reads them from the host).
    pub fn new(
        discovery: DiscoveryOptions,
        interfaces: Vec<Interface>,
        user: Option<UserConfig>,
        mut warnings: Vec<String>,
    ) -> Self {
        warnings.extend(discovery.warnings.iter().cloned());
        // LOCALHOST and OFF keep every peer on this host, reached through loopback
        // whichever interface Cyclone advertises: size for loopback then.
        let sized_for = match discovery.range {
            DiscoveryRange::Localhost | DiscoveryRange::Off => interfaces.iter().find(|i| i.loopback),
            DiscoveryRange::Subnet | DiscoveryRange::SystemDefault => None,
        }
        .or_else(|| cyclone_default_interface(&interfaces))
        .cloned();
        let mut settings = discovery_settings(&discovery);
        settings.extend(large_data_settings(sized_for.as_ref()));
        EffectiveConfig { discovery, interfaces, sized_for, settings, user, warnings }
    }

    /// What Cyclone DDS gets: freight's settings as one XML document, then the user's
    /// configuration, comma-separated (Cyclone applies them in order).
    pub fn xml(&self) -> String {
        let mut domain = Element::new("Domain");
        for s in &self.settings {
            domain.set(&s.path, &s.value);
        }
        let mut xml = String::from("<CycloneDDS>");
        domain.render(&mut xml);
        xml.push_str("</CycloneDDS>");
        if let Some(user) = &self.user {
            xml.push(',');
            xml.push_str(&user.text);
        }
        xml
    }

    /// The largest datagram freight sends (`General/MaxMessageSize`), unless the user's
    /// configuration changes it.
    pub fn max_message_size(&self) -> u32 {
        freight_tune::datagram_sizes(self.sized_for.as_ref().and_then(|i| i.mtu).unwrap_or(DEFAULT_MTU)).0
    }
}

/// Discovery as rmw_cyclonedds configures it for each `ROS_AUTOMATIC_DISCOVERY_RANGE`, so
/// that freight and stock nodes with the same environment find each other.
fn discovery_settings(d: &DiscoveryOptions) -> Vec<Setting> {
    let setting = |path: &str, value: &str, reason: &str| Setting {
        path: path.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let range = d.range.name();
    let mut out = Vec::new();
    match d.range {
        DiscoveryRange::SystemDefault => return out,
        DiscoveryRange::Off => {
            out.push(setting("General/AllowMulticast", "false", "ROS_AUTOMATIC_DISCOVERY_RANGE=OFF: no multicast"));
            out.push(setting(
                "Discovery/ParticipantIndex",
                "none",
                "ROS_AUTOMATIC_DISCOVERY_RANGE=OFF: no well-known ports to discover on",
            ));
            out.push(setting(
                "Discovery/Tag",
                &format!("ros_discovery_off_{}", std::process::id()),
                "ROS_AUTOMATIC_DISCOVERY_RANGE=OFF: a domain tag no other process has, as rmw_cyclonedds sets it",
            ));
            return out;
        }
        DiscoveryRange::Localhost => {
            out.push(setting(
                "General/AllowMulticast",
                "false",
                "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: nothing leaves this host by multicast",
            ));
        }
        DiscoveryRange::Subnet => {}
    }
    out.push(setting(
        "Discovery/ParticipantIndex",
        "auto",
        &format!("ROS_AUTOMATIC_DISCOVERY_RANGE={range}: well-known unicast ports, as rmw_cyclonedds sets them"),
    ));
    // rmw_cyclonedds allows 32, and a 34th participant on the host then fails to start;
    // stock nodes on Fast DDS, ROS 2's default, have no such limit. 119 is the most whose
    // unicast ports stay within the domain's block of 250 (7410 + 250 * domain + 2 * index).
    out.push(setting(
        "Discovery/MaxAutoParticipantIndex",
        "119",
        "participants per host with well-known unicast ports (120: a robot's processes, where \
         rmw_cyclonedds's 32 stops the 34th)",
    ));
    if d.range == DiscoveryRange::Localhost {
        out.push(setting(
            "Discovery/Peers/Peer@address",
            "localhost",
            "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: discover this host's participants by unicast",
        ));
    }
    for peer in &d.static_peers {
        out.push(setting("Discovery/Peers/Peer@address", peer, "ROS_STATIC_PEERS"));
    }
    out
}

/// What large samples need, derived from the interface in use. The reasons are measured:
/// docs/network.md has the numbers.
fn large_data_settings(interface: Option<&Interface>) -> Vec<Setting> {
    let mtu = interface.and_then(|i| i.mtu).unwrap_or(DEFAULT_MTU);
    let (max_message, fragment) = freight_tune::datagram_sizes(mtu);
    let on = match interface {
        Some(i) => format!("{} (MTU {mtu})", i.name),
        None => format!("an interface of unknown MTU (assumed {mtu})"),
    };
    let datagram_reason = if u64::from(mtu) > u64::from(max_message) + 1500 {
        format!(
            "{on}: the largest datagram, so a 33 MB frame is 508 datagrams instead of 24,700 \
             (Cyclone's default 1344-byte fragments overrun a stock reader's socket buffer)"
        )
    } else {
        format!(
            "{on}: one RTPS message per IP packet, so a lost packet costs one fragment, not a \
             datagram of IP fragments (measured over 1 Gbit/s with 1 % loss: 150 of 150 1080p frames \
             at 30 Hz, 1 of 150 with 64 KB datagrams); stock readers on this host pay for the small \
             datagrams: where every peer is on this host, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST \
             sizes for loopback"
        )
    };
    let setting = |path: &str, value: String, reason: String| Setting { path: path.into(), value, reason };
    vec![
        setting("General/MaxMessageSize", format!("{max_message}B"), datagram_reason),
        setting(
            "General/FragmentSize",
            format!("{fragment}B"),
            "the sample bytes one datagram carries: the largest message less 128 B of RTPS headers".into(),
        ),
        setting(
            "Internal/SocketReceiveBufferSize@max",
            format!("{}MiB", RECEIVE_BUFFER_REQUEST >> 20),
            "a stock writer sends a whole frame at once; what does not fit the socket buffer is lost and \
             repaired a round trip later (the kernel caps it at net.core.rmem_max)"
                .into(),
        ),
        setting(
            "Internal/SocketReceiveBufferSize@min",
            "default".into(),
            "whatever the kernel grants is accepted: a small buffer costs repairs, not the domain".into(),
        ),
        setting(
            "Internal/HeartbeatInterval",
            "20ms".into(),
            "while a large sample is unacknowledged, readers are asked every 20 ms (Cyclone's default \
             is 100 ms) what they miss: measured, a 4K frame to a stock reader in 110 ms instead of 140–360 ms"
                .into(),
        ),
        setting(
            "Internal/HeartbeatInterval@min",
            "1ms".into(),
            "a reader whose socket buffer overflowed asks for the rest at the next heartbeat: \
             repair rounds of 1 ms, not 20 ms, once a sample is incomplete"
                .into(),
        ),
        setting(
            "Internal/HeartbeatInterval@minsched",
            "1ms".into(),
            "as HeartbeatInterval@min, for the writer's scheduled heartbeats".into(),
        ),
        setting(
            "Internal/BurstSize/MaxRexmit",
            "8MiB".into(),
            "a reader's NACK of a large sample is answered in one burst, not 1 MiB at a time".into(),
        ),
        setting(
            "Internal/MaxQueuedRexmitBytes",
            "64MB".into(),
            "retransmissions of a 55 MB sample fit the queue (default 512 kB drops them until the next NACK)".into(),
        ),
        setting(
            "Internal/NackDelay",
            "10ms".into(),
            "a freight reader asks for what a stock writer's burst lost after 10 ms, not 100 ms".into(),
        ),
    ]
}

/// An XML element being built from setting paths.
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    text: Option<String>,
    children: Vec<Element>,
}

impl Element {
    fn new(name: &str) -> Self {
        Element { name: name.into(), attributes: Vec::new(), text: None, children: Vec::new() }
    }

    /// Sets `path` (`A/B/C` for text, `A/B@attr` for an attribute) below this element. A
    /// leaf that already has the value set gets a sibling (`Peers/Peer@address` twice
    /// makes two peers).
    fn set(&mut self, path: &str, value: &str) {
        let (elements, attribute) = match path.split_once('@') {
            Some((e, a)) => (e, Some(a)),
            None => (path, None),
        };
        let names: Vec<&str> = elements.split('/').collect();
        let Some((leaf, parents)) = names.split_last() else { return };
        let mut at = self;
        for name in parents {
            at = at.child(name, |_| true);
        }
        let leaf = match attribute {
            Some(a) => at.child(leaf, |e| e.attributes.iter().all(|(k, _)| k != a)),
            None => at.child(leaf, |e| e.text.is_none()),
        };
        match attribute {
            Some(a) => leaf.attributes.push((a.into(), value.into())),
            None => leaf.text = Some(value.into()),
        }
    }

    /// The last child called `name` that `fits`, created if there is none.
    fn child(&mut self, name: &str, fits: impl Fn(&Element) -> bool) -> &mut Element {
        match self.children.iter().rposition(|c| c.name == name && fits(c)) {
            Some(i) => &mut self.children[i],
            None => {
                self.children.push(Element::new(name));
                self.children.last_mut().expect("just pushed")
            }
        }
    }

    fn render(&self, out: &mut String) {
        let _ = write!(out, "<{}", self.name);
        for (k, v) in &self.attributes {
            let _ = write!(out, " {k}=\"{}\"", escape(v));
        }
        out.push('>');
        if let Some(t) = &self.text {
            out.push_str(&escape(t));
        }
        for c in &self.children {
            c.render(out);
        }
        let _ = write!(out, "</{}>", self.name);
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(name: &str, mtu: u32, loopback: bool) -> Interface {
        Interface {
            name: name.into(),
            address: if loopback { [127, 0, 0, 1].into() } else { [10, 0, 0, 2].into() },
            mtu: Some(mtu),
            loopback,
            multicast: !loopback,
            point_to_point: false,
        }
    }

    fn effective(range: Option<&str>, peers: Option<&str>, ifs: Vec<Interface>) -> EffectiveConfig {
        EffectiveConfig::new(DiscoveryOptions::from_values(range, peers, None), ifs, None, Vec::new())
    }

    fn value<'a>(c: &'a EffectiveConfig, path: &str) -> Option<&'a str> {
        c.settings.iter().find(|s| s.path == path).map(|s| s.value.as_str())
    }

    #[test]
    fn datagrams_are_sized_for_the_interface_cyclone_uses() {
        let lo_only = effective(None, None, vec![interface("lo", 65536, true)]);
        assert_eq!(value(&lo_only, "General/MaxMessageSize"), Some("65500B"));
        assert_eq!(value(&lo_only, "General/FragmentSize"), Some("65372B"));
        assert_eq!(lo_only.max_message_size(), 65500);
        let lan = effective(None, None, vec![interface("lo", 65536, true), interface("eth0", 1500, false)]);
        assert_eq!(lan.sized_for.as_ref().map(|i| i.name.as_str()), Some("eth0"));
        assert_eq!(value(&lan, "General/MaxMessageSize"), Some("1472B"));
        assert_eq!(value(&lan, "General/FragmentSize"), Some("1344B"));
        // Every peer on this host: loopback carries the data, whatever Cyclone advertises.
        let lan_ifs = vec![interface("eth0", 1500, false), interface("lo", 65536, true)];
        let local = effective(Some("LOCALHOST"), None, lan_ifs);
        assert_eq!(local.sized_for.as_ref().map(|i| i.name.as_str()), Some("lo"));
        assert_eq!(value(&local, "General/MaxMessageSize"), Some("65500B"));
        let unknown = effective(None, None, Vec::new());
        assert_eq!(unknown.max_message_size(), 1472);
        for s in &lan.settings {
            assert!(!s.reason.is_empty(), "{} has a reason", s.path);
        }
    }

    #[test]
    fn discovery_follows_rmw_cyclonedds_for_each_range() {
        let ifs = || vec![interface("lo", 65536, true)];
        let subnet = effective(None, Some("10.1.2.3"), ifs());
        assert_eq!(value(&subnet, "General/AllowMulticast"), None, "multicast as Cyclone defaults it");
        assert_eq!(value(&subnet, "Discovery/ParticipantIndex"), Some("auto"));
        assert!(subnet.xml().contains(r#"<Peers><Peer address="10.1.2.3"></Peer></Peers>"#), "{}", subnet.xml());
        let local = effective(Some("LOCALHOST"), Some("10.1.2.3"), ifs());
        assert_eq!(value(&local, "General/AllowMulticast"), Some("false"));
        assert!(local.xml().contains(r#"<Peer address="localhost"></Peer><Peer address="10.1.2.3"></Peer>"#));
        let off = effective(Some("OFF"), None, ifs());
        assert_eq!(value(&off, "Discovery/ParticipantIndex"), Some("none"));
        assert!(value(&off, "Discovery/Tag").is_some_and(|t| t.starts_with("ros_discovery_off_")));
        let system = effective(Some("SYSTEM_DEFAULT"), None, ifs());
        assert!(system.settings.iter().all(|s| !s.path.starts_with("Discovery")));
        assert_eq!(value(&system, "General/MaxMessageSize"), Some("65500B"), "large-data settings stay");
    }

    #[test]
    fn the_xml_nests_elements_and_merges_attributes_and_the_user_config_comes_last() {
        let mut c = effective(None, None, vec![interface("lo", 65536, true)]);
        c.user = Some(UserConfig { source: UserSource::Environment, text: "file:///etc/cyclone.xml".into() });
        let xml = c.xml();
        assert!(xml.starts_with("<CycloneDDS><Domain><Discovery>"), "{xml}");
        assert!(xml.contains("<General><MaxMessageSize>65500B</MaxMessageSize><FragmentSize>"), "{xml}");
        assert!(xml.contains(r#"<HeartbeatInterval min="1ms" minsched="1ms">20ms</HeartbeatInterval>"#), "{xml}");
        assert!(xml.contains("<BurstSize><MaxRexmit>8MiB</MaxRexmit></BurstSize>"), "{xml}");
        assert!(xml.ends_with("</CycloneDDS>,file:///etc/cyclone.xml"), "{xml}");
        assert_eq!(xml.matches("<General>").count(), 1, "one element per group: {xml}");
        let mut e = Element::new("Domain");
        e.set("Discovery/Peers/Peer@address", "a\"<&");
        let mut out = String::new();
        e.render(&mut out);
        assert_eq!(
            out,
            r#"<Domain><Discovery><Peers><Peer address="a&quot;&lt;&amp;"></Peer></Peers></Discovery></Domain>"#
        );
    }

    #[test]
    fn cyclone_accepts_every_range_with_the_loopback_config_over_it() {
        for range in ["SUBNET", "LOCALHOST", "OFF", "SYSTEM_DEFAULT"] {
            let mut c = effective(Some(range), Some("127.0.0.1"), host_interfaces().unwrap_or_default());
            c.user = DdsConfig::loopback().xml.map(|text| UserConfig { source: UserSource::Code, text });
            let xml = std::ffi::CString::new(c.xml()).unwrap();
            // A domain id of its own per range, in a range no other test uses.
            let domain =
                225 + ["SUBNET", "LOCALHOST", "OFF", "SYSTEM_DEFAULT"].iter().position(|r| *r == range).unwrap() as u32;
            // SAFETY: the string is valid for the call; the domain is deleted right after.
            let d = unsafe { cyclors::dds_create_domain(domain, xml.as_ptr()) };
            assert!(d > 0, "Cyclone refused the configuration for {range}: {}", c.xml());
            // SAFETY: `d` is the domain just created.
            unsafe { cyclors::dds_delete(d) };
        }
    }
}
