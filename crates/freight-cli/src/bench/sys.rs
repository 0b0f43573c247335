//! Small OS helpers: CPU pinning, output, a child process run within a time limit. (The clock is `freight::clock`.)

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Which CPU each side of a row is pinned to, if any. Detected once, before any thread is
/// pinned: a pinned thread may only see its own CPU, and a child process inherits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    /// CPU of the publisher thread (and of the single `memcpy` thread).
    pub publisher: Option<usize>,
    /// CPUs of the subscriber threads or processes, used round robin; empty: not pinned.
    pub subscribers: Vec<usize>,
}

impl CpuPlan {
    /// Pins the publisher to the first allowed CPU and the subscribers round robin to the
    /// others, when there are at least two. With a single CPU pinning both sides to it would
    /// only add scheduler noise, so nothing is pinned.
    pub fn detect() -> Self {
        let cpus = allowed_cpus();
        match cpus.split_first() {
            Some((&first, rest)) if !rest.is_empty() => Self { publisher: Some(first), subscribers: rest.to_vec() },
            _ => Self::NONE,
        }
    }

    /// Nothing pinned.
    pub const NONE: Self = Self { publisher: None, subscribers: Vec::new() };

    /// The CPU of subscriber `index` (0 for a single subscriber): round robin over the CPUs
    /// after the publisher's, so with fewer CPUs than subscribers + 1 they share cores.
    pub fn subscriber(&self, index: usize) -> Option<usize> {
        (!self.subscribers.is_empty()).then(|| self.subscribers[index % self.subscribers.len()])
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

/// The lines `out` (a child's stdout) writes, read on a thread of their own.
pub fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// The last `keep` bytes `err` (a child's stderr) writes, read on a thread of their own:
/// for the message of a child that failed.
pub fn tail_of(mut err: impl std::io::Read + Send + 'static, keep: usize) -> std::sync::Arc<std::sync::Mutex<String>> {
    let tail = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = std::sync::Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut text = kept.lock().unwrap_or_else(|p| p.into_inner());
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if text.len() > keep {
                let cut = text.len() - keep;
                let cut = (cut..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
                text.drain(..cut);
            }
        }
    });
    tail
}

/// Runs `cmd` to its end within `limit`: (stdout, success, stderr). Killed at the limit.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Result<(Vec<u8>, bool, Vec<u8>), String> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| e.to_string())?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if Instant::now() > end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s", limit.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Ok((out.join().unwrap_or_default(), status.success(), err.join().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_go_round_robin_over_the_cpus_after_the_publishers() {
        let plan = CpuPlan { publisher: Some(0), subscribers: vec![1, 2, 3] };
        let cpus: Vec<Option<usize>> = (0..5).map(|i| plan.subscriber(i)).collect();
        assert_eq!(cpus, [Some(1), Some(2), Some(3), Some(1), Some(2)]);
        assert_eq!(CpuPlan::NONE.subscriber(3), None);
        let detected = CpuPlan::detect();
        assert_eq!(detected.publisher.is_some(), !detected.subscribers.is_empty());
        assert!(!detected.subscribers.contains(&detected.publisher.unwrap_or(usize::MAX)));
    }
}
