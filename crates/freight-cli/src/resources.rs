//! What `bench soak`, `bench scale` and `bag record` measure of the system: files in
//! shared-memory directories, and a process's open fds and resident memory, from `/proc`.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Files (anything but directories) under `dir`, recursively; `None` when `dir` cannot be
/// read. Entries that vanish while it looks (a process ending) are left out.
pub fn list_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => out.extend(list_files(&entry.path()).unwrap_or_default()),
            Ok(_) => out.push(entry.path()),
            Err(_) => {}
        }
    }
    Some(out)
}

/// How many files [`list_files`] finds.
pub fn count_files(dir: &Path) -> Option<usize> {
    list_files(dir).map(|f| f.len())
}

/// Bytes in use on the file system of `dir` (for tmpfs: memory its files occupy).
pub fn used_bytes(dir: &Path) -> Option<u64> {
    freight::backend::os::space(dir).ok().map(|s| s.used)
}

/// Open file descriptors of `pid`.
pub fn fd_count(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Resident memory of a process, KiB, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// `VmRSS`: everything resident, the shared memory it touched included.
    pub rss_kib: u64,
    /// `RssAnon`: its private anonymous memory (heap, stacks).
    pub anon_kib: u64,
    /// `RssShmem`: the shared memory (and tmpfs files) it maps and touched.
    pub shmem_kib: u64,
}

/// The resident memory of `pid`.
pub fn memory(pid: u32) -> Option<Memory> {
    parse_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

fn parse_status(status: &str) -> Option<Memory> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some(Memory { rss_kib: field("VmRSS:")?, anon_kib: field("RssAnon:")?, shmem_kib: field("RssShmem:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib() {
        let status = "Name:\tfreight\nVmRSS:\t   20480 kB\nRssAnon:\t    4096 kB\nRssFile:\t 100 kB\n\
                      RssShmem:\t   16284 kB\n";
        assert_eq!(parse_status(status), Some(Memory { rss_kib: 20480, anon_kib: 4096, shmem_kib: 16284 }));
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_can_be_measured() {
        let me = std::process::id();
        assert!(fd_count(me).is_some_and(|n| n >= 3));
        assert!(memory(me).is_some_and(|m| m.rss_kib > 0));
        let dir = crate::private_dir::PrivateDir::new("freight-soak-files").expect("a private directory");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a"), b"1").unwrap();
        std::fs::write(dir.path().join("sub/b"), b"2").unwrap();
        assert_eq!(count_files(dir.path()), Some(2));
        assert_eq!(count_files(&dir.path().join("missing")), None);
        assert!(used_bytes(dir.path()).is_some());
    }
}
