//! Reading fake-device pools from outside: which blocks are in use and who holds them.
//!
//! freight exposes a pool's usage (`Backend::stats`) only to the process that created it,
//! and a context does not hand out its backends. The holds that matter are in the pool's
//! shared-memory file, whose layout `freight-backend` documents (`device_pool/layout.rs`, layout
//! version 4): a 64-byte header (magic `FRFDPOOL`, version, record count, handle bytes `h`
//! at offset 56), then one record of 248 + `h` bytes per block: its state at offset 0 (2:
//! being written, 3: exported — in use), the count of holds at 4, and 16 reader slots of 8
//! bytes at 56 (0: empty, else bit 32 set and the reader's pid in bits 0..32). The soak only
//! reads it; a file of another version is reported, not guessed at.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What every fake-device pool file's name starts with (`freight-fakedev-<uid>-<pid>-<random>`).
const PREFIX: &str = "freight-fakedev-";
const MAGIC: &[u8; 8] = b"FRFDPOOL";
const VERSION: u32 = 4;
const HEADER_LEN: u64 = 64;
const RECORD_FIXED: u64 = 248;
const READER_SLOTS: usize = 16;
const R_READERS: usize = 56;
const STATE_WRITING: u32 = 2;
const STATE_EXPORTED: u32 = 3;
const SLOT_OCCUPIED: u64 = 1 << 32;

/// The usage of one pool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    /// The pid of the process that created it (from its name).
    pub creator: u32,
    /// Blocks being written or exported.
    pub blocks_in_use: usize,
    /// Holds recorded, summed over the blocks.
    pub holds: u64,
    /// The reader of each occupied reader slot, one entry per hold.
    pub readers: Vec<u32>,
}

/// The fake-device pool files in `dir`, with their creators' pids.
pub fn pools(dir: &Path) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(PathBuf, u32)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let creator = creator_of(&name)?;
            Some((e.path(), creator))
        })
        .collect();
    out.sort();
    out
}

/// The creator's pid in a pool file's name.
fn creator_of(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let _uid = parts.next()?;
    parts.next()?.parse().ok()
}

/// Reads the usage of the pool in `path`.
pub fn read(path: &Path) -> Result<Usage, String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let creator = creator_of(name).ok_or_else(|| format!("{}: not a fake-device pool", path.display()))?;
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut header, 0).map_err(|e| format!("{}: {e}", path.display()))?;
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if &header[..8] != MAGIC || u32_at(&header, 8) != VERSION {
        return Err(format!(
            "{}: not a fake-device pool of layout version {VERSION} (freight's pool layout changed: \
             update the soak's reader)",
            path.display()
        ));
    }
    let records = u64::from(u32_at(&header, 12));
    let record_len = RECORD_FIXED + u64::from(u32_at(&header, 56));
    let mut table = vec![0u8; (records * record_len) as usize];
    file.read_exact_at(&mut table, HEADER_LEN).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut usage = Usage { creator, ..Usage::default() };
    for record in table.chunks_exact(record_len as usize) {
        let state = u32_at(record, 0);
        if state == STATE_WRITING || state == STATE_EXPORTED {
            usage.blocks_in_use += 1;
        }
        usage.holds += u64::from(u32_at(record, 4));
        for slot in 0..READER_SLOTS {
            let at = R_READERS + 8 * slot;
            let value = u64::from_le_bytes(record[at..at + 8].try_into().unwrap_or_default());
            if value & SLOT_OCCUPIED != 0 {
                usage.readers.push(value as u32);
            }
        }
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use freight::backend::{Backend, FakeDeviceBackend};

    use super::*;

    #[test]
    fn holds_of_a_real_pool_are_read_from_its_file() {
        let pool = FakeDeviceBackend::new(1 << 20).expect("a fake-device pool");
        let path = pool.pool_path().to_path_buf();
        assert_eq!(creator_of(path.file_name().unwrap().to_str().unwrap()), Some(std::process::id()));
        assert!(pools(path.parent().unwrap()).iter().any(|(p, pid)| *p == path && *pid == std::process::id()));
        assert_eq!(read(&path).unwrap().blocks_in_use, 0);

        let me = std::process::id();
        let block = pool.allocate(4096, None).unwrap();
        assert_eq!(read(&path).unwrap().blocks_in_use, 1, "being written is in use");
        let descriptor = pool.export(block, &[me, me]).unwrap();
        let usage = read(&path).unwrap();
        assert_eq!((usage.blocks_in_use, usage.holds, usage.readers), (1, 2, vec![me, me]));
        pool.release_unimported(descriptor.as_bytes(), me).unwrap();
        pool.release_unimported(descriptor.as_bytes(), me).unwrap();
        let usage = read(&path).unwrap();
        assert_eq!((usage.blocks_in_use, usage.holds, usage.readers.len()), (0, 0, 0));
        assert_eq!(pool.stats().blocks_in_use, 0, "the pool agrees");
    }

    #[test]
    fn other_files_are_refused() {
        let dir = crate::private_dir::PrivateDir::new("freight-soak-pool").expect("a private directory");
        let path = dir.path().join(format!("{PREFIX}0-1-abc"));
        std::fs::write(&path, [0u8; 64]).unwrap();
        assert!(read(&path).unwrap_err().contains("layout version 4"));
        assert!(read(&dir.path().join("other")).is_err());
    }
}
