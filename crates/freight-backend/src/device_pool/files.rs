//! Pool files on disk: where they live (`/dev/shm`), what a pool name looks
//! like and the strict check of one taken from a peer's descriptor, the
//! creation of a new file (mode 0600, under its creator's `flock`), and the
//! removal of files that dead processes left behind. Also `system`, the
//! [`AllocError::System`] the other files of the pool build when the
//! operating system or the device refuses. This file knows nothing of what
//! is inside a pool file.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions, Permissions};
use std::hash::{BuildHasher, Hasher};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::os::process_gone;
use crate::{AllocError, BackendKind};

/// Longest pool name a descriptor may carry.
pub(super) const MAX_NAME_LEN: usize = 64;

/// Directory of the pool files: `/dev/shm` where it exists, else the temporary directory.
pub(super) fn pool_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether `name` is a pool name of `prefix`:
/// `<prefix><uid>-<pid>-<16 lowercase hex digits>`. Anything else (a path
/// separator, `..`, another prefix, a longer name) is refused.
pub(super) fn valid_pool_name(prefix: &str, name: &str) -> bool {
    if name.len() > MAX_NAME_LEN {
        return false;
    }
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let decimal = |s: &str| (1..=10).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    parts.len() == 3 && decimal(parts[0]) && decimal(parts[1]) && hex(parts[2])
}

/// The uid and the creator's pid in a valid pool name of `prefix`.
pub(super) fn pool_name_ids(prefix: &str, name: &str) -> Option<(u32, u32)> {
    let mut parts = name.strip_prefix(prefix)?.split('-');
    let uid = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((uid, pid))
}

pub(super) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

pub(super) fn system(backend: BackendKind, reason: impl Into<String>) -> AllocError {
    AllocError::System { backend, reason: reason.into() }
}

/// Takes the exclusive lock of a pool file without waiting: `Ok(false)` when
/// another open file (its creator's) holds it, an error when the file system
/// has no locks.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock only acts on the descriptor, which `file` keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether `path` still names the file that `meta` describes.
fn still_names(path: &Path, meta: &std::fs::Metadata) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}

/// How long a new pool file may be without its creator's lock.
const LOCK_GRACE: Duration = Duration::from_secs(10);

/// Removes the pool files of `prefix` in `dir` that processes of this user
/// left when they died without dropping their backend: a pool name with our
/// uid, a regular file that we own, a creator (the pid in the name) that is
/// gone, and a lock that nobody holds (a creator in another pid namespace
/// holds it). Returns how many were removed. Errors only leave a file in place.
fn remove_dead_pools(prefix: &str, dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let uid = effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| valid_pool_name(prefix, n)) else {
            continue;
        };
        let Some((_, creator)) = pool_name_ids(prefix, name).filter(|&(owner, _)| owner == uid) else {
            continue;
        };
        let path = entry.path();
        // Not following a link, nor waiting on a FIFO that bears a pool name.
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path);
        let Ok(file) = opened else {
            continue;
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        // The name's pid is the creator's in its own pid namespace: in another
        // one it may name a living process here (pid 1 of a container is init),
        // so a pool whose lock is free is dead anyway once it is older than a
        // creator takes to lock it.
        let old = meta.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > LOCK_GRACE);
        // Unlink only the file that was checked, not one that replaced it since.
        if meta.file_type().is_file()
            && meta.uid() == uid
            && (old || process_gone(creator))
            && matches!(try_lock(&file), Ok(true))
            && still_names(&path, &meta)
        {
            removed += usize::from(std::fs::remove_file(&path).is_ok());
        }
    }
    removed
}

/// Creates a new pool file of `prefix`, owner read-write only, and takes its
/// lock; first removes the pool files of dead processes.
pub(super) fn create_pool_file(kind: BackendKind, prefix: &str) -> Result<(String, PathBuf, File), AllocError> {
    let dir = pool_dir();
    remove_dead_pools(prefix, &dir);
    let mut last_error = None;
    for attempt in 0u64..8 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(attempt);
        hasher
            .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let name = format!("{prefix}{}-{}-{:016x}", effective_uid(), std::process::id(), hasher.finish());
        debug_assert!(valid_pool_name(prefix, &name), "{name}");
        let path = dir.join(&name);
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path);
        match opened {
            Ok(file) => {
                // The umask may have cleared bits of 0600; set them exactly.
                if let Err(e) = file.set_permissions(Permissions::from_mode(0o600)) {
                    let _ = std::fs::remove_file(&path);
                    return Err(system(kind, format!("setting the mode of {}: {e}", path.display())));
                }
                // The lock tells `remove_dead_pools` of other processes that the
                // pool is alive (on a file system without locks, pools of dead
                // processes are never removed). Until it is taken only our pid,
                // which is alive, does: a process that sees our pid as gone (from
                // another pid namespace) may be removing the file. Then another
                // name is tried.
                let contended = matches!(try_lock(&file), Ok(false));
                if !contended && file.metadata().is_ok_and(|meta| still_names(&path, &meta)) {
                    return Ok((name, path, file));
                }
                let _ = std::fs::remove_file(&path);
                last_error = Some(std::io::Error::other("the new file was removed by another process"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(system(kind, format!("creating {}: {e}", path.display()))),
        }
    }
    Err(system(kind, format!("no unused pool name in {}: {last_error:?}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_are_checked_strictly() {
        let p = "freight-fakedev-";
        assert!(valid_pool_name(p, "freight-fakedev-1000-42-0123456789abcdef"));
        for bad in [
            "",
            "freight-fakedev-",
            "freight-fakedev-1000-42-0123456789abcde",
            "freight-fakedev-1000-42-0123456789ABCDEF",
            "freight-fakedev-1000-42-0123456789abcdef0",
            "freight-fakedev-1000/42-0123456789abcdef",
            "freight-fakedev-..-42-0123456789abcdef",
            "freight-fakedev-1000-42-0123456789abcdef/..",
            "other-1000-42-0123456789abcdef",
            "freight-cuda-1000-42-0123456789abcdef",
            "../freight-fakedev-1000-42-0123456789abcdef",
            "freight-fakedev-1000-42-13-0123456789abcdef",
            "freight-fakedev-12345678901-42-0123456789abcdef",
        ] {
            assert!(!valid_pool_name(p, bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn pools_of_dead_processes_are_removed_and_no_others() {
        let prefix = "freight-fakedev-";
        let private = freight_testkit::PrivateDir::new("freight-pool-cleanup");
        let dir = private.path().to_path_buf();
        let uid = effective_uid();
        let dead = crate::conformance::dead_pid();
        let pool = |prefix: &str, uid: u32, pid: u32, n: u64| {
            let path = dir.join(format!("{prefix}{uid}-{pid}-{n:016x}"));
            std::fs::write(&path, b"pool").unwrap();
            path
        };
        let orphan = pool(prefix, uid, dead, 1);
        let living = pool(prefix, uid, std::process::id(), 2);
        let locked = pool(prefix, uid, dead, 3); // its creator lives in another pid namespace
        let lock = File::open(&locked).unwrap();
        assert!(try_lock(&lock).unwrap());
        let foreign = pool(prefix, uid.wrapping_add(1), dead, 4);
        let other_kind = pool("freight-cuda-", uid, dead, 5);
        let other = dir.join(format!("{prefix}{uid}-{dead}-not-a-pool"));
        std::fs::write(&other, b"").unwrap();
        // Named by a pid of another namespace that is alive here (init), its
        // lock free: dead once older than a creator takes to lock its file.
        let init_new = pool(prefix, uid, 1, 6);
        let init_old = pool(prefix, uid, 1, 7);
        let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(&init_old).unwrap().set_modified(an_hour_ago).unwrap();
        assert_eq!(remove_dead_pools(prefix, &dir), 2);
        assert!(!orphan.exists(), "the pool of a dead process is still there");
        assert!(!init_old.exists(), "an old pool whose lock is free is still there");
        for kept in [&living, &locked, &foreign, &other, &other_kind, &init_new] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        drop(lock);
        assert_eq!(remove_dead_pools(prefix, &dir), 1, "the pool whose lock was given up");
        assert!(!locked.exists());
        assert_eq!(remove_dead_pools("freight-cuda-", &dir), 1, "the dead pool of the other kind");
    }
}
