//! Topics of types freight has no Rust type for (a stock node's `/rosout`,
//! `rcl_interfaces/msg/Log`; `nav_msgs/msg/Odometry`; a user's own package),
//! as `freight bag` and `freight view` take and play them: a DDS reader of the
//! topic hands over each sample's CDR without decoding it, and a DDS writer
//! sends recorded CDR as it is, as `ros2 bag` does with its generic
//! subscriptions and publishers. What a bag or a Foxglove channel needs
//! besides, the type's definition, comes from the `.msg` files of a ROS 2
//! install ([`MsgPaths::dirs`]). freight's own publishers of such types (Rust
//! `message!` types) are reached this way too, as CDR over DDS. The typed
//! counterpart, for the built-in types, is [`crate::subscribe`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;
use freight_bag::Schema;
use freight_dds::{DdsConfig, EndpointQos, Participant, Reader, ReceivedCdr, Writer};

/// What a raw topic does with each sample it takes.
pub type OnCdr = Box<dyn Fn(&ReceivedCdr) + Send + Sync>;

/// One reader and what it hands its samples to.
struct Raw {
    /// `None` until the reader exists (samples that arrive before wait in it
    /// for the next arrival, or the drain at the end) and once [`RawTopics`]
    /// let it go: the reader is deleted on the thread that drops
    /// `RawTopics`, never in its own callback, where Cyclone DDS would wait
    /// for the callback in progress to end.
    reader: Mutex<Option<Reader>>,
    on_cdr: OnCdr,
    /// The topic and the RIHS01 hash of the definition its samples are taken as.
    topic: String,
    type_hash: String,
    /// Per writer (by instance handle): whether its samples are taken, as the
    /// type hash in its USER_DATA says. At most [`MAX_WRITERS`] entries.
    writers: Mutex<HashMap<u64, bool>>,
}

/// The most writers a raw topic remembers the verdict of: writers come and go
/// with other participants, and one that churns them must not grow the map
/// without end (forgetting costs a look at the writer's discovery data).
const MAX_WRITERS: usize = 1024;

impl Raw {
    /// Samples DDS knows the reader missed; 0 once it is gone or when
    /// Cyclone cannot say.
    fn missed(&self) -> u64 {
        let reader = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        reader.as_ref().and_then(|r| r.missed().ok()).unwrap_or(0)
    }

    /// Whether the writer `handle` publishes the type of the definition its
    /// samples are taken as. ROS 2 from Iron on puts the type's hash in an
    /// endpoint's USER_DATA (`typehash=RIHS01_...;`); a writer that says
    /// another (the `.msg` files found are another version of the type) is
    /// refused, once said why, since its bytes would be read with the wrong
    /// definition. A writer that says none (Humble, plain DDS) is taken.
    fn same_type(&self, reader: &Reader, handle: u64) -> bool {
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if writers.len() >= MAX_WRITERS && !writers.contains_key(&handle) {
            writers.clear();
        }
        *writers.entry(handle).or_insert_with(|| {
            let theirs = reader.matched_writer(handle).and_then(|w| type_hash(&w.user_data).map(str::to_owned));
            match theirs {
                Some(theirs) if theirs != self.type_hash => {
                    eprintln!(
                        "warning: {}: a publisher's type hash is {theirs}, the definition found has {}: the .msg \
                         files found are another version of its type, and its messages are not taken",
                        self.topic, self.type_hash
                    );
                    false
                }
                _ => true,
            }
        })
    }

    /// Hands over every sample the reader holds; how many.
    fn take_all(&self) -> usize {
        let reader = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let Some(reader) = reader.as_ref() else { return 0 };
        let mut taken = 0;
        loop {
            match reader.take() {
                Ok(Some(sample)) => {
                    if self.same_type(reader, sample.publication_handle()) {
                        (self.on_cdr)(&sample);
                        taken += 1;
                    }
                }
                Ok(None) => return taken,
                Err(e) => {
                    eprintln!("warning: {}: a message could not be taken from DDS: {e}", self.topic);
                    return taken;
                }
            }
        }
    }
}

/// The raw topics of one recording or playback, on a DDS participant of their
/// own (made with the first; freight's context keeps its own to itself).
pub struct RawTopics {
    domain: u32,
    participant: Option<Arc<Participant>>,
    topics: Vec<Arc<Raw>>,
}

impl RawTopics {
    pub fn new(domain: u32) -> Self {
        RawTopics { domain, participant: None, topics: Vec::new() }
    }

    /// Reads `topic` (a ROS name, `/rosout`) of the type `schema` defines
    /// (`rcl_interfaces/msg/Log`) with `qos`; `on_cdr` runs on a Cyclone DDS
    /// thread for each sample (CDR with its encapsulation header), so a full
    /// cache that blocks it holds back that participant's deliveries: the
    /// push-back a reliable publisher's QoS asks for. Returns a count of the
    /// samples DDS knows the reader missed (`Reader::missed`).
    pub fn subscribe(
        &mut self,
        topic: &str,
        schema: &Schema,
        qos: &EndpointQos,
        on_cdr: OnCdr,
    ) -> Result<Box<dyn Fn() -> u64>, String> {
        let participant = self.participant(topic)?;
        let raw = Arc::new(Raw {
            reader: Mutex::new(None),
            on_cdr,
            topic: topic.to_string(),
            type_hash: schema.rihs01.to_string(),
            writers: Mutex::default(),
        });
        let type_name = &schema.type_name;
        let woken = Arc::downgrade(&raw);
        let on_data = Box::new(move || {
            if let Some(raw) = woken.upgrade() {
                raw.take_all();
            }
        });
        let reader = participant
            .create_reader(&dds_topic(topic), &dds_type(type_name), qos, on_data)
            .map_err(|e| format!("{topic}: making its DDS reader: {e}"))?;
        *raw.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(reader);
        raw.take_all();
        let counted = Arc::downgrade(&raw);
        self.topics.push(raw);
        Ok(Box::new(move || counted.upgrade().map_or(0, |raw| raw.missed())))
    }

    /// A writer of `topic` of `type_name` with `qos`, for CDR as it was recorded.
    pub fn writer(&mut self, topic: &str, type_name: &str, qos: &EndpointQos) -> Result<Writer, String> {
        self.participant(topic)?
            .create_writer(&dds_topic(topic), &dds_type(type_name), qos, Box::new(|| {}))
            .map_err(|e| format!("{topic}: making its DDS writer: {e}"))
    }

    /// The participant, made with the first topic.
    fn participant(&mut self, topic: &str) -> Result<Arc<Participant>, String> {
        if let Some(p) = &self.participant {
            return Ok(p.clone());
        }
        let p = Participant::new(self.domain, &DdsConfig::default())
            .map(Arc::new)
            .map_err(|e| format!("{topic}: joining DDS domain {}: {e}", self.domain))?;
        Ok(self.participant.insert(p).clone())
    }

    /// Takes what every reader still holds (at the end of a recording); how many.
    pub fn drain(&self) -> usize {
        self.topics.iter().map(|raw| raw.take_all()).sum()
    }
}

impl Drop for RawTopics {
    fn drop(&mut self) {
        for raw in &self.topics {
            // Out of the lock before it is deleted: a callback in progress
            // may be waiting for the lock, and the deletion waits for it.
            let reader = raw.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(reader);
        }
    }
}

/// `--msg-path`, of every command that takes types outside the built-in ones.
#[derive(Debug, Clone, Args)]
pub struct MsgPaths {
    /// Where the .msg files of types outside freight's built-in ones are, laid out as a ROS 2
    /// install's share directory (DIR/<package>/msg/<Type>.msg); repeatable, searched before the
    /// share directories of AMENT_PREFIX_PATH.
    #[arg(long = "msg-path", value_name = "DIR")]
    msg_paths: Vec<PathBuf>,
}

impl MsgPaths {
    /// Where definitions of types outside the built-in ones are looked for:
    /// the directories given with `--msg-path`, then the `share/` directories
    /// of `AMENT_PREFIX_PATH`.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.msg_paths.iter().cloned().chain(freight_bag::Schema::ament_share_dirs()).collect()
    }
}

/// The type hash a ROS 2 endpoint's USER_DATA gives (`typehash=RIHS01_...;`).
fn type_hash(user_data: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(user_data).ok()?;
    text.split(';').find_map(|pair| pair.strip_prefix("typehash="))
}

/// The DDS topic of a ROS topic, as every ROS 2 middleware names it: `/rosout`
/// is `rt/rosout`.
fn dds_topic(topic: &str) -> String {
    format!("rt/{}", topic.trim_start_matches('/'))
}

/// The DDS type of a ROS type: `rcl_interfaces/msg/Log` is
/// `rcl_interfaces::msg::dds_::Log_`.
fn dds_type(type_name: &str) -> String {
    match type_name.rsplit_once('/') {
        Some((scope, name)) => format!("{}::dds_::{name}_", scope.replace('/', "::")),
        None => type_name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_those_ros2_uses_on_the_wire() {
        assert_eq!(dds_topic("/rosout"), "rt/rosout");
        assert_eq!(dds_topic("/robot/odom"), "rt/robot/odom");
        assert_eq!(dds_type("rcl_interfaces/msg/Log"), "rcl_interfaces::msg::dds_::Log_");
        assert_eq!(dds_type("nav_msgs/msg/Odometry"), "nav_msgs::msg::dds_::Odometry_");
    }

    #[test]
    fn the_type_hash_is_read_from_user_data_as_ros2_writes_it() {
        assert_eq!(type_hash(b"typehash=RIHS01_ab;"), Some("RIHS01_ab"));
        assert_eq!(type_hash(b"pid=4;typehash=RIHS01_cd;x=1;"), Some("RIHS01_cd"));
        assert_eq!(type_hash(b"pid=4;"), None);
        assert_eq!(type_hash(b"\xff\xfe"), None);
    }
}
