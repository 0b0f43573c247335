//! Writing a bag: a new directory with `metadata.yaml` and `NAME_0.mcap`,
//! `NAME_1.mcap`, ..., as `ros2 bag record -s mcap` lays it out.
//!
//! Each file is an MCAP file of profile `ros2`: one schema per type
//! (`ros2msg`), one channel per topic (message encoding `cdr`, metadata
//! `offered_qos_profiles` and `topic_type_hash`), messages in chunks (indexed;
//! compressed with zstd or lz4 if asked), a summary with statistics, and a
//! `rosbag2` metadata record. Uncompressed chunks go from the caller's slice
//! into the file's block buffer (the MCAP writer writes them in place and
//! seeks back for their lengths), and from there to the disk with `O_DIRECT`,
//! bypassing the page cache (`direct.rs`, with the measurement that
//! chose it). A message of [`PASS_THROUGH_FROM`] bytes or more skips the
//! block buffer: it starts a chunk placed so that its bytes land in the file
//! at their memory's alignment, after a padding record, and goes to the disk
//! from the caller's memory.
//!
//! Crash safety: `metadata.yaml` is written when the bag is created and
//! rewritten atomically at every split and at [`Writer::finish`]; a split
//! opens the next file before it closes the last one. A file cut short (the
//! process killed, the power lost) keeps every chunk written before;
//! [`crate::reindex`] makes it whole again.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcap::records::MessageHeader;

use crate::direct::{BagFile, BLOCK};
use crate::error::BagError;
use crate::metadata::{self, FileInfo, Metadata, TopicInfo};
use crate::qos::OfferedQos;
use crate::schema::Schema;

/// A message record's bytes besides its data: opcode, length, channel,
/// sequence, log and publish time.
const MESSAGE_RECORD_OVERHEAD: u64 = 1 + 8 + 2 + 4 + 8 + 8;

/// An uncompressed chunk's record before its first message: opcode, length,
/// start and end time, uncompressed size, CRC, the empty compression name
/// (its u32 length), compressed size.
const CHUNK_RECORD_OVERHEAD: u64 = 1 + 8 + 8 + 8 + 8 + 4 + 4 + 8;

/// A private record's opcode and length.
const PRIVATE_RECORD_OVERHEAD: u64 = 1 + 8;

/// The opcode of the padding record before a message written from the
/// caller's memory: MCAP's private range (0x80 and up), which every reader
/// skips unless it knows the opcode. Its bytes are zeros.
pub(crate) const PADDING_OPCODE: u8 = 0x80;

/// Messages this large or larger go to the disk from the caller's memory
/// (uncompressed, with `O_DIRECT`), each at the start of its own chunk. The
/// padding in front (under 4 KiB) and the ended chunk cost under 0.5 % here.
pub(crate) const PASS_THROUGH_FROM: usize = 1 << 20;

/// How chunks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Not at all: bytes go to the file as they are.
    #[default]
    None,
    /// zstd (as rosbag2's MCAP `zstd_fast` preset): smaller, one copy through the compressor.
    Zstd,
    /// lz4: faster than zstd, larger files.
    Lz4,
}

/// How a bag is written.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Chunk compression.
    pub compression: Compression,
    /// Start a new file once the current one holds this many bytes.
    pub max_file_size: Option<u64>,
    /// Start a new file once the current one spans this much receive time.
    pub max_file_duration: Option<Duration>,
    /// Close a chunk once it holds this many bytes (uncompressed). A message
    /// larger than this is a chunk of its own.
    pub chunk_size: u64,
    /// Write the files with `O_DIRECT` where the file system allows it, past
    /// the page cache (the default): the kernel does not copy the bytes, and
    /// a long recording does not evict what other processes cache. `false`
    /// writes through the page cache, for a bag read again right away.
    pub direct_io: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            compression: Compression::None,
            max_file_size: None,
            max_file_duration: None,
            chunk_size: 4 << 20,
            direct_io: true,
        }
    }
}

/// A topic of the bag, as [`Writer::add_topic`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopicId(usize);

/// One message to write.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The CDR bytes, 4-byte encapsulation header first.
    pub data: &'a [u8],
    /// When it was received, ns since the epoch (MCAP `log_time`).
    pub log_time_ns: u64,
    /// When it was sent, ns since the epoch (MCAP `publish_time`).
    pub publish_time_ns: u64,
    /// The publisher's sequence number (MCAP keeps 32 bits).
    pub sequence: u32,
}

/// Writes a bag.
///
/// ```
/// use freight_bag::{OfferedQos, Record, Schema, Writer, WriterOptions};
/// let dir = freight_testkit::PrivateDir::new("freight-bag-doc");
/// let bag = dir.path().join("run");
/// let mut w = Writer::create(&bag, WriterOptions::default()).unwrap();
/// let schema = Schema::built_in("std_msgs/msg/String").unwrap();
/// let topic = w.add_topic("/chatter", schema, &[]).unwrap();
/// let cdr = [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
/// w.write(topic, &Record { data: &cdr, log_time_ns: 5, publish_time_ns: 4, sequence: 0 }).unwrap();
/// let metadata = w.finish().unwrap();
/// assert_eq!(metadata.message_count(), 1);
/// assert!(bag.join("run_0.mcap").exists() && bag.join("metadata.yaml").exists());
/// ```
pub struct Writer {
    dir: PathBuf,
    stem: String,
    options: WriterOptions,
    metadata: Metadata,
    topics: Vec<(String, Schema, String)>,
    file: Option<OpenFile>,
    /// What [`Writer::passed_through`] returns, counted by each file.
    passed_through: Arc<AtomicU64>,
}

/// The file being written.
struct OpenFile {
    path: PathBuf,
    mcap: mcap::Writer<Tracked>,
    /// The MCAP channel of each topic, by [`TopicId`].
    channels: Vec<u16>,
    /// Index into `metadata.files`.
    index: usize,
    first_log_ns: Option<u64>,
    /// The furthest position written: the file's size. (Summing what the
    /// writer wrote would count each chunk header it patches twice.)
    size: Arc<AtomicU64>,
    /// Uncompressed bytes in the chunk being written.
    open_chunk: u64,
    /// Whether large messages pass from the caller's memory to the disk:
    /// uncompressed, into a file written with `O_DIRECT`.
    pass_through: bool,
}

impl Writer {
    /// Creates the bag directory `dir` (which must not exist; its parent must)
    /// and its first file, and writes `metadata.yaml`.
    pub fn create(dir: impl AsRef<Path>, options: WriterOptions) -> Result<Writer, BagError> {
        let dir = dir.as_ref().to_path_buf();
        if let Err(e) = fs::create_dir(&dir) {
            return Err(match e.kind() {
                io::ErrorKind::AlreadyExists => BagError::Exists { path: dir },
                _ => BagError::io(&dir, e),
            });
        }
        let stem = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty() && n != "." && n != "..")
            .ok_or_else(|| BagError::invalid(&dir, "a bag directory needs a name"))?;
        let metadata = Metadata {
            version: metadata::VERSION,
            storage_identifier: "mcap".into(),
            ros_distro: std::env::var("ROS_DISTRO").unwrap_or_else(|_| "freight".into()),
            files: Vec::new(),
            topics: Vec::new(),
        };
        let mut w = Writer {
            dir,
            stem,
            options,
            metadata,
            topics: Vec::new(),
            file: None,
            passed_through: Arc::new(AtomicU64::new(0)),
        };
        w.file = Some(w.open_file()?);
        w.metadata.write_atomic(&w.dir)?;
        Ok(w)
    }

    /// Adds a topic: its name, its type's schema and the QoS its publishers
    /// offer (recorded so that a player offers the same).
    pub fn add_topic(&mut self, name: &str, schema: Schema, qos: &[OfferedQos]) -> Result<TopicId, BagError> {
        if self.topics.iter().any(|(n, _, _)| n == name) {
            return Err(BagError::DuplicateTopic { topic: name.to_string() });
        }
        let qos = OfferedQos::to_yaml(qos);
        let id = TopicId(self.topics.len());
        if let Some(f) = self.file.as_mut() {
            let channel = add_channel(f, name, &schema, &qos)?;
            f.channels.push(channel);
        }
        self.metadata.topics.push(TopicInfo {
            name: name.to_string(),
            type_name: schema.type_name.to_string(),
            serialization_format: "cdr".into(),
            offered_qos_profiles: qos.clone(),
            type_description_hash: schema.rihs01.to_string(),
            message_count: 0,
        });
        self.topics.push((name.to_string(), schema, qos));
        Ok(id)
    }

    /// Writes one message, first starting a new file if the current one is
    /// full by size or by time.
    pub fn write(&mut self, topic: TopicId, record: &Record<'_>) -> Result<(), BagError> {
        if topic.0 >= self.topics.len() {
            return Err(BagError::invalid(&self.dir, format!("topic id {} was not added to this bag", topic.0)));
        }
        if self.should_split(record.log_time_ns) {
            self.split()?;
        }
        let f = self.file.as_mut().ok_or_else(|| BagError::invalid(&self.dir, "the bag was finished"))?;
        if f.pass_through && record.data.len() >= PASS_THROUGH_FROM {
            place_for_pass_through(f, record.data)?;
        }
        let header = MessageHeader {
            channel_id: f.channels[topic.0],
            sequence: record.sequence,
            log_time: record.log_time_ns,
            publish_time: record.publish_time_ns,
        };
        f.mcap.write_to_known_channel(&header, record.data).map_err(|e| BagError::mcap(&f.path, e))?;
        // Chunks are closed here, not by the MCAP writer, so that the size of
        // the open one is known: compressed, it is not in the file yet.
        f.open_chunk += MESSAGE_RECORD_OVERHEAD + record.data.len() as u64;
        if f.open_chunk >= self.options.chunk_size {
            f.mcap.flush().map_err(|e| BagError::mcap(&f.path, e))?;
            f.open_chunk = 0;
        }
        let first = *f.first_log_ns.get_or_insert(record.log_time_ns);
        let info = &mut self.metadata.files[f.index];
        info.starting_time_ns = first.min(record.log_time_ns);
        info.duration_ns = info.duration_ns.max(record.log_time_ns.saturating_sub(info.starting_time_ns));
        info.message_count += 1;
        self.metadata.topics[topic.0].message_count += 1;
        Ok(())
    }

    /// Closes the open chunk and hands what is buffered to the operating
    /// system: if the process dies after this, a reader (after
    /// [`crate::reindex`]) finds every message written so far. Recorders call
    /// it about once a second; each call ends a chunk, so calling it after
    /// every message makes small chunks.
    pub fn flush(&mut self) -> Result<(), BagError> {
        match self.file.as_mut() {
            Some(f) => {
                f.open_chunk = 0;
                f.mcap.flush().map_err(|e| BagError::mcap(&f.path, e))
            }
            None => Ok(()),
        }
    }

    /// Starts the next file now: opens it, then finishes the current one and
    /// rewrites `metadata.yaml`.
    pub fn split(&mut self) -> Result<(), BagError> {
        let next = self.open_file()?;
        if let Some(last) = self.file.replace(next) {
            finish_file(last, &self.metadata)?;
        }
        self.metadata.write_atomic(&self.dir)
    }

    /// Finishes the last file (summary, indexes, footer), syncs it and writes
    /// the final `metadata.yaml`, which it returns.
    pub fn finish(mut self) -> Result<Metadata, BagError> {
        if let Some(last) = self.file.take() {
            let finished = finish_file(last, &self.metadata);
            // The metadata is rewritten even when the file could not be
            // finished (a full disk): its counts are what the file holds.
            self.metadata.write_atomic(&self.dir)?;
            finished?;
        }
        Ok(self.metadata.clone())
    }

    /// The metadata as it stands: files, topics, counts so far.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The bag directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file being written.
    pub fn current_file(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }

    /// Bytes in the file being written so far.
    pub fn current_file_size(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.size.load(Ordering::Relaxed))
    }

    /// Bytes of messages, in all files so far, that went to the disk straight
    /// from the caller's memory, copied by nobody (see the module docs).
    pub fn passed_through(&self) -> u64 {
        self.passed_through.load(Ordering::Relaxed)
    }

    fn should_split(&self, log_time_ns: u64) -> bool {
        let Some(f) = &self.file else { return false };
        let Some(first) = f.first_log_ns else { return false };
        // An uncompressed chunk goes to the file as it is written; a
        // compressed one only when it closes, at most its uncompressed size.
        let pending = if self.options.compression == Compression::None { 0 } else { f.open_chunk };
        let size = f.size.load(Ordering::Relaxed) + pending;
        let by_size = self.options.max_file_size.is_some_and(|max| size >= max);
        let by_time = self
            .options
            .max_file_duration
            .is_some_and(|max| u128::from(log_time_ns.saturating_sub(first)) >= max.as_nanos());
        by_size || by_time
    }

    fn open_file(&mut self) -> Result<OpenFile, BagError> {
        let index = self.metadata.files.len();
        let name = format!("{}_{index}.mcap", self.stem);
        let path = self.dir.join(&name);
        let file = BagFile::create(&path, self.options.direct_io, self.passed_through.clone())
            .map_err(|e| BagError::io(&path, e))?;
        let compression = match self.options.compression {
            Compression::None => None,
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
        };
        let options = mcap::WriteOptions::new()
            .profile("ros2")
            .library(concat!("freight ", env!("CARGO_PKG_VERSION")))
            .compression(compression)
            .chunk_size(None)
            // rosbag2's zstd_fast: level 1.
            .compression_level(1);
        let pass_through = compression.is_none() && file.is_direct();
        let size = Arc::new(AtomicU64::new(0));
        let tracked = Tracked { inner: file, pos: 0, end: size.clone() };
        let mcap = options.create(tracked).map_err(|e| BagError::mcap(&path, e))?;
        let mut f =
            OpenFile { path, mcap, channels: Vec::new(), index, first_log_ns: None, size, open_chunk: 0, pass_through };
        for (topic, schema, qos) in &self.topics {
            let channel = add_channel(&mut f, topic, schema, qos)?;
            f.channels.push(channel);
        }
        self.metadata.files.push(FileInfo { path: name, ..FileInfo::default() });
        Ok(f)
    }
}

fn add_channel(f: &mut OpenFile, topic: &str, schema: &Schema, qos: &str) -> Result<u16, BagError> {
    let schema_id = f
        .mcap
        .add_schema(&schema.type_name, "ros2msg", schema.ros2msg.as_bytes())
        .map_err(|e| BagError::mcap(&f.path, e))?;
    let metadata = BTreeMap::from([
        ("offered_qos_profiles".to_string(), qos.to_string()),
        ("topic_type_hash".to_string(), schema.rihs01.to_string()),
    ]);
    f.mcap.add_channel(schema_id, topic, "cdr", &metadata).map_err(|e| match e {
        mcap::McapError::TooManyChannels => BagError::TooManyTopics { path: f.path.clone() },
        e => BagError::mcap(&f.path, e),
    })
}

/// Places the next message so that its `data` lands in the file at the
/// offset `data`'s memory is aligned to (modulo the `O_DIRECT` block), which
/// lets the file write its whole blocks from where they are: ends the open
/// chunk, so that the message starts the next one, and writes a padding
/// record of the length that puts it there.
fn place_for_pass_through(f: &mut OpenFile, data: &[u8]) -> Result<(), BagError> {
    const ZEROS: [u8; BLOCK] = [0; BLOCK];
    if f.open_chunk > 0 {
        f.mcap.flush().map_err(|e| BagError::mcap(&f.path, e))?;
        f.open_chunk = 0;
    }
    // With no chunk open, the MCAP writer is at the end of the file.
    let lands =
        f.size.load(Ordering::Relaxed) + PRIVATE_RECORD_OVERHEAD + CHUNK_RECORD_OVERHEAD + MESSAGE_RECORD_OVERHEAD;
    let padding = (data.as_ptr() as u64).wrapping_sub(lands) % BLOCK as u64;
    f.mcap
        .write_private_record(PADDING_OPCODE, &ZEROS[..padding as usize], Default::default())
        .map_err(|e| BagError::mcap(&f.path, e))
}

/// Writes the `rosbag2` metadata record, the summary and the footer, then
/// flushes and syncs the file.
fn finish_file(mut f: OpenFile, metadata: &Metadata) -> Result<(), BagError> {
    // The record rosbag2's MCAP storage writes: the bag's metadata without its
    // outer key, as this file's reader would want it.
    let yaml = metadata.to_yaml();
    let inner: String = yaml.lines().skip(1).map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l))).collect();
    let record = mcap::records::Metadata {
        name: "rosbag2".into(),
        metadata: BTreeMap::from([
            ("serialized_metadata".to_string(), inner),
            ("ROS_DISTRO".to_string(), metadata.ros_distro.clone()),
        ]),
    };
    f.mcap.write_metadata(&record).map_err(|e| BagError::mcap(&f.path, e))?;
    f.mcap.finish().map_err(|e| BagError::mcap(&f.path, e))?;
    f.mcap.into_inner().inner.finish().map_err(|e| BagError::io(&f.path, e))
}

/// The file under the MCAP writer, keeping its position and size.
struct Tracked {
    inner: BagFile,
    pos: u64,
    end: Arc<AtomicU64>,
}

impl Write for Tracked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        self.end.fetch_max(self.pos, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Seek for Tracked {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}
