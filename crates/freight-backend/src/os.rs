//! The operating-system facts every part of freight reads the same way: the
//! clock shared by the processes of a host, whether a process is gone, and the
//! space of a file system (`/dev/shm` above all).

/// Nanoseconds of CLOCK_MONOTONIC: one clock for every process (and every
/// namespace) of a host, so a stamp taken in one process compares with one
/// taken in another. Read through the vDSO, no system call.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// Milliseconds of CLOCK_MONOTONIC_COARSE: a few nanoseconds to read, for
/// "is this older than 100 ms" checks on hot paths.
pub fn coarse_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `monotonic_ns`; the coarse clock exists on Linux too.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1000).saturating_add(ts.tv_nsec as u64 / 1_000_000)
}

/// Whether process `pid` (of this pid namespace) is gone: `kill(pid, 0)`
/// fails with `ESRCH`. A zombie is not gone until it is reaped; a process of
/// another user (`EPERM`) is not gone. An id no process can have (0, or one
/// beyond `pid_t`) is gone.
///
/// ```
/// assert!(!freight_backend::os::process_gone(std::process::id()));
/// assert!(freight_backend::os::process_gone(0));
/// ```
pub fn process_gone(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists
    // and that we may signal it. No memory is touched.
    let r = unsafe { libc::kill(pid, 0) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Allocates the pages of `len` bytes at `offset` of `file` (`fallocate`), so that
/// writing them through a shared mapping cannot end in `SIGBUS` on a full tmpfs: a full
/// file system is `ENOSPC` here instead. `Ok(false)` where the file system does not
/// allocate ahead (`EOPNOTSUPP`): its pages are left as they are.
///
/// ```
/// let path = std::env::temp_dir().join(format!("freight-allocate-{}", std::process::id()));
/// let file = std::fs::File::options().read(true).write(true).create(true).truncate(true).open(&path)?;
/// file.set_len(1 << 20)?;
/// freight_backend::os::allocate(&file, 0, 1 << 20)?;
/// std::fs::remove_file(&path)?;
/// # Ok::<_, std::io::Error>(())
/// ```
pub fn allocate(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: fallocate on a descriptor the caller's `File` owns; mode 0 allocates the
    // range, growing the file only if the range ends past it.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return Ok(false);
    }
    Err(err)
}

/// Bytes of a file system, as `df` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Free to an unprivileged process.
    pub free: u64,
    /// In use.
    pub used: u64,
    /// The file system's size.
    pub total: u64,
}

/// The space of the file system at `path` (`statvfs`).
///
/// ```
/// let s = freight_backend::os::space(std::path::Path::new("/"))?;
/// assert!(s.free <= s.total && s.used <= s.total);
/// # Ok::<_, std::io::Error>(())
/// ```
pub fn space(path: &std::path::Path) -> std::io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs is plain old data; all-zero is a valid value for it to overwrite.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(space_from(&st))
}

/// The space of the file system that holds `file` (`fstatvfs`).
pub fn space_of(file: &std::fs::File) -> std::io::Result<Space> {
    use std::os::fd::AsRawFd;
    // SAFETY: as in `space`.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor the caller's `File` owns and a valid, writable statvfs.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(space_from(&st))
}

fn space_from(st: &libc::statvfs) -> Space {
    // The fields' widths differ between targets (u64 on x86-64 Linux).
    #[allow(clippy::unnecessary_cast)]
    let (block, avail, free, blocks) = (st.f_frsize as u64, st.f_bavail as u64, st.f_bfree as u64, st.f_blocks as u64);
    Space {
        free: avail.saturating_mul(block),
        used: blocks.saturating_sub(free).saturating_mul(block),
        total: blocks.saturating_mul(block),
    }
}
