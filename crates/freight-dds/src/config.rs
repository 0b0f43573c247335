//! The one place where the DDS plane's configuration comes from.
//!
//! Cyclone DDS reads an XML configuration per domain. freight passes one only
//! when asked to ([`DdsConfig::xml`]); otherwise Cyclone reads `CYCLONEDDS_URI`
//! as every Cyclone-based ROS 2 node does, so an existing deployment's file
//! applies to freight unchanged. A tuned profile (generated for a wireless
//! link, say) replaces the whole configuration through the same field.

/// Configuration of the DDS domain a context joins.
///
/// ```
/// use freight_dds::DdsConfig;
/// let cfg = DdsConfig::default(); // CYCLONEDDS_URI, else Cyclone's defaults
/// assert!(cfg.xml.is_none());
/// let lo = DdsConfig::loopback();  // discovery and data on 127.0.0.1 only
/// assert!(lo.xml.unwrap().contains("127.0.0.1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DdsConfig {
    /// A Cyclone DDS configuration: XML, or a `file://` URI, or a
    /// comma-separated list of them (later ones override earlier ones).
    /// `None`: `CYCLONEDDS_URI`, as Cyclone reads it.
    pub xml: Option<String>,
}

impl DdsConfig {
    /// Discovery and data on the loopback interface only, peers found by unicast
    /// on 127.0.0.1 (loopback has no multicast on most Linux systems). For
    /// tests and single-host setups that must not touch a real network.
    pub fn loopback() -> Self {
        DdsConfig { xml: Some(LOOPBACK.into()) }
    }
}

/// Loopback only: SPDP by unicast to the participant indices 0..=64 on
/// 127.0.0.1, multicast off. `make test` points `CYCLONEDDS_URI` at the same
/// file, so stock peers in tests use it too.
const LOOPBACK: &str = include_str!("../loopback.xml");
