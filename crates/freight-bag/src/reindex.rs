//! Recovering a bag whose recorder was killed or lost power: each file cut
//! short is rewritten with every message of its complete chunks and a new
//! summary, and `metadata.yaml` is rebuilt from the files.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcap::records::{op, Record};

use crate::error::BagError;
use crate::metadata::{self, Metadata};
use crate::reader::{map, mcap_files, record_at, summarize};

/// What [`reindex`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReindexedFile {
    /// The file.
    pub path: PathBuf,
    /// Whether it had to be rewritten (it had no valid summary and footer,
    /// or a damaged chunk).
    pub rewritten: bool,
    /// Messages it holds now.
    pub messages: u64,
    /// Bytes at its end that held no complete record (lost with the crash).
    pub dropped_bytes: u64,
    /// Chunks left out because their bytes were damaged (a CRC that does not
    /// match, a compressed stream that does not decode).
    pub damaged_chunks: u64,
}

/// Makes every `.mcap` file in the bag directory `dir` readable and indexed
/// again and rewrites `dir/metadata.yaml` from them. Files that were finished
/// and whose chunks are all intact are left as they are (each is read through
/// to check); the others are rewritten with every message of their intact
/// chunks, and a rewritten file replaces the old one atomically.
///
/// ```no_run
/// for f in freight_bag::reindex("crashed_bag".as_ref()).unwrap() {
///     println!("{}: {} messages", f.path.display(), f.messages);
/// }
/// ```
pub fn reindex(dir: &Path) -> Result<Vec<ReindexedFile>, BagError> {
    let paths = mcap_files(dir)?;
    if paths.is_empty() {
        return Err(BagError::NotABag { path: dir.to_path_buf() });
    }
    // What the recorder knew: its distro name, and the QoS of each topic.
    let recorded = Metadata::read(dir).ok();
    let mut report = Vec::new();
    let mut rebuilt = Metadata {
        version: metadata::VERSION,
        storage_identifier: "mcap".into(),
        ros_distro: recorded.as_ref().map(|m| m.ros_distro.clone()).unwrap_or_else(|| "freight".into()),
        files: Vec::new(),
        topics: Vec::new(),
    };
    for path in paths {
        let intact = {
            let bytes = map(&path)?;
            // Finished (a footer and a summary) and every chunk's CRC right.
            mcap::read::footer(&bytes).is_ok()
                && matches!(mcap::Summary::read(&bytes), Ok(Some(_)))
                && mcap::MessageStream::new_with_options(&bytes, mcap::read::Options::ValidateChunkCrcs.into())
                    .is_ok_and(|mut s| s.all(|m| m.is_ok()))
        };
        let (messages, dropped_bytes, damaged_chunks) =
            if intact { (None, 0, 0) } else { rewrite(&path).map(|(m, d, c)| (Some(m), d, c))? };
        let bytes = map(&path)?;
        let (file, topics) = summarize(&path, &bytes)?;
        report.push(ReindexedFile {
            path: path.clone(),
            rewritten: !intact,
            messages: messages.unwrap_or(file.message_count),
            dropped_bytes,
            damaged_chunks,
        });
        rebuilt.files.push(file);
        for t in topics {
            match rebuilt.topics.iter_mut().find(|x| x.name == t.name) {
                Some(x) => x.message_count += t.message_count,
                None => rebuilt.topics.push(t),
            }
        }
    }
    rebuilt.write_atomic(dir)?;
    Ok(report)
}

/// Copies every message of the file's complete, intact chunks (and any
/// outside chunks) into a new file and renames it over `path`; a chunk whose
/// CRC or compression is broken is left out and counted, and the copy goes
/// on with the next. Returns (messages kept, bytes dropped at the end,
/// chunks left out).
fn rewrite(path: &Path) -> Result<(u64, u64, u64), BagError> {
    let bytes = map(path)?;
    let tmp = path.with_extension("mcap.reindex");
    let out = fs::File::create(&tmp).map_err(|e| BagError::io(&tmp, e))?;
    let options = mcap::WriteOptions::new().profile("ros2").library(concat!("freight ", env!("CARGO_PKG_VERSION")));
    let result = (|| {
        let mut w = options.create(BufWriter::new(out)).map_err(|e| BagError::mcap(&tmp, e))?;
        let mut copy = Salvage::default();
        // A file cut inside its magic has nothing to keep: it becomes an
        // empty, valid file.
        let mut rest = bytes.strip_prefix(mcap::MAGIC).unwrap_or_default();
        let mut end = if rest.is_empty() { 0 } else { mcap::MAGIC.len() };
        while let Some((op, body, after)) = record_at(rest) {
            if op == op::DATA_END || op == op::FOOTER {
                break;
            }
            if op == op::CHUNK {
                copy.chunk(body, &mut w).map_err(|e| BagError::mcap(&tmp, e))?;
            } else if let Ok(record) = mcap::parse_record(op, body) {
                copy.record(record, &mut w).map_err(|e| BagError::mcap(&tmp, e))?;
            }
            end += rest.len() - after.len();
            rest = after;
        }
        w.finish().map_err(|e| BagError::mcap(&tmp, e))?;
        let f = w.into_inner().into_inner().map_err(|e| BagError::io(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| BagError::io(&tmp, e))?;
        Ok((copy, end))
    })();
    match result {
        Ok((copy, end)) => {
            fs::rename(&tmp, path).map_err(|e| BagError::io(path, e))?;
            Ok((copy.messages, (bytes.len() - end) as u64, copy.damaged_chunks))
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The schemas and channels seen so far, and what was copied.
#[derive(Default)]
struct Salvage {
    schemas: HashMap<u16, Arc<mcap::Schema<'static>>>,
    channels: HashMap<u16, Arc<mcap::Channel<'static>>>,
    messages: u64,
    damaged_chunks: u64,
}

impl Salvage {
    /// Copies a chunk's messages if the whole chunk reads back intact (the
    /// crate checks its CRC at its end, so nothing is written before).
    fn chunk<W: std::io::Write + std::io::Seek>(
        &mut self,
        body: &[u8],
        w: &mut mcap::Writer<W>,
    ) -> Result<(), mcap::McapError> {
        let records = match mcap::parse_record(op::CHUNK, body) {
            Ok(Record::Chunk { header, data }) => mcap::read::ChunkReader::new(header, &data)
                .and_then(|r| r.map(|r| r.map(Record::into_owned)).collect::<Result<Vec<_>, _>>()),
            Ok(_) => Err(mcap::McapError::BadIndex),
            Err(e) => Err(e),
        };
        match records {
            Ok(records) => records.into_iter().try_for_each(|r| self.record(r, w)),
            Err(_) => {
                self.damaged_chunks += 1;
                Ok(())
            }
        }
    }

    /// Learns a schema or channel, or copies a message of a known channel.
    fn record<W: std::io::Write + std::io::Seek>(
        &mut self,
        record: Record<'_>,
        w: &mut mcap::Writer<W>,
    ) -> Result<(), mcap::McapError> {
        match record {
            Record::Schema { header, data } => {
                let schema = mcap::Schema {
                    id: header.id,
                    name: header.name,
                    encoding: header.encoding,
                    data: Cow::Owned(data.into_owned()),
                };
                self.schemas.insert(header.id, Arc::new(schema));
            }
            Record::Channel(c) => {
                let channel = mcap::Channel {
                    id: c.id,
                    topic: c.topic,
                    schema: self.schemas.get(&c.schema_id).cloned(),
                    message_encoding: c.message_encoding,
                    metadata: c.metadata,
                };
                self.channels.insert(c.id, Arc::new(channel));
            }
            Record::Message { header, data } => {
                // A message of a channel never defined (its chunk was
                // damaged) cannot be described in the new file.
                if let Some(channel) = self.channels.get(&header.channel_id) {
                    w.write(&mcap::Message {
                        channel: channel.clone(),
                        sequence: header.sequence,
                        log_time: header.log_time,
                        publish_time: header.publish_time,
                        data,
                    })?;
                    self.messages += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }
}
