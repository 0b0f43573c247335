//! File descriptors. Each topic costs a few on the local plane (iceoryx2's
//! segments, wake-up sockets, service records), and a desktop's soft limit is
//! often 1024. Like other programs that need many descriptors, freight raises
//! the soft limit to the hard one when the first context is made, and when a
//! limit is still reached, the error names it instead of iceoryx2's
//! `InternalFailure`.

use std::sync::Once;

/// Descriptors short of the limit that count as having reached it: iceoryx2
/// opens several for one endpoint and may close some before it reports the
/// failure.
const MARGIN: usize = 16;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, once per process.
pub(crate) fn raise_soft_limit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: a valid, writable rlimit; setrlimit reads a valid one. Raising the
        // soft limit up to the hard one needs no privilege.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
                r.rlim_cur = r.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            }
        }
    });
}

/// The descriptors this process has open and its soft limit, when it is within
/// [`MARGIN`] of the limit: the reason an iceoryx2 call just failed.
pub(crate) fn exhausted() -> Option<(usize, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let in_use = match std::fs::read_dir("/proc/self/fd") {
        Ok(fds) => fds.count(),
        // Not even the listing can be opened: every descriptor is taken.
        Err(e) if e.raw_os_error() == Some(libc::EMFILE) => usize::try_from(r.rlim_cur).unwrap_or(usize::MAX),
        Err(_) => return None,
    };
    (in_use as u64 + MARGIN as u64 >= r.rlim_cur).then_some((in_use, r.rlim_cur))
}
