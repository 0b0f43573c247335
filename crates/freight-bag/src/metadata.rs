//! `metadata.yaml`, rosbag2's description of a bag: which files, which topics,
//! how many messages, over what time.
//!
//! freight writes format **version 8** (the QoS list as one YAML string with
//! integer enums, `type_description_hash` per topic, `ros_distro`): rosbag2 on
//! Humble reads versions up to its own and ignores what it does not know,
//! Jazzy and later read 8 natively, and `rosbags` reads 1 to 9. Reading takes
//! any version: what a bag from another recorder lacks is left empty.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::error::BagError;

/// The file name rosbag2 looks for in a bag directory.
pub const FILE_NAME: &str = "metadata.yaml";

/// The format version freight writes.
pub const VERSION: u32 = 8;

/// A bag's `metadata.yaml`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// The format version (8 when freight wrote it).
    pub version: u32,
    /// The storage plugin (`mcap`).
    pub storage_identifier: String,
    /// The ROS distribution that recorded (freight writes `ROS_DISTRO` if set, else `freight`).
    pub ros_distro: String,
    /// The files, in order.
    pub files: Vec<FileInfo>,
    /// The topics, in the order they were added.
    pub topics: Vec<TopicInfo>,
}

/// One file of a bag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileInfo {
    /// Relative to the bag directory (`name_0.mcap`).
    pub path: String,
    /// The first message's receive time, ns since the epoch (0 without messages).
    pub starting_time_ns: u64,
    /// From the first message to the last, ns.
    pub duration_ns: u64,
    /// Messages in the file.
    pub message_count: u64,
}

/// One topic of a bag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicInfo {
    /// `/camera/image`.
    pub name: String,
    /// `sensor_msgs/msg/Image`.
    pub type_name: String,
    /// `cdr`.
    pub serialization_format: String,
    /// The publishers' QoS as rosbag2 writes it (see [`crate::OfferedQos`]).
    pub offered_qos_profiles: String,
    /// RIHS01 type hash (empty when unknown).
    pub type_description_hash: String,
    /// Messages recorded, all files together.
    pub message_count: u64,
}

impl Metadata {
    /// Messages in all files.
    pub fn message_count(&self) -> u64 {
        self.files.iter().map(|f| f.message_count).sum()
    }

    /// The first message's time, ns since the epoch (0 without messages).
    pub fn starting_time_ns(&self) -> u64 {
        self.files.iter().filter(|f| f.message_count > 0).map(|f| f.starting_time_ns).min().unwrap_or(0)
    }

    /// From the first message to the last, ns.
    pub fn duration_ns(&self) -> u64 {
        let end = self
            .files
            .iter()
            .filter(|f| f.message_count > 0)
            .map(|f| f.starting_time_ns.saturating_add(f.duration_ns))
            .max()
            .unwrap_or(0);
        end.saturating_sub(self.starting_time_ns())
    }

    /// The YAML text, as rosbag2 lays it out.
    pub fn to_yaml(&self) -> String {
        let mut y = String::with_capacity(1024);
        y.push_str("rosbag2_bagfile_information:\n");
        y.push_str(&format!("  version: {}\n", self.version));
        y.push_str(&format!("  storage_identifier: {}\n", quoted(&self.storage_identifier)));
        y.push_str(&format!("  duration:\n    nanoseconds: {}\n", self.duration_ns()));
        y.push_str(&format!("  starting_time:\n    nanoseconds_since_epoch: {}\n", self.starting_time_ns()));
        y.push_str(&format!("  message_count: {}\n", self.message_count()));
        if self.topics.is_empty() {
            y.push_str("  topics_with_message_count: []\n");
        } else {
            y.push_str("  topics_with_message_count:\n");
        }
        for t in &self.topics {
            y.push_str("    - topic_metadata:\n");
            y.push_str(&format!("        name: {}\n", quoted(&t.name)));
            y.push_str(&format!("        type: {}\n", quoted(&t.type_name)));
            y.push_str(&format!("        serialization_format: {}\n", quoted(&t.serialization_format)));
            y.push_str(&format!("        offered_qos_profiles: {}\n", quoted(&t.offered_qos_profiles)));
            y.push_str(&format!("        type_description_hash: {}\n", quoted(&t.type_description_hash)));
            y.push_str(&format!("      message_count: {}\n", t.message_count));
        }
        // Compression is the storage's (MCAP chunks), not rosbag2's file or message mode.
        y.push_str("  compression_format: \"\"\n  compression_mode: \"\"\n");
        if self.files.is_empty() {
            y.push_str("  relative_file_paths: []\n  files: []\n");
        } else {
            y.push_str("  relative_file_paths:\n");
            for f in &self.files {
                y.push_str(&format!("    - {}\n", quoted(&f.path)));
            }
            y.push_str("  files:\n");
        }
        for f in &self.files {
            y.push_str(&format!("    - path: {}\n", quoted(&f.path)));
            y.push_str(&format!("      starting_time:\n        nanoseconds_since_epoch: {}\n", f.starting_time_ns));
            y.push_str(&format!("      duration:\n        nanoseconds: {}\n", f.duration_ns));
            y.push_str(&format!("      message_count: {}\n", f.message_count));
        }
        y.push_str("  custom_data: ~\n");
        y.push_str(&format!("  ros_distro: {}\n", quoted(&self.ros_distro)));
        y
    }

    /// Parses a `metadata.yaml` (any version); `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Metadata, BagError> {
        let docs = YamlLoader::load_from_str(text).map_err(|e| BagError::invalid(path, format!("not YAML: {e}")))?;
        let info = docs.first().map(|d| &d["rosbag2_bagfile_information"]).unwrap_or(&Yaml::BadValue);
        if !matches!(info, Yaml::Hash(_)) {
            return Err(BagError::invalid(path, "no `rosbag2_bagfile_information` mapping"));
        }
        let count = |y: &Yaml| y.as_i64().and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
        let text = |y: &Yaml| y.as_str().unwrap_or_default().to_string();
        let mut files: Vec<FileInfo> = info["files"]
            .as_vec()
            .map(|v| {
                v.iter()
                    .map(|f| FileInfo {
                        path: text(&f["path"]),
                        starting_time_ns: count(&f["starting_time"]["nanoseconds_since_epoch"]),
                        duration_ns: count(&f["duration"]["nanoseconds"]),
                        message_count: count(&f["message_count"]),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Versions before 5 list only the paths.
        if files.is_empty() {
            for p in info["relative_file_paths"].as_vec().into_iter().flatten() {
                files.push(FileInfo { path: text(p), ..FileInfo::default() });
            }
        }
        let topics = info["topics_with_message_count"]
            .as_vec()
            .map(|v| {
                v.iter()
                    .map(|t| {
                        let m = &t["topic_metadata"];
                        // Version 9 writes the QoS list as YAML, not as a string in it.
                        let qos = match &m["offered_qos_profiles"] {
                            Yaml::String(s) => s.clone(),
                            Yaml::Array(list) => crate::OfferedQos::to_yaml(
                                &list.iter().filter_map(crate::OfferedQos::parse_one).collect::<Vec<_>>(),
                            ),
                            _ => String::new(),
                        };
                        TopicInfo {
                            name: text(&m["name"]),
                            type_name: text(&m["type"]),
                            serialization_format: text(&m["serialization_format"]),
                            offered_qos_profiles: qos,
                            type_description_hash: text(&m["type_description_hash"]),
                            message_count: count(&t["message_count"]),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        for f in &files {
            if f.path.is_empty() || Path::new(&f.path).is_absolute() || f.path.split('/').any(|c| c == "..") {
                return Err(BagError::invalid(path, format!("file path {:?} is not inside the bag", f.path)));
            }
        }
        Ok(Metadata {
            version: u32::try_from(count(&info["version"])).unwrap_or(0),
            storage_identifier: text(&info["storage_identifier"]),
            ros_distro: text(&info["ros_distro"]),
            files,
            topics,
        })
    }

    /// Reads `dir/metadata.yaml`.
    pub fn read(dir: &Path) -> Result<Metadata, BagError> {
        let path = dir.join(FILE_NAME);
        let text = fs::read_to_string(&path).map_err(|e| BagError::io(&path, e))?;
        Metadata::parse(&text, &path)
    }

    /// Writes `dir/metadata.yaml` atomically: a reader (or a crash) sees the
    /// old file or the new one whole, never half of one. The data reach the
    /// disk before the rename, and the rename before this returns.
    pub fn write_atomic(&self, dir: &Path) -> Result<(), BagError> {
        let path = dir.join(FILE_NAME);
        let tmp: PathBuf = dir.join(".metadata.yaml.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(self.to_yaml().as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            fs::File::open(dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            BagError::io(&path, e)
        })
    }
}

/// A YAML double-quoted scalar.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        Metadata {
            version: VERSION,
            storage_identifier: "mcap".into(),
            ros_distro: "freight".into(),
            files: vec![
                FileInfo { path: "b_0.mcap".into(), starting_time_ns: 1_000, duration_ns: 500, message_count: 3 },
                FileInfo { path: "b_1.mcap".into(), starting_time_ns: 2_000, duration_ns: 1_000, message_count: 2 },
            ],
            topics: vec![TopicInfo {
                name: "/cam \"front\"".into(),
                type_name: "sensor_msgs/msg/Image".into(),
                serialization_format: "cdr".into(),
                offered_qos_profiles: "- history: 3\n  depth: 0".into(),
                type_description_hash: "RIHS01_00".into(),
                message_count: 5,
            }],
        }
    }

    #[test]
    fn what_is_written_reads_back_and_totals_span_all_files() {
        let m = sample();
        let text = m.to_yaml();
        assert!(text.contains("  message_count: 5\n"), "{text}");
        assert!(text.contains("  duration:\n    nanoseconds: 2000\n"), "{text}");
        assert_eq!(Metadata::parse(&text, Path::new("m.yaml")).unwrap(), m);
    }

    #[test]
    fn paths_outside_the_bag_and_non_bags_are_refused() {
        let mut m = sample();
        m.files[1].path = "../elsewhere.mcap".into();
        let e = Metadata::parse(&m.to_yaml(), Path::new("m.yaml")).unwrap_err();
        assert!(e.to_string().contains("not inside the bag"), "{e}");
        assert!(Metadata::parse("a: 1", Path::new("m.yaml")).is_err());
        assert!(Metadata::parse(": : :\n  - [", Path::new("m.yaml")).is_err());
    }
}
