//! The subscriber as a child process: spawning it (parent side) and running it (child side).
//!
//! The child is the bench binary itself (`std::env::current_exe()`) started with the hidden
//! `freight bench peer` subcommand and the row as JSON. It reports to the parent with one JSON
//! object per line on its stdout ([`PeerMsg`]); anything else it prints (stderr, stray stdout
//! lines) is kept as diagnostics and shown if the row fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::args::PeerArgs;
use super::harness::subscriber_side;
use super::sys::pin_current_thread;
use super::throughput::Counts;
use super::transport::RowConfig;
use super::{find_transport, BenchError, ROW_TIMEOUT};

/// Keep at most this much of a child's diagnostics: enough for an error message and a
/// backtrace head, small enough to print.
const DIAGNOSTICS_MAX: usize = 4000;

/// A message from the subscriber side to the publisher side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PeerMsg {
    /// The subscriber end is open; the publisher may start sending.
    Ready,
    /// The row is over: every latency the subscriber recorded, warm-up included, in order.
    Samples {
        /// One-way latencies in nanoseconds.
        samples_ns: Vec<u64>,
    },
    /// The throughput row is over: what the subscriber counted after the warm-up.
    Counted(Counts),
    /// The subscriber side failed.
    Failed {
        /// What went wrong.
        what: String,
        /// What to do about it.
        fix: String,
    },
}

/// A running subscriber child process. Dropping it kills the child if it is still running,
/// so that no error path can leave a spinning process behind.
pub struct ChildPeer {
    child: Child,
    readers: Vec<JoinHandle<()>>,
    diagnostics: Arc<Mutex<String>>,
    reaped: bool,
}

impl ChildPeer {
    /// Starts subscriber number `index` of `row`, pinned to `cpu`, giving up by itself at
    /// `deadline`. Its [`PeerMsg`]s arrive on `tx`, tagged with `index`.
    pub fn spawn(
        row: &RowConfig,
        index: usize,
        capacity: usize,
        cpu: Option<usize>,
        deadline: Instant,
        tx: Sender<(usize, PeerMsg)>,
    ) -> Result<Self, BenchError> {
        let exe = std::env::current_exe().map_err(|e| {
            BenchError::new(
                format!("cannot find the freight executable to start the subscriber process: {e}"),
                "run freight from a path that still exists (was the binary rebuilt or deleted?)",
            )
        })?;
        let row_json = serde_json::to_string(row).map_err(|e| {
            BenchError::new(
                format!("cannot encode the row for the subscriber process: {e}"),
                "this is a bug; please report it",
            )
        })?;
        let timeout_ms = deadline.saturating_duration_since(Instant::now()).as_millis().to_string();
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "peer", "--row", &row_json, "--timeout-ms", &timeout_ms])
            .args(["--capacity", &capacity.to_string()]);
        if let Some(cpu) = cpu {
            cmd.args(["--cpu", &cpu.to_string()]);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| {
            BenchError::new(
                format!("cannot start the subscriber process {}: {e}", exe.display()),
                "check that the system allows starting processes (ulimit -u) and retry",
            )
        })?;

        let diagnostics = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let diag = Arc::clone(&diagnostics);
            readers.push(std::thread::spawn(move || read_messages(stdout, index, tx, &diag)));
        }
        if let Some(stderr) = child.stderr.take() {
            let diag = Arc::clone(&diagnostics);
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    append_diagnostic(&diag, &line);
                }
            }));
        }
        Ok(Self { child, readers, diagnostics, reaped: false })
    }

    /// Waits for the child to exit after it reported its samples; an unclean exit or one past
    /// `deadline` is an error.
    pub fn wait_exit(&mut self, deadline: Instant) -> Result<(), BenchError> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return if status.success() {
                        Ok(())
                    } else {
                        Err(BenchError::new(
                            format!("the subscriber process exited with {status}"),
                            "see its output; rerun the same command to check it is reproducible",
                        ))
                    };
                }
                Ok(None) if Instant::now() >= deadline => {
                    return Err(BenchError::new(
                        format!("the subscriber process did not exit within {} s", ROW_TIMEOUT.as_secs()),
                        "it was killed; retry, and report a bug if it happens again",
                    ))
                }
                // The child exits right after its last message; a short sleep is enough.
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => {
                    return Err(BenchError::new(
                        format!("cannot wait for the subscriber process: {e}"),
                        "retry; if it happens again the system is out of resources",
                    ))
                }
            }
        }
    }

    /// Kills the child if it is still running, reaps it, and returns what is known about its
    /// end: how it exited (if by itself and not cleanly) and everything it printed besides its
    /// messages.
    pub fn kill_and_collect(&mut self) -> String {
        let was_running = !self.reaped && matches!(self.child.try_wait(), Ok(None));
        if was_running {
            let _ = self.child.kill();
        }
        let status = self.child.wait();
        self.reaped = true;
        let mut report = match status {
            Ok(status) if !was_running && !status.success() => format!("{status}"),
            _ => String::new(),
        };
        // The pipes close when the child is gone, so the readers finish promptly.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        let output = self.diagnostics.lock().map(|d| d.trim().to_string()).unwrap_or_default();
        if !output.is_empty() {
            if !report.is_empty() {
                report.push_str("; ");
            }
            report.push_str("output: ");
            report.push_str(&output);
        }
        report
    }
}

impl Drop for ChildPeer {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read_messages(stdout: impl Read, index: usize, tx: Sender<(usize, PeerMsg)>, diag: &Mutex<String>) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<PeerMsg>(&line) {
            Ok(msg) => {
                if tx.send((index, msg)).is_err() {
                    break;
                }
            }
            // Something in the child printed to stdout; keep it as a diagnostic rather than
            // failing the row over it.
            Err(_) => append_diagnostic(diag, &line),
        }
    }
}

fn append_diagnostic(diag: &Mutex<String>, line: &str) {
    let Ok(mut text) = diag.lock() else { return };
    if !text.is_empty() {
        text.push_str(" | ");
    }
    text.push_str(line);
    if text.len() > DIAGNOSTICS_MAX {
        // Keep the tail: the last lines usually say what finally went wrong.
        let mut cut = text.len() - DIAGNOSTICS_MAX;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.replace_range(..cut, "...");
    }
}

/// Child side: runs the subscriber for the row in `args`, reporting on stdout. Returns whether
/// the row succeeded (the failure itself has already been reported to the parent).
pub fn run_child(args: &PeerArgs) -> bool {
    let stdout = std::io::stdout();
    let mut ok = true;
    let mut report = |msg: PeerMsg| {
        if matches!(msg, PeerMsg::Failed { .. }) {
            ok = false;
        }
        // Serializing a PeerMsg cannot fail (plain strings and integers).
        let line = serde_json::to_string(&msg).unwrap_or_default();
        let mut out = stdout.lock();
        // If the parent is gone there is nobody left to tell.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };

    let row: RowConfig = match serde_json::from_str(&args.row) {
        Ok(row) => row,
        Err(e) => {
            report(PeerMsg::Failed {
                what: format!("invalid --row for `freight bench peer`: {e}"),
                fix: "this subcommand is internal; run `freight bench latency` instead".into(),
            });
            return false;
        }
    };
    let transport = match find_transport(&row.transport) {
        Ok(t) => t,
        Err(e) => {
            report(PeerMsg::Failed { what: e.what().to_string(), fix: e.fix().to_string() });
            return false;
        }
    };
    pin_current_thread(args.cpu);
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    // If the bench process dies (SIGKILL, crash) nobody will kill us or send the stop message;
    // a changed parent pid (re-parented to init or a subreaper) is how we notice, so that a
    // spinning child does not burn a CPU until its deadline.
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    // SAFETY: as above.
    let orphaned = || unsafe { libc::getppid() } != parent;
    subscriber_side(transport.as_ref(), &row, args.capacity, deadline, &orphaned, &mut report);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_json_object_each() {
        let ready = serde_json::to_string(&PeerMsg::Ready).unwrap();
        assert_eq!(ready, r#"{"event":"ready"}"#);
        let samples = PeerMsg::Samples { samples_ns: vec![1, 2] };
        let line = serde_json::to_string(&samples).unwrap();
        assert_eq!(line, r#"{"event":"samples","samples_ns":[1,2]}"#);
        assert_eq!(serde_json::from_str::<PeerMsg>(&line).unwrap(), samples);
    }

    #[test]
    fn diagnostics_keep_the_tail() {
        let diag = Mutex::new(String::new());
        for i in 0..2000 {
            append_diagnostic(&diag, &format!("line {i}"));
        }
        let text = diag.lock().unwrap();
        assert!(text.len() <= DIAGNOSTICS_MAX + 3);
        assert!(text.ends_with("line 1999"));
        assert!(text.starts_with("..."));
    }
}
