//! Process-level facts: the clock frames are stamped with (CLOCK_MONOTONIC,
//! shared by every process of a host, so a subscriber can compute one-way
//! latency) and whether a peer process is alive. They live in
//! [`freight_backend::os`], which the device pools read too.

pub use freight_backend::os::{coarse_ms, monotonic_ns};

/// Whether process `pid` exists (a zombie counts as alive until reaped).
///
/// ```
/// assert!(freight::clock::process_alive(std::process::id()));
/// ```
pub fn process_alive(pid: u32) -> bool {
    !freight_backend::os::process_gone(pid)
}
