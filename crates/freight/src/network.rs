//! The network plane: a DDS writer beside every publisher and a DDS reader
//! beside every subscription, speaking ROS 2 on the wire (`rt/<topic>`, ROS 2
//! type names, plain CDR), so stock ROS 2 nodes and freight nodes on other
//! hosts exchange messages with freight nodes.
//!
//! Each freight endpoint says in its DDS USER_DATA that it is freight, on which
//! host (by the identity of the shared memory it reaches, [`host_id`]) and in
//! which process ([`PeerTag`]). Peers that share this host's shared memory are
//! served by the local plane, so
//! * a writer counts only the other readers; with none, nothing is serialized
//!   and nothing is written;
//! * a reader drops samples of writers that are freight on this host (they came
//!   by shared memory already), so no sample arrives twice; but it takes those
//!   of a publisher's spill writer, which carries what shared memory had no
//!   room for (`delivery/spill.rs`).
//!
//! A message is serialized once per publish, into one DDS write, however many
//! readers are matched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use freight_dds::{DdsError, EndpointQos, Participant, Reader, ReceivedCdr, Writer};
use freight_msg::message::read_inline;
use freight_msg::{
    BackendKind, BackendSet, Buffer, BufferDecoder, BufferStorage, CdrReader, DecodeError, ElementInfo, RawBuffer,
};

use crate::node::Node;
use crate::qos::QoS;
use crate::ros_discovery::Registration;
use crate::sync::lock;

/// The identity of this host's shared memory: boot id, and the device and
/// inode of `/dev/shm` (iceoryx2's segments) and of iceoryx2's root directory
/// (`/tmp/iceoryx2`: its service and node records). Processes with equal ids
/// reach each other's iceoryx2 services; a process that shares one of the two
/// but not the other (a container given the host's `/dev/shm` alone) reaches
/// none, and is another host to freight, reached over the network plane.
pub fn host_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    if let Some(id) = ID.get() {
        return *id;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let identity = |path: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).map(|m| format!("{}:{}", m.dev(), m.ino()))
    };
    let root = crate::local_plane::iceoryx2_config().global.root_path().to_string();
    let key =
        format!("{}|{}|{}", boot.trim(), identity("/dev/shm").unwrap_or_default(), identity(&root).unwrap_or_default());
    let id = freight_msg::message::fnv1a(key.as_bytes());
    // iceoryx2 makes its root directory with the first node; until then the id
    // is not final, and is not kept.
    if identity(&root).is_ok() {
        let _ = ID.set(id);
    }
    id
}

/// What a freight endpoint says of itself in its DDS USER_DATA, in ROS 2's
/// `key=value;` form (ROS 2 tools read `typehash=` from the same field and skip
/// keys they do not know):
/// `freight=1;host=<hex>;pid=<pid>;node=</ns/name>;backend=<name>;` for a
/// publisher, `...;accepts=<bits>;` for a subscription, and `...;spill=1;`
/// for a publisher's spill writer (`delivery/spill.rs`): the frames this
/// host's `/dev/shm` has no room for, which this host's readers take too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTag {
    /// [`host_id`] of its host.
    pub host: u64,
    /// Its process id.
    pub pid: u32,
    /// Its node's fully qualified name.
    pub node: String,
    /// A publisher's buffer memory.
    pub backend: Option<BackendKind>,
    /// A subscription's accepted backends.
    pub accepts: Option<BackendSet>,
    /// A publisher's spill writer: it carries what shared memory cannot,
    /// to every reader, this host's included.
    pub spill: bool,
}

impl PeerTag {
    /// The USER_DATA bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("freight=1;host={:016x};pid={};node={};", self.host, self.pid, self.node);
        if let Some(b) = self.backend {
            s += &format!("backend={};", b.name());
        }
        if let Some(a) = self.accepts {
            s += &format!("accepts={};", a.bits());
        }
        if self.spill {
            s += "spill=1;";
        }
        s.into_bytes()
    }

    /// Parses USER_DATA; `None` for endpoints that are not freight's.
    pub fn decode(user_data: &[u8]) -> Option<PeerTag> {
        let text = std::str::from_utf8(user_data).ok()?;
        let fields: HashMap<&str, &str> = text.split(';').filter_map(|kv| kv.split_once('=')).collect();
        if fields.get("freight") != Some(&"1") {
            return None;
        }
        Some(PeerTag {
            host: u64::from_str_radix(fields.get("host")?, 16).ok()?,
            pid: fields.get("pid")?.parse().ok()?,
            node: fields.get("node").map_or_else(String::new, |n| n.to_string()),
            backend: fields.get("backend").and_then(|b| BackendKind::from_name(b)),
            accepts: fields.get("accepts").and_then(|a| a.parse().ok()).map(BackendSet::from_bits),
            spill: fields.get("spill") == Some(&"1"),
        })
    }

    /// The tag of an endpoint of `node` in this process.
    pub(crate) fn of_this_process(node: &Node, backend: Option<BackendKind>, accepts: Option<BackendSet>) -> Self {
        PeerTag {
            host: host_id(),
            pid: std::process::id(),
            node: node.fully_qualified_name(),
            backend,
            accepts,
            spill: false,
        }
    }

    /// Whether this endpoint shares this host's shared memory (and so is
    /// served by the local plane).
    pub fn is_local(&self) -> bool {
        self.host == host_id()
    }
}

/// Whether a DDS endpoint with this USER_DATA is freight on this host.
fn on_this_host(user_data: &[u8]) -> bool {
    PeerTag::decode(user_data).is_some_and(|t| t.is_local())
}

/// Whether a DDS endpoint with this USER_DATA is freight on this host, and so
/// served by the local plane rather than over DDS. A spill writer is not: it
/// carries what the local plane has no room for.
pub(crate) fn served_locally(user_data: &[u8]) -> bool {
    PeerTag::decode(user_data).is_some_and(|t| t.is_local() && !t.spill)
}

/// The DDS topic of a topic: `/camera/image` is `rt/camera/image`. A
/// service's request and reply topics are named for DDS already
/// (`rq/addRequest`, see [`crate::service`]): every fully qualified ROS 2
/// topic starts with `/`, and none of them does.
pub fn dds_topic_name(topic: &str) -> String {
    if topic.starts_with('/') {
        format!("rt{topic}")
    } else {
        topic.to_string()
    }
}

/// [`QoS::to_dds`], with this endpoint's tag in USER_DATA.
fn endpoint_qos(qos: &QoS, tag: &PeerTag, max_depth: usize) -> EndpointQos {
    EndpointQos { user_data: tag.encode(), ..qos.to_dds(max_depth) }
}

/// A publisher's DDS writer.
pub(crate) struct NetworkWriter {
    writer: Writer,
    /// Set by Cyclone when a reader matches or leaves.
    changed: Arc<AtomicBool>,
    /// Matched readers that are not freight on this host, and all of them.
    remote: AtomicUsize,
    matched: AtomicUsize,
    /// Names the writer's node in the ROS graph while the writer lives.
    _in_graph: Registration,
}

impl NetworkWriter {
    /// The DDS writer of `node`'s publisher on `topic`.
    pub(crate) fn new(
        participant: &Arc<Participant>,
        node: &Node,
        topic: &str,
        type_name: &str,
        qos: &QoS,
        tag: &PeerTag,
    ) -> Result<Self, DdsError> {
        let changed = Arc::new(AtomicBool::new(true));
        let flag = changed.clone();
        let writer = participant.create_writer(
            &dds_topic_name(topic),
            type_name,
            &endpoint_qos(qos, tag, node.context().inner.limits.max_depth),
            Box::new(move || flag.store(true, Ordering::Release)),
        )?;
        let in_graph = node.context().inner.ros_graph.add_endpoint(&node.graph_key(), writer.guid(), true);
        Ok(NetworkWriter {
            writer,
            changed,
            remote: AtomicUsize::new(0),
            matched: AtomicUsize::new(0),
            _in_graph: in_graph,
        })
    }

    /// Matched readers that need this publisher's data over the network. Reads
    /// discovery data only after the set of matched readers changed.
    pub(crate) fn remote_readers(&self) -> usize {
        self.refresh();
        self.remote.load(Ordering::Acquire)
    }

    /// Every matched reader, this host's freight readers included (those a
    /// spill writer serves).
    pub(crate) fn matched_readers(&self) -> usize {
        self.refresh();
        self.matched.load(Ordering::Acquire)
    }

    /// Counts the matched readers again if they changed.
    fn refresh(&self) {
        // A plain load first: this runs on every publish, and a
        // read-modify-write would cost more than the rest of it.
        if self.changed.load(Ordering::Acquire) && self.changed.swap(false, Ordering::AcqRel) {
            match self.writer.matched_readers() {
                Ok(readers) => {
                    let n = readers.iter().filter(|r| !served_locally(&r.user_data)).count();
                    self.remote.store(n, Ordering::Release);
                    self.matched.store(readers.len(), Ordering::Release);
                }
                // Try again on the next publish.
                Err(_) => self.changed.store(true, Ordering::Release),
            }
        }
    }

    pub(crate) fn write(&self, cdr: &[u8]) -> Result<(), DdsError> {
        self.writer.write_cdr(cdr)
    }
}

/// A subscription's DDS reader.
pub(crate) struct NetworkReader {
    reader: Reader,
    /// Set by Cyclone when samples arrive; cleared when a take finds none.
    pending: Arc<AtomicBool>,
    /// Whether each writer seen is freight on this host (its samples are dropped).
    local_writers: Mutex<HashMap<u64, bool>>,
    /// Names the reader's node in the ROS graph while the reader lives.
    _in_graph: Registration,
}

impl NetworkReader {
    /// The DDS reader of `node`'s subscription on `topic`, whose arrivals also run
    /// `wake` (on a Cyclone thread).
    pub(crate) fn new(
        participant: &Arc<Participant>,
        node: &Node,
        topic: &str,
        type_name: &str,
        qos: &QoS,
        tag: &PeerTag,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Result<Self, DdsError> {
        let pending = Arc::new(AtomicBool::new(false));
        let flag = pending.clone();
        let reader = participant.create_reader(
            &dds_topic_name(topic),
            type_name,
            &endpoint_qos(qos, tag, node.context().inner.limits.max_depth),
            Box::new(move || {
                flag.store(true, Ordering::Release);
                wake();
            }),
        )?;
        let in_graph = node.context().inner.ros_graph.add_endpoint(&node.graph_key(), reader.guid(), false);
        Ok(NetworkReader { reader, pending, local_writers: Mutex::default(), _in_graph: in_graph })
    }

    /// Matched writers that are not freight on this host (a spill writer of
    /// this host's is the second writer of a publisher counted locally).
    pub(crate) fn remote_writers(&self) -> usize {
        self.reader.matched_writers().map(|ws| ws.iter().filter(|w| !on_this_host(&w.user_data)).count()).unwrap_or(0)
    }

    /// Samples DDS knows this reader missed (`freight_dds::Reader::missed`);
    /// 0 when Cyclone cannot say.
    pub(crate) fn missed(&self) -> u64 {
        self.reader.missed().unwrap_or(0)
    }

    /// Whether samples may be waiting.
    pub(crate) fn has_data(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// The next sample from a writer the local plane does not serve.
    pub(crate) fn take(&self) -> Result<Option<ReceivedCdr>, DdsError> {
        // A plain load first: busy-polling subscriptions call this in a loop.
        if !self.pending.load(Ordering::Acquire) || !self.pending.swap(false, Ordering::AcqRel) {
            return Ok(None);
        }
        while let Some(sample) = self.reader.take()? {
            if self.is_local_writer(sample.publication_handle()) {
                continue;
            }
            // There may be more: look again next time.
            self.pending.store(true, Ordering::Release);
            return Ok(Some(sample));
        }
        Ok(None)
    }

    fn is_local_writer(&self, handle: u64) -> bool {
        let mut known = lock(&self.local_writers);
        if let Some(local) = known.get(&handle) {
            return *local;
        }
        if known.len() >= 4096 {
            // Writers come and go; forget the old ones rather than grow.
            known.clear();
        }
        let local = self.reader.matched_writer(handle).is_some_and(|w| served_locally(&w.user_data));
        known.insert(handle, local);
        local
    }
}

/// A buffer field of a message received from the network: a view of the DDS
/// sample's own bytes, which it keeps alive.
struct ReceivedSlice {
    sample: Arc<ReceivedCdr>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for ReceivedSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReceivedSlice({} bytes)", self.len)
    }
}

impl BufferStorage for ReceivedSlice {
    fn backend(&self) -> BackendKind {
        BackendKind::Cpu
    }
    fn len(&self) -> usize {
        self.len
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        self.sample.bytes().get(self.start..self.start + self.len)
    }
}

/// Decodes buffer fields of a received sample without copying them: each
/// buffer views the sample. A buffer whose elements are misaligned in the
/// sample (the CDR stream starts 4 bytes into it) is copied instead.
pub(crate) struct ReceivedBuffers(pub(crate) Arc<ReceivedCdr>);

impl BufferDecoder for ReceivedBuffers {
    fn read_buffer(&mut self, r: &mut CdrReader<'_>, element: ElementInfo) -> Result<RawBuffer, DecodeError> {
        let bytes = read_inline(r, element)?;
        if bytes.is_empty() {
            // Nothing to keep the sample alive for: a peer's sample of many
            // empty sequences costs no allocation per sequence.
            return Ok(RawBuffer::empty());
        }
        let base = self.0.bytes().as_ptr() as usize;
        let start = (bytes.as_ptr() as usize).wrapping_sub(base);
        let aligned = (bytes.as_ptr() as usize).is_multiple_of(element.size);
        if aligned && start.checked_add(bytes.len()).is_some_and(|end| end <= self.0.bytes().len()) {
            let view = ReceivedSlice { sample: self.0.clone(), start, len: bytes.len() };
            return Ok(RawBuffer::from_storage(Arc::new(view)));
        }
        Ok(Buffer::from(bytes.to_vec()).raw().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_tag_round_trips_and_other_user_data_is_not_freights() {
        let tag = PeerTag { host: 7, pid: 42, node: "/cam".into(), backend: None, accepts: None, spill: false };
        assert_eq!(PeerTag::decode(&tag.encode()), Some(tag.clone()));
        let spill = PeerTag { spill: true, ..tag };
        assert_eq!(PeerTag::decode(&spill.encode()), Some(spill));
        assert_eq!(PeerTag::decode(b"typehash=RIHS01_00;"), None);
    }
}
