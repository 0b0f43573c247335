//! Private temporary directories for the scripts the lab and `bench ros2` write and then
//! execute, as root.
//!
//! A predictable path (`/tmp/freight-lab-<pid>`) can be made in advance by another user, who
//! then owns what root executes from it. [`PrivateDir::new`] uses `mkdtemp(3)`: a random name,
//! created by this call (never one that existed), mode 0700.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A directory of this user's only under the temporary directory, removed with its contents
/// when dropped.
#[derive(Debug)]
pub struct PrivateDir(PathBuf);

impl PrivateDir {
    /// Makes `$TMPDIR/<prefix>-XXXXXX` (or under `/tmp`).
    pub fn new(prefix: &str) -> std::io::Result<PrivateDir> {
        let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
        let mut bytes = template.as_os_str().as_bytes().to_vec();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated, writable template that mkdtemp fills in place.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        bytes.pop();
        Ok(PrivateDir(PathBuf::from(OsString::from_vec(bytes))))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn each_is_new_private_and_removed() {
        let a = PrivateDir::new("freight-private-test").unwrap();
        let b = PrivateDir::new("freight-private-test").unwrap();
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(a.path().join("x"), b"1").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }
}
