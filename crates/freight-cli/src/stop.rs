//! Ctrl-C and SIGTERM end the long-running commands (`freight topic pub`, `freight lab`)
//! cleanly: they set a flag the loops look at, so endpoints are dropped and namespaces
//! removed as usual. A second signal ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often sleeping loops look at the flag.
const POLL: Duration = Duration::from_millis(20);

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // An atomic store is async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    // SAFETY: `sa` is fully initialized (zeroed, then the handler and an
    // empty mask set) before sigaction reads it; the handler only stores
    // to an atomic, which is async-signal-safe. SA_RESETHAND restores the
    // default action after the first signal, so a second one terminates.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Asks the loops to stop, as a signal does.
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}

/// Whether a signal asked to stop.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Sleeps `d` unless a signal asks to stop first; false if one did.
pub fn sleep(d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if requested() {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(POLL));
    }
}
