//! freight nodes in the ROS graph, and the nodes of other ROS 2 participants:
//! the `ros_discovery_info` topic, both ways.
//!
//! DDS discovery knows endpoints, not nodes. Every ROS 2 participant therefore
//! publishes, reliable and transient local, which of its DDS readers and writers
//! belong to which node (`rmw_dds_common/msg/ParticipantEntitiesInfo`); `rclpy`'s
//! `get_node_names_and_namespaces()` and `get_publishers_info_by_topic()` read it.
//! freight does the same for the nodes of its context ([`RosGraph`]), and reads the
//! others' announcements for `freight topic info` and [`Node::node_names_and_namespaces`].
//!
//! **GID layout.** A GID is the endpoint's DDS GUID (16 bytes). The message's `Gid`
//! is `uint8[16]` from Iron on and `char[24]` (zero-padded) in Humble, under the same
//! type name. freight *writes* the 16-byte layout of Jazzy, Kilted and Rolling, the
//! distributions it is tested against: a Humble node cannot decode it and names
//! freight's endpoints `_NODE_NAME_UNKNOWN_`, but exchanges data with them as before.
//! freight *reads* both: each sample is parsed with both layouts and the one that
//! consumes it exactly wins.
//!
//! **Bounds.** Announcements come from anyone on the network. A sample over
//! [`MAX_SAMPLE_BYTES`] or with a name over 256 bytes (the message's `string<=256`)
//! is ignored, and at most [`MAX_HELD_BYTES`] of announcements are held, so a
//! hostile participant costs bounded memory, and parsing one costs time linear in
//! a bounded size.
//!
//! [`Node::node_names_and_namespaces`]: crate::Node::node_names_and_namespaces

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use freight_dds::{DdsError, EndpointQos, Participant, Reader, Writer};
use freight_msg::cdr::DecodeErrorKind;
use freight_msg::{CdrReader, CdrWriter, DecodeError, EncodeError};

use crate::sync::lock;

const TOPIC: &str = "ros_discovery_info";
const TYPE: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";

/// The GID length freight writes (Iron and later).
const GID_LEN: usize = 16;
/// The GID length of ROS 2 Humble.
const HUMBLE_GID_LEN: usize = 24;
/// Longest node name or namespace (`NodeEntitiesInfo`'s `string<=256`).
const MAX_NAME_BYTES: usize = 256;
/// Largest announcement read; larger ones are ignored. A participant with a hundred
/// nodes of a hundred endpoints each announces about 170 kB.
pub(crate) const MAX_SAMPLE_BYTES: usize = 1 << 20;
/// Announcements held at most, in serialized bytes, over all participants.
pub(crate) const MAX_HELD_BYTES: usize = 16 << 20;

/// A node by namespace and name.
pub(crate) type NodeKey = (String, String);

/// This context's part of the ROS graph, and what other participants announce.
#[derive(Default)]
pub(crate) struct RosGraph {
    /// This context's nodes and their DDS endpoints.
    local: Mutex<BTreeMap<NodeKey, NodeEntities>>,
    /// The `ros_discovery_info` writer and reader, once the domain is joined.
    dds: OnceLock<Dds>,
}

#[derive(Default)]
struct NodeEntities {
    /// Live `Node` handles of this name (a name may be created twice, as in rclpy).
    handles: usize,
    readers: Vec<[u8; 16]>,
    writers: Vec<[u8; 16]>,
}

struct Dds {
    participant_gid: [u8; 16],
    writer: Writer,
    reader: Reader,
    remote: Mutex<Remote>,
}

/// Announcements of other participants, by the writer they came from.
#[derive(Default)]
struct Remote {
    by_writer: HashMap<u64, Announcement>,
    held_bytes: usize,
}

/// One participant's nodes and which endpoint belongs to which.
#[derive(Debug, Default, PartialEq, Eq)]
struct Announcement {
    nodes: Vec<NodeKey>,
    /// Endpoint GUID to index in `nodes`.
    endpoints: HashMap<[u8; 16], usize>,
    /// The serialized size it was parsed from (what it counts against the bound).
    bytes: usize,
}

impl RosGraph {
    /// Starts announcing this context's nodes and reading the others', on the
    /// participant just joined. A failure leaves freight's nodes unnamed in the ROS
    /// graph; nothing else depends on it, so it is reported and not fatal.
    pub(crate) fn joined(&self, participant: &Arc<Participant>) {
        let dds = match Dds::new(participant) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("freight: cannot join the ROS graph ({TOPIC}): {e}; stock ROS 2 tools will not name freight's nodes");
                return;
            }
        };
        if self.dds.set(dds).is_ok() {
            self.announce(&lock(&self.local));
        }
    }

    /// Registers a node; it stays in the graph while the registration lives.
    pub(crate) fn add_node(self: &Arc<Self>, key: NodeKey) -> Registration {
        let mut local = lock(&self.local);
        local.entry(key.clone()).or_default().handles += 1;
        self.announce(&local);
        Registration { graph: Arc::downgrade(self), key, endpoint: None }
    }

    /// Registers a DDS endpoint of node `key`, by its GUID.
    pub(crate) fn add_endpoint(self: &Arc<Self>, key: &NodeKey, guid: [u8; 16], writer: bool) -> Registration {
        let mut local = lock(&self.local);
        let node = local.entry(key.clone()).or_default();
        if writer { &mut node.writers } else { &mut node.readers }.push(guid);
        self.announce(&local);
        Registration { graph: Arc::downgrade(self), key: key.clone(), endpoint: Some((guid, writer)) }
    }

    fn remove(&self, key: &NodeKey, endpoint: Option<([u8; 16], bool)>) {
        let mut local = lock(&self.local);
        let Some(node) = local.get_mut(key) else { return };
        match endpoint {
            Some((guid, writer)) => {
                let list = if writer { &mut node.writers } else { &mut node.readers };
                list.retain(|g| *g != guid);
            }
            None => node.handles = node.handles.saturating_sub(1),
        }
        if node.handles == 0 && node.readers.is_empty() && node.writers.is_empty() {
            local.remove(key);
        }
        self.announce(&local);
    }

    /// Publishes this context's nodes (called with the registry locked, so that
    /// announcements go out in the order of the changes).
    fn announce(&self, local: &BTreeMap<NodeKey, NodeEntities>) {
        let Some(dds) = self.dds.get() else { return };
        // Only nodes with a handle: an endpoint outliving its node keeps its entry
        // for bookkeeping, but the node has left the graph.
        let cdr = encode(dds.participant_gid, local.iter().filter(|(_, n)| n.handles > 0));
        let result = cdr.map_err(|e| e.to_string()).and_then(|b| dds.writer.write_cdr(&b).map_err(|e| e.to_string()));
        if let Err(e) = result {
            eprintln!("freight: announcing this process's nodes on {TOPIC} failed: {e}");
        }
    }

    /// The fully qualified name of the node of the DDS endpoint `guid`, if another
    /// participant announced it.
    pub(crate) fn node_of(&self, guid: &[u8; 16]) -> Option<String> {
        let dds = self.dds.get()?;
        let mut remote = lock(&dds.remote);
        remote.refresh(&dds.reader);
        remote.by_writer.values().find_map(|a| a.endpoints.get(guid).map(|i| fully_qualified(&a.nodes[*i])))
    }

    /// Every node this context knows: its own and those other participants announce,
    /// as `(name, namespace)`, sorted.
    pub(crate) fn nodes(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = lock(&self.local)
            .iter()
            .filter(|(_, n)| n.handles > 0)
            .map(|((ns, name), _)| (name.clone(), ns.clone()))
            .collect();
        if let Some(dds) = self.dds.get() {
            let mut remote = lock(&dds.remote);
            remote.refresh(&dds.reader);
            out.extend(remote.by_writer.values().flat_map(|a| a.nodes.iter().map(|(ns, n)| (n.clone(), ns.clone()))));
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Keeps a node or an endpoint in the graph; dropping it removes it.
pub(crate) struct Registration {
    graph: Weak<RosGraph>,
    key: NodeKey,
    endpoint: Option<([u8; 16], bool)>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(graph) = self.graph.upgrade() {
            graph.remove(&self.key, self.endpoint);
        }
    }
}

impl Dds {
    fn new(participant: &Arc<Participant>) -> Result<Self, DdsError> {
        // As rmw publishes it: reliable, transient local, the last announcement only,
        // so a late reader gets each participant's current state.
        let qos =
            EndpointQos { transient_local: true, depth: Some(1), ..EndpointQos::reliable(Duration::from_millis(100)) };
        let writer = participant.create_writer(TOPIC, TYPE, &qos, Box::new(|| {}))?;
        let reader_qos = EndpointQos { depth: Some(64), ..qos };
        let reader = participant.create_reader(TOPIC, TYPE, &reader_qos, Box::new(|| {}))?;
        Ok(Dds { participant_gid: participant.guid(), writer, reader, remote: Mutex::default() })
    }
}

impl Remote {
    /// Takes the announcements that arrived. Oversized and malformed ones are
    /// skipped; an announcement that would take the held total over the bound is
    /// skipped too (the writer's previous one is kept).
    fn refresh(&mut self, reader: &Reader) {
        let mut arrived = false;
        while let Ok(Some(sample)) = reader.take() {
            arrived = true;
            let bytes = sample.bytes();
            if bytes.len() > MAX_SAMPLE_BYTES {
                continue;
            }
            let Some(announcement) = parse(bytes) else { continue };
            let handle = sample.publication_handle();
            let replaced = self.by_writer.get(&handle).map_or(0, |a| a.bytes);
            if self.held_bytes - replaced + announcement.bytes > MAX_HELD_BYTES {
                continue;
            }
            self.held_bytes = self.held_bytes - replaced + announcement.bytes;
            self.by_writer.insert(handle, announcement);
        }
        if arrived {
            // Forget participants that left: their writers are no longer matched.
            let gone: Vec<u64> =
                self.by_writer.keys().copied().filter(|h| reader.matched_writer(*h).is_none()).collect();
            for h in gone {
                if let Some(a) = self.by_writer.remove(&h) {
                    self.held_bytes -= a.bytes;
                }
            }
        }
    }
}

fn fully_qualified((namespace, name): &NodeKey) -> String {
    if namespace.ends_with('/') {
        format!("{namespace}{name}")
    } else {
        format!("{namespace}/{name}")
    }
}

/// `ParticipantEntitiesInfo` with 16-byte GIDs: the participant's GID, then per node
/// its namespace, name, reader GIDs and writer GIDs.
fn encode<'a>(
    participant: [u8; 16],
    nodes: impl Iterator<Item = (&'a NodeKey, &'a NodeEntities)> + Clone,
) -> Result<Vec<u8>, EncodeError> {
    let mut w = CdrWriter::new();
    w.write_raw(&participant);
    w.write_len(nodes.clone().count())?;
    for ((namespace, name), n) in nodes {
        w.write_string(namespace)?;
        w.write_string(name)?;
        for gids in [&n.readers, &n.writers] {
            w.write_len(gids.len())?;
            for g in gids {
                w.write_raw(g);
            }
        }
    }
    Ok(w.finish())
}

/// Parses one announcement with 24- and 16-byte GIDs; `None` when neither layout
/// reads it exactly or it breaks a bound.
fn parse(cdr: &[u8]) -> Option<Announcement> {
    [HUMBLE_GID_LEN, GID_LEN].into_iter().find_map(|gid_len| parse_with(cdr, gid_len).ok())
}

fn parse_with(cdr: &[u8], gid_len: usize) -> Result<Announcement, DecodeError> {
    let mut r = CdrReader::new(cdr)?;
    r.take(gid_len)?; // the participant's own GID
    let mut out = Announcement { bytes: cdr.len(), ..Default::default() };
    // Each node is at least two empty strings and two empty sequences.
    for _ in 0..r.read_len(4 + 4 + 4 + 4)? {
        let namespace = bounded_name(&mut r)?;
        let name = bounded_name(&mut r)?;
        let index = out.nodes.len();
        out.nodes.push((namespace, name));
        for _ in 0..2 {
            // Reader GIDs, then writer GIDs.
            for _ in 0..r.read_len(gid_len)? {
                let gid = r.take(gid_len)?;
                let mut guid = [0u8; 16];
                guid.copy_from_slice(&gid[..16]);
                out.endpoints.insert(guid, index);
            }
        }
    }
    r.finish()?;
    Ok(out)
}

/// The nodes of an announcement, `(namespace, name)`, and its endpoint GUIDs
/// with the index of their node.
#[doc(hidden)]
pub type InspectedAnnouncement = (Vec<(String, String)>, Vec<([u8; 16], usize)>);

/// What freight reads from one `ros_discovery_info` sample (a
/// `rmw_dds_common/msg/ParticipantEntitiesInfo` in CDR, with Humble's 24-byte
/// or Jazzy's 16-byte GIDs): each node's `(namespace, name)`, and each
/// endpoint GUID with the index of its node; `None` when the sample is refused
/// (malformed, a name over 256 bytes). Samples over 1 MiB are refused before
/// this is reached. For the fuzz target and tools; the graph API is
/// [`crate::Node::node_names_and_namespaces`].
#[doc(hidden)]
pub fn inspect_ros_discovery_info(cdr: &[u8]) -> Option<InspectedAnnouncement> {
    let a = parse(cdr)?;
    Some((a.nodes, a.endpoints.into_iter().collect()))
}

fn bounded_name(r: &mut CdrReader<'_>) -> Result<String, DecodeError> {
    let s = r.read_string()?;
    if s.len() > MAX_NAME_BYTES {
        return Err(r.error(DecodeErrorKind::LengthTooLarge {
            len: s.len() as u64,
            needed: s.len() as u64,
            remaining: MAX_NAME_BYTES,
        }));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announcement(gid_len: usize, name: &str, gids: usize) -> Vec<u8> {
        let mut w = CdrWriter::new();
        w.write_raw(&vec![9u8; gid_len]);
        w.write_len(1).unwrap();
        w.write_string("/robot").unwrap();
        w.write_string(name).unwrap();
        w.write_len(0).unwrap();
        w.write_len(gids).unwrap();
        for i in 0..gids {
            let mut gid = vec![0u8; gid_len];
            gid[..4].copy_from_slice(&(i as u32).to_le_bytes());
            gid[4..16].copy_from_slice(&[7; 12]);
            w.write_raw(&gid);
        }
        w.finish()
    }

    fn guid(i: u32) -> [u8; 16] {
        let mut g = [7u8; 16];
        g[..4].copy_from_slice(&i.to_le_bytes());
        g
    }

    #[test]
    fn humble_and_later_gids_both_parse() {
        for len in [24, 16] {
            let a = parse(&announcement(len, "camera", 1)).expect("parses");
            assert_eq!(a.nodes, vec![("/robot".to_string(), "camera".to_string())], "gid of {len} bytes");
            assert_eq!(a.endpoints.get(&guid(0)), Some(&0));
        }
        assert_eq!(parse(&announcement(24, "camera", 1)[..30]), None);
        assert_eq!(parse(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn what_freight_announces_reads_back_with_jazzy_gids() {
        let mut nodes = BTreeMap::new();
        let camera = NodeEntities { handles: 1, readers: vec![guid(1)], writers: vec![guid(2), guid(3)] };
        nodes.insert(("/".to_string(), "camera".to_string()), camera);
        let bytes = encode([5; 16], nodes.iter()).unwrap();
        assert_eq!(&bytes[4..20], &[5; 16], "the participant's GID comes first, 16 bytes");
        let a = parse_with(&bytes, GID_LEN).expect("16-byte layout");
        assert_eq!(a.nodes, vec![("/".to_string(), "camera".to_string())]);
        assert_eq!(a.endpoints.len(), 3);
        assert!(parse_with(&bytes, HUMBLE_GID_LEN).is_err(), "not mistaken for Humble's layout");
        assert_eq!(fully_qualified(&a.nodes[0]), "/camera");
        assert_eq!(fully_qualified(&("/ns".into(), "cam".into())), "/ns/cam");
    }

    #[test]
    fn hostile_announcements_are_refused_at_their_bound() {
        let long_name = "n".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(parse(&announcement(16, &long_name, 1)), None, "a name over 256 bytes");
        assert!(parse(&announcement(16, &"n".repeat(MAX_NAME_BYTES), 1)).is_some());
        // Tens of thousands of GIDs parse in bounded time and are counted by size.
        let many = announcement(16, "camera", 50_000);
        assert!(many.len() < MAX_SAMPLE_BYTES);
        let t0 = std::time::Instant::now();
        let a = parse(&many).expect("parses");
        assert_eq!(a.endpoints.len(), 50_000);
        assert_eq!(a.bytes, many.len());
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        // A count that claims more elements than the bytes hold is refused before
        // anything is allocated for them.
        let mut w = CdrWriter::new();
        w.write_raw(&[0; 16]);
        w.write_u32(u32::MAX);
        assert_eq!(parse(&w.finish()), None);
    }
}
