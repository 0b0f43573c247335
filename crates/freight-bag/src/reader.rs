//! Reading a bag: a directory as `ros2 bag record` (any storage version, MCAP
//! files) or freight wrote it, or a single `.mcap` file.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::bytes::Bytes;
use crate::error::BagError;
use crate::metadata::{self, FileInfo, Metadata, TopicInfo};

/// One recorded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The topic it was recorded on.
    pub topic: String,
    /// Its type, `pkg/msg/Type` (the name of its channel's schema).
    pub type_name: String,
    /// The CDR bytes, encapsulation header first: the file's own memory
    /// where the chunk is uncompressed.
    pub data: Bytes,
    /// When it was received, ns since the epoch.
    pub log_time_ns: u64,
    /// When it was sent, ns since the epoch (0 if the recorder did not know).
    pub publish_time_ns: u64,
    /// The sequence number the recorder gave it.
    pub sequence: u32,
}

impl Message {
    /// The message as `M`. Where the chunk is uncompressed, its `Buffer`
    /// fields (an image's pixels, a cloud's points) view the file's memory
    /// rather than copy it; elements wider than a byte need the file to place
    /// them aligned, else they are copied. The type is the caller's to choose:
    /// check [`Message::type_name`] against `M::TYPE_NAME`.
    ///
    /// ```no_run
    /// use freight_msg::msgs::sensor_msgs::Image;
    ///
    /// let bag = freight_bag::Reader::open("my_bag").unwrap();
    /// for m in bag.messages() {
    ///     let m = m.unwrap();
    ///     if m.type_name == "sensor_msgs/msg/Image" {
    ///         let image: Image = m.decode().unwrap();
    ///         println!("{}x{}", image.width, image.height);
    ///     }
    /// }
    /// ```
    pub fn decode<M: freight_msg::Message>(&self) -> Result<M, freight_msg::DecodeError> {
        self.data.decode()
    }
}

/// An open bag.
///
/// ```no_run
/// let bag = freight_bag::Reader::open("my_bag").unwrap();
/// for m in bag.messages() {
///     let m = m.unwrap();
///     println!("{} {} {} bytes", m.log_time_ns, m.topic, m.data.len());
/// }
/// ```
pub struct Reader {
    dir: PathBuf,
    from_yaml: Option<Metadata>,
    files: Vec<(PathBuf, Arc<Mmap>)>,
}

impl Reader {
    /// Opens a bag directory (its `metadata.yaml`, else every `.mcap` file in
    /// it, in the order of the number at the end of their names) or one
    /// `.mcap` file.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, BagError> {
        let path = path.as_ref();
        let meta = fs::metadata(path).map_err(|e| BagError::io(path, e))?;
        let (dir, from_yaml, paths) = if meta.is_dir() {
            if path.join(metadata::FILE_NAME).exists() {
                let m = Metadata::read(path)?;
                let paths = m.files.iter().map(|f| path.join(&f.path)).collect();
                (path.to_path_buf(), Some(m), paths)
            } else {
                (path.to_path_buf(), None, mcap_files(path)?)
            }
        } else {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (dir, None, vec![path.to_path_buf()])
        };
        if paths.is_empty() {
            return Err(BagError::NotABag { path: path.to_path_buf() });
        }
        let files = paths.into_iter().map(|p| map(&p).map(|m| (p, Arc::new(m)))).collect::<Result<_, _>>()?;
        Ok(Reader { dir, from_yaml, files })
    }

    /// The bag directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files, in order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// The bag's `metadata.yaml` as written, if it has one.
    pub fn recorded_metadata(&self) -> Option<&Metadata> {
        self.from_yaml.as_ref()
    }

    /// What the files themselves say: per file its time span and count (from
    /// its MCAP summary, or by reading it through if it has none), and the
    /// topics with their counts. QoS and hashes come from channel metadata.
    pub fn scan(&self) -> Result<Metadata, BagError> {
        let mut m = Metadata {
            version: metadata::VERSION,
            storage_identifier: "mcap".into(),
            ros_distro: self.from_yaml.as_ref().map(|m| m.ros_distro.clone()).unwrap_or_default(),
            files: Vec::new(),
            topics: Vec::new(),
        };
        for (path, map) in &self.files {
            let (file, topics) = summarize(path, map)?;
            m.files.push(file);
            for t in topics {
                match m.topics.iter_mut().find(|x| x.name == t.name) {
                    Some(x) => x.message_count += t.message_count,
                    None => m.topics.push(t),
                }
            }
        }
        Ok(m)
    }

    /// Every message, file after file, each file in its own order (a
    /// recording's order: receive time). Chunks are checked against their
    /// CRCs. An error (a damaged or cut file) ends the iteration.
    pub fn messages(&self) -> Messages<'_> {
        Messages { reader: self, file: 0, source: None, failed: false }
    }
}

/// The messages of a shared [`Reader`], owning it (for bindings whose
/// iterators cannot borrow, such as Python's).
pub struct OwnedMessages {
    // Declared before `_reader` so that it is dropped first: it borrows the
    // memory maps `_reader` owns.
    inner: Messages<'static>,
    _reader: Arc<Reader>,
}

impl Iterator for OwnedMessages {
    type Item = Result<Message, BagError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl Reader {
    /// [`Reader::messages`], keeping the reader alive itself.
    ///
    /// ```no_run
    /// let bag = std::sync::Arc::new(freight_bag::Reader::open("my_bag").unwrap());
    /// let all: Vec<_> = bag.into_messages().collect();
    /// ```
    pub fn into_messages(self: Arc<Self>) -> OwnedMessages {
        // SAFETY: the reader lives in the Arc's allocation, which does not
        // move and outlives `inner` (the Arc is kept beside it and dropped
        // after it); its maps are never unmapped while it lives. `inner`
        // yields owned messages, so no reference escapes with the 'static.
        let reader: &'static Reader = unsafe { &*Arc::as_ptr(&self) };
        OwnedMessages { inner: reader.messages(), _reader: self }
    }
}

/// The messages of a [`Reader`].
///
/// A file with a summary (every file a recorder finished) is read chunk by
/// chunk from its chunk index: an uncompressed chunk's messages are ranges
/// of the mapping, found by walking its records in place (the `mcap` crate's
/// readers copy every record); a compressed chunk is decompressed by the
/// crate. A file without one (cut short) is streamed by the crate, copies
/// and all, to the first damaged record.
pub struct Messages<'a> {
    reader: &'a Reader,
    file: usize,
    source: Option<Source<'a>>,
    failed: bool,
}

enum Source<'a> {
    Stream(mcap::MessageStream<'a>),
    Chunks { summary: mcap::Summary, next: usize, pending: VecDeque<Message> },
}

impl<'a> Source<'a> {
    /// The way to read `map`: by its chunks when its summary indexes every
    /// message, else as a stream.
    fn open(map: &'a [u8]) -> Result<Source<'a>, mcap::McapError> {
        if let Ok(Some(mut summary)) = mcap::Summary::read(map) {
            let chunks = summary.chunk_indexes.len();
            // An unchunked writer's messages (no chunk, yet messages) are
            // only found by the stream.
            if summary.stats.as_ref().is_some_and(|s| {
                usize::try_from(s.chunk_count).is_ok_and(|n| n == chunks) && (chunks > 0 || s.message_count == 0)
            }) {
                summary.chunk_indexes.sort_by_key(|c| c.chunk_start_offset);
                return Ok(Source::Chunks { summary, next: 0, pending: VecDeque::new() });
            }
        }
        mcap::MessageStream::new_with_options(map, mcap::read::Options::ValidateChunkCrcs.into()).map(Source::Stream)
    }
}

impl Iterator for Messages<'_> {
    type Item = Result<Message, BagError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed {
            let (path, map) = self.reader.files.get(self.file)?;
            let source = match &mut self.source {
                Some(s) => s,
                None => match Source::open(map) {
                    Ok(s) => self.source.insert(s),
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(BagError::mcap(path, e)));
                    }
                },
            };
            let step = match source {
                Source::Stream(stream) => match stream.next() {
                    Some(Ok(m)) => return Some(Ok(from_crate(map, m))),
                    Some(Err(e)) => Err(truncation_hint(path, e)),
                    None => Ok(false),
                },
                Source::Chunks { summary, next, pending } => match pending.pop_front() {
                    Some(m) => return Some(Ok(m)),
                    None => match summary.chunk_indexes.get(*next) {
                        Some(index) => {
                            *next += 1;
                            read_chunk(path, map, summary, index, pending).map(|()| true)
                        }
                        None => Ok(false),
                    },
                },
            };
            match step {
                Ok(true) => {}
                Ok(false) => {
                    self.source = None;
                    self.file += 1;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// A [`Message`] of `channel` with `data`.
fn message(channel: &mcap::Channel<'_>, log_time_ns: u64, publish_time_ns: u64, sequence: u32, data: Bytes) -> Message {
    Message {
        topic: channel.topic.clone(),
        type_name: channel.schema.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
        data,
        log_time_ns,
        publish_time_ns,
        sequence,
    }
}

/// A message the `mcap` crate read, its bytes moved (the crate's readers
/// hand out their own copy).
fn from_crate(map: &Arc<Mmap>, m: mcap::Message<'_>) -> Message {
    let mcap::Message { channel, sequence, log_time, publish_time, data } = m;
    message(&channel, log_time, publish_time, sequence, Bytes::from_file(map, data))
}

/// Appends the messages of the chunk `index` points at to `out`.
fn read_chunk(
    path: &Path,
    map: &Arc<Mmap>,
    summary: &mcap::Summary,
    index: &mcap::records::ChunkIndex,
    out: &mut VecDeque<Message>,
) -> Result<(), BagError> {
    if !index.compression.is_empty() {
        for m in summary.stream_chunk(map, index).map_err(|e| BagError::mcap(path, e))? {
            let m = m.map_err(|e| BagError::mcap(path, e))?;
            out.push_back(from_crate(map, m));
        }
        return Ok(());
    }
    let bad = |why: String| BagError::invalid(path, format!("the chunk at byte {}: {why}", index.chunk_start_offset));
    let whole = usize::try_from(index.chunk_start_offset)
        .ok()
        .zip(usize::try_from(index.chunk_length).ok())
        .and_then(|(at, len)| map.get(at..at.checked_add(len)?))
        .ok_or_else(|| bad("its index points past the end of the file".into()))?;
    let (op, body, _) = record_at(whole).ok_or_else(|| bad("its record is cut short".into()))?;
    let records = match (op, mcap::parse_record(op, body).map_err(|e| BagError::mcap(path, e))?) {
        (mcap::records::op::CHUNK, mcap::records::Record::Chunk { header, data: Cow::Borrowed(d) }) => {
            if header.uncompressed_crc != 0 && crc32fast::hash(d) != header.uncompressed_crc {
                return Err(bad("its CRC does not match its bytes".into()));
            }
            d
        }
        _ => return Err(bad("the chunk index points at something else".into())),
    };
    let mut rest = records;
    while !rest.is_empty() {
        let (op, body, after) = record_at(rest).ok_or_else(|| bad("a record in it runs past its end".into()))?;
        rest = after;
        if op != mcap::records::op::MESSAGE {
            // Schemas and channels repeat what the summary holds.
            continue;
        }
        let (header, data) = match mcap::parse_record(op, body).map_err(|e| BagError::mcap(path, e))? {
            mcap::records::Record::Message { header, data: Cow::Borrowed(d) } => (header, d),
            _ => return Err(bad("a message record in it does not parse".into())),
        };
        let channel = summary
            .channels
            .get(&header.channel_id)
            .ok_or_else(|| BagError::mcap(path, mcap::McapError::UnknownChannel(header.sequence, header.channel_id)))?;
        let data = Bytes::from_file(map, Cow::Borrowed(data));
        out.push_back(message(channel, header.log_time, header.publish_time, header.sequence, data));
    }
    Ok(())
}

/// The record at the start of `bytes` (opcode, body) and what follows it:
/// MCAP's framing, an opcode byte and a little-endian u64 length. `None` when
/// the length runs past `bytes`.
pub(crate) fn record_at(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&op, rest) = bytes.split_first()?;
    let (len, rest) = rest.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    (len <= rest.len()).then(|| (op, &rest[..len], &rest[len..]))
}

/// An MCAP error, with the remedy when the file was cut short.
fn truncation_hint(path: &Path, e: mcap::McapError) -> BagError {
    match e {
        mcap::McapError::UnexpectedEof | mcap::McapError::UnexpectedEoc | mcap::McapError::BadMagic => {
            BagError::invalid(
                path,
                format!("{e}: the file is cut short or damaged; `freight bag reindex` recovers its complete chunks"),
            )
        }
        e => BagError::mcap(path, e),
    }
}

/// Maps a file read-only.
pub(crate) fn map(path: &Path) -> Result<Mmap, BagError> {
    let f = File::open(path).map_err(|e| BagError::io(path, e))?;
    // SAFETY: the mapping is read-only and private to this reader. A file
    // truncated by another process while mapped would fault on access; bags
    // are written once and never truncated in place (reindex replaces a file
    // by renaming a new one over it).
    unsafe { Mmap::map(&f) }.map_err(|e| BagError::io(path, e))
}

/// The `.mcap` files of `dir`, ordered by the number their names end with
/// (`run_2.mcap` before `run_10.mcap`).
pub(crate) fn mcap_files(dir: &Path) -> Result<Vec<PathBuf>, BagError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| BagError::io(dir, e))? {
        let path = entry.map_err(|e| BagError::io(dir, e))?.path();
        if path.extension().is_some_and(|x| x == "mcap") && path.is_file() {
            found.push(path);
        }
    }
    let number = |p: &PathBuf| -> u64 {
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        stem.rsplit('_').next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
    };
    found.sort_by(|a, b| number(a).cmp(&number(b)).then_with(|| a.cmp(b)));
    Ok(found)
}

/// One file's span, count and topics: from its summary section when it has
/// one, else by reading every message.
pub(crate) fn summarize(path: &Path, bytes: &[u8]) -> Result<(FileInfo, Vec<TopicInfo>), BagError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut topics: Vec<TopicInfo> = Vec::new();
    let mut file = FileInfo { path: name, ..FileInfo::default() };
    let summary = mcap::Summary::read(bytes).map_err(|e| truncation_hint(path, e))?;
    let mut add = |channel: &mcap::Channel<'_>, count: u64| match topics.iter_mut().find(|t| t.name == channel.topic) {
        Some(t) => t.message_count += count,
        None => topics.push(TopicInfo {
            name: channel.topic.clone(),
            type_name: channel.schema.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
            serialization_format: channel.message_encoding.clone(),
            offered_qos_profiles: channel.metadata.get("offered_qos_profiles").cloned().unwrap_or_default(),
            type_description_hash: channel.metadata.get("topic_type_hash").cloned().unwrap_or_default(),
            message_count: count,
        }),
    };
    match summary.as_ref().and_then(|s| s.stats.as_ref().map(|st| (s, st))) {
        Some((s, stats)) => {
            let mut channels: Vec<_> = s.channels.values().collect();
            channels.sort_by_key(|c| c.id);
            for c in channels {
                add(c, stats.channel_message_counts.get(&c.id).copied().unwrap_or(0));
            }
            file.message_count = stats.message_count;
            if stats.message_count > 0 {
                file.starting_time_ns = stats.message_start_time;
                file.duration_ns = stats.message_end_time.saturating_sub(stats.message_start_time);
            }
        }
        None => {
            let mut span: Option<(u64, u64)> = None;
            let mut per_channel: BTreeMap<u16, (std::sync::Arc<mcap::Channel<'_>>, u64)> = BTreeMap::new();
            for m in mcap::MessageStream::new_with_options(bytes, mcap::read::Options::ValidateChunkCrcs.into())
                .map_err(|e| truncation_hint(path, e))?
            {
                let m = m.map_err(|e| truncation_hint(path, e))?;
                span = Some(span.map_or((m.log_time, m.log_time), |(a, b)| (a.min(m.log_time), b.max(m.log_time))));
                per_channel.entry(m.channel.id).or_insert_with(|| (m.channel.clone(), 0)).1 += 1;
                file.message_count += 1;
            }
            for (c, n) in per_channel.values() {
                add(c, *n);
            }
            if let Some((a, b)) = span {
                file.starting_time_ns = a;
                file.duration_ns = b - a;
            }
        }
    }
    Ok((file, topics))
}
