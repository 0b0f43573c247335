//! Node names of stock ROS 2 endpoints, from the `ros_discovery_info` topic.
//!
//! Every ROS 2 participant publishes, transient local, which of its DDS readers
//! and writers belong to which node (`rmw_dds_common/msg/ParticipantEntitiesInfo`).
//! DDS discovery alone knows endpoints, not nodes; this fills the gap for
//! `freight topic info`. freight nodes name themselves in their USER_DATA
//! instead, so freight does not publish on this topic.
//!
//! The message's GID is 24 bytes in ROS 2 Humble and 16 from Iron on, under the
//! same type name; each sample is parsed with both layouts and the one that
//! consumes it exactly wins. A GID is the endpoint's DDS GUID, zero-padded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use freight_dds::{EndpointQos, Participant, Reader};
use freight_msg::{CdrReader, DecodeError};

use crate::topic::lock;

const TOPIC: &str = "ros_discovery_info";
const TYPE: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";

/// The nodes of one participant: each node's endpoints by GUID.
type NodeMap = Vec<([u8; 16], String)>;

/// Reads `ros_discovery_info` and remembers, per writing participant, which
/// endpoint belongs to which node.
pub(crate) struct RosDiscovery {
    reader: Reader,
    /// Latest announcement per publishing participant (by writer handle).
    nodes: Mutex<HashMap<u64, NodeMap>>,
}

impl RosDiscovery {
    pub(crate) fn new(participant: &Arc<Participant>) -> Result<Self, freight_dds::DdsError> {
        // Transient local, as rmw publishes it: a late reader gets each
        // participant's last announcement.
        let qos =
            EndpointQos { transient_local: true, depth: Some(64), ..EndpointQos::reliable(Duration::from_millis(100)) };
        let reader = participant.create_reader(TOPIC, TYPE, &qos, Box::new(|| {}))?;
        Ok(RosDiscovery { reader, nodes: Mutex::default() })
    }

    /// The fully qualified node name of the endpoint with `guid`, if a ROS 2
    /// participant announced it.
    pub(crate) fn node_of(&self, guid: &[u8; 16]) -> Option<String> {
        let mut nodes = lock(&self.nodes);
        while let Ok(Some(sample)) = self.reader.take() {
            // A malformed announcement names no node; nothing else depends on it.
            if let Some(parsed) = parse(sample.bytes()) {
                nodes.insert(sample.publication_handle(), parsed);
            }
        }
        nodes.values().flatten().find(|(g, _)| g == guid).map(|(_, n)| n.clone())
    }
}

/// Parses one `ParticipantEntitiesInfo` sample with 24- and 16-byte GIDs.
fn parse(cdr: &[u8]) -> Option<NodeMap> {
    [24, 16].into_iter().find_map(|gid_len| parse_with(cdr, gid_len).ok())
}

fn parse_with(cdr: &[u8], gid_len: usize) -> Result<NodeMap, DecodeError> {
    let mut r = CdrReader::new(cdr)?;
    r.take(gid_len)?; // the participant's own GID
    let mut out = NodeMap::new();
    for _ in 0..r.read_len(4 + 4 + 4 + 4)? {
        let namespace = r.read_string()?;
        let name = r.read_string()?;
        let fqn = if namespace.ends_with('/') { format!("{namespace}{name}") } else { format!("{namespace}/{name}") };
        for _ in 0..2 {
            // Reader GIDs, then writer GIDs.
            for _ in 0..r.read_len(gid_len)? {
                let gid = r.take(gid_len)?;
                let mut guid = [0u8; 16];
                guid.copy_from_slice(&gid[..16]);
                out.push((guid, fqn.clone()));
            }
        }
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_msg::CdrWriter;

    fn announcement(gid_len: usize) -> Vec<u8> {
        let mut w = CdrWriter::new();
        w.write_raw(&vec![9u8; gid_len]);
        w.write_len(1).unwrap();
        w.write_string("/robot").unwrap();
        w.write_string("camera").unwrap();
        w.write_len(0).unwrap();
        w.write_len(1).unwrap();
        let mut gid = vec![0u8; gid_len];
        gid[..16].copy_from_slice(&[7; 16]);
        w.write_raw(&gid);
        w.finish()
    }

    #[test]
    fn humble_and_later_gids_both_parse() {
        for len in [24, 16] {
            let nodes = parse(&announcement(len)).expect("parses");
            assert_eq!(nodes, vec![([7; 16], "/robot/camera".to_string())], "gid of {len} bytes");
        }
        assert_eq!(parse(&announcement(24)[..30]), None);
        assert_eq!(parse(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
