//! Small OS helpers: CPU pinning, output. (The clock is `freight::clock`.)

use std::io::Write;

/// The CPUs this process may run on, in ascending order (what `nproc` counts).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is a plain bit set for which all-zero is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: we pass the size of the set we own; pid 0 means the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_ISSET stays inside the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Which CPU each side of a row is pinned to, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPlan {
    /// CPU of the publisher thread (and of the single `memcpy` thread).
    pub publisher: Option<usize>,
    /// CPU of the subscriber thread or process.
    pub subscriber: Option<usize>,
}

impl CpuPlan {
    /// Pins the publisher to the first allowed CPU and the subscriber to the second, when
    /// there are at least two. With a single CPU pinning both sides to it would only add
    /// scheduler noise, so nothing is pinned.
    pub fn detect() -> Self {
        let cpus = allowed_cpus();
        if cpus.len() >= 2 {
            Self { publisher: Some(cpus[0]), subscriber: Some(cpus[1]) }
        } else {
            Self { publisher: None, subscriber: None }
        }
    }
}

/// Pins the calling thread to `cpu`. Failure (e.g. a cpuset that forbids it) is ignored on
/// purpose: the measurement is still valid, just noisier.
pub fn pin_current_thread(cpu: Option<usize>) {
    let Some(cpu) = cpu else { return };
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: all-zero is an empty cpu_set_t; `cpu` is in range (checked above); pid 0 is the
    // calling thread, and the set we pass is the size we say it is.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// iceoryx2 logs at info level by default; its lines would interleave with the table and, in
/// the peer process, with the result channel's diagnostics. Warnings and errors still show.
pub fn quiet_iceoryx2_logs() {
    iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Warn);
}

/// Prints to stdout, ignoring a closed pipe (`freight bench latency | head` must not panic).
pub fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
