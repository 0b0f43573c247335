//! Recovering a bag whose recorder was killed or lost power: each file cut
//! short is rewritten with every message of its complete chunks and a new
//! summary, and `metadata.yaml` is rebuilt from the files.

use std::fs;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::error::BagError;
use crate::metadata::{self, Metadata};
use crate::reader::{map, mcap_files, summarize};

/// What [`reindex`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReindexedFile {
    /// The file.
    pub path: PathBuf,
    /// Whether it had to be rewritten (it had no valid summary and footer).
    pub rewritten: bool,
    /// Messages it holds now.
    pub messages: u64,
    /// Bytes at its end that held no complete record (lost with the crash).
    pub dropped_bytes: u64,
}

/// Makes every `.mcap` file in the bag directory `dir` readable and indexed
/// again and rewrites `dir/metadata.yaml` from them. Files that were finished
/// are left as they are. A rewritten file replaces the old one atomically.
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
        let finished = {
            let bytes = map(&path)?;
            mcap::read::footer(&bytes).is_ok() && matches!(mcap::Summary::read(&bytes), Ok(Some(_)))
        };
        let (messages, dropped_bytes) = if finished { (None, 0) } else { rewrite(&path)? };
        let bytes = map(&path)?;
        let (file, topics) = summarize(&path, &bytes)?;
        report.push(ReindexedFile {
            path: path.clone(),
            rewritten: !finished,
            messages: messages.unwrap_or(file.message_count),
            dropped_bytes,
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

/// Copies every message up to the first incomplete record into a new file
/// and renames it over `path`. Returns (messages kept, bytes dropped).
fn rewrite(path: &Path) -> Result<(Option<u64>, u64), BagError> {
    let bytes = map(path)?;
    let tmp = path.with_extension("mcap.reindex");
    let out = fs::File::create(&tmp).map_err(|e| BagError::io(&tmp, e))?;
    let options = mcap::WriteOptions::new().profile("ros2").library(concat!("freight ", env!("CARGO_PKG_VERSION")));
    let result = (|| {
        let mut w = options.create(BufWriter::new(out)).map_err(|e| BagError::mcap(&tmp, e))?;
        let mut kept = 0u64;
        let mut end_of_kept = 0u64;
        // A file cut before its first record has nothing to keep: it becomes
        // an empty, valid file.
        if let Ok(stream) = mcap::MessageStream::new_with_options(&bytes, mcap::read::Options::IgnoreEndMagic.into()) {
            for m in stream {
                let Ok(m) = m else { break };
                w.write(&m).map_err(|e| BagError::mcap(&tmp, e))?;
                kept += 1;
            }
            end_of_kept = complete_records_end(&bytes);
        }
        w.finish().map_err(|e| BagError::mcap(&tmp, e))?;
        let f = w.into_inner().into_inner().map_err(|e| BagError::io(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| BagError::io(&tmp, e))?;
        Ok((kept, end_of_kept))
    })();
    match result {
        Ok((kept, end)) => {
            fs::rename(&tmp, path).map_err(|e| BagError::io(path, e))?;
            Ok((Some(kept), (bytes.len() as u64).saturating_sub(end)))
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Where the last complete top-level record of a (cut) MCAP file ends.
fn complete_records_end(bytes: &[u8]) -> u64 {
    let mut end = mcap::MAGIC.len() as u64;
    let Ok(records) = mcap::read::LinearReader::new_with_options(bytes, mcap::read::Options::IgnoreEndMagic.into())
    else {
        return 0;
    };
    for r in records {
        if r.is_err() {
            break;
        }
        // opcode (1) + length (8) + body; the body length is what the record
        // occupies, which the parsed record no longer says, so re-read it.
        let Some(len) = bytes.get(end as usize + 1..end as usize + 9) else { break };
        let body = u64::from_le_bytes(len.try_into().unwrap_or([0; 8]));
        end = end.saturating_add(9).saturating_add(body);
    }
    end.min(bytes.len() as u64)
}
