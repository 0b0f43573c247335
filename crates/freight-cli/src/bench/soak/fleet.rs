//! The worker processes: starting (and restarting) them, their signals, their commands and
//! the lines they report.
//!
//! Every worker is this binary's hidden `bench soak-worker`, started from the controller's
//! main thread (the workers die with it: `PR_SET_PDEATHSIG`). The `dds-sub` worker runs as
//! `unshare --mount ... sh -c '<mounts>; exec "$0" "$@"' freight ...`: `unshare` and `sh`
//! exec, so the pid the controller signals is the worker's own once it is ready. Each
//! worker's stdout is read by a thread of its own that passes parsed reports to one
//! channel; its stderr is copied to ours, prefixed with its name and incarnation.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command as Process, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use super::super::private_host::PRIVATE_SHM;
use super::protocol::{Command, Mode, Report, Role};

/// The graph's workers, by name, in the order they start: subscriptions before their
/// publishers, so that the publishers' first messages are owed to them.
pub const GRAPH: [(&str, Role); 7] = [
    ("shm-sub", Role::ShmSub),
    ("device-sub", Role::DeviceSub),
    ("dds-sub", Role::DdsSub),
    ("intra", Role::Intra),
    ("shm-pub", Role::ShmPub),
    ("device-pub", Role::DevicePub),
    ("dds-pub", Role::DdsPub),
];

/// How long a SIGKILLed worker may take to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(5);

/// Where a worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Started, not ready yet.
    Starting,
    /// Ready, neither stopped nor killed.
    Running,
    /// SIGSTOPped until then.
    Stopped {
        /// When it gets SIGCONT.
        until: Instant,
    },
    /// Not running: killed by the controller, crashed, or exited; restarted then, if ever.
    Down {
        /// When to start the next incarnation.
        restart_at: Option<Instant>,
    },
}

/// One worker slot: a name and a role, and the process of its current incarnation.
#[derive(Debug)]
pub struct Worker {
    /// Its name (`shm-witness-1`).
    pub name: String,
    /// What it does.
    pub role: Role,
    /// Never killed, only stopped: its fds and memory are compared from the warm-up to
    /// the end, across every restart of its peers.
    pub witness: bool,
    /// Restarts so far; the current process's incarnation.
    pub incarnation: u32,
    /// Where it is.
    pub state: State,
    /// When the current incarnation was started.
    pub spawned_at: Instant,
    /// When the controller last heard from it (or continued it).
    pub last_heard: Instant,
    /// When the controller last continued it after a SIGSTOP.
    pub continued_at: Option<Instant>,
    /// It reported `finished`.
    pub finished: bool,
    /// Its stall was reported (once per incarnation).
    pub stall_reported: bool,
    /// Whether any incarnation was started: the next one is a restart.
    started: bool,
    process: Option<Proc>,
}

#[derive(Debug)]
struct Proc {
    child: Child,
    stdin: ChildStdin,
    pid: u32,
}

impl Worker {
    /// The process id of the current incarnation, while it has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.pid)
    }

    /// `name#incarnation`.
    pub fn label(&self) -> String {
        format!("{}#{}", self.name, self.incarnation)
    }
}

/// What a worker's stdout said.
#[derive(Debug)]
pub enum Line {
    /// A report.
    Report(Report),
    /// A line that is not one.
    Unreadable(String),
}

/// A line from a worker incarnation.
#[derive(Debug)]
pub struct Event {
    /// The worker's slot.
    pub slot: usize,
    /// Its incarnation then.
    pub incarnation: u32,
    /// What it said.
    pub line: Line,
}

/// The workers of a soak.
pub struct Fleet {
    exe: PathBuf,
    seed: u64,
    /// Every slot.
    pub workers: Vec<Worker>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
}

impl Fleet {
    /// The graph, and `extra` more shared-memory subscribers, witnesses; nothing started.
    pub fn new(exe: PathBuf, seed: u64, extra: usize) -> Fleet {
        let now = Instant::now();
        let slot = |name: String, role, witness| Worker {
            name,
            role,
            witness,
            incarnation: 0,
            state: State::Down { restart_at: None },
            spawned_at: now,
            last_heard: now,
            continued_at: None,
            finished: false,
            stall_reported: false,
            started: false,
            process: None,
        };
        let mut workers: Vec<Worker> = Vec::new();
        for (i, (name, role)) in GRAPH.iter().enumerate() {
            workers.push(slot(name.to_string(), *role, false));
            if i == 0 {
                // Extra subscribers start with the first: before the publishers.
                workers.extend((0..extra).map(|k| slot(format!("shm-witness-{}", k + 1), Role::ShmSub, true)));
            }
        }
        let (tx, rx) = mpsc::channel();
        Fleet { exe, seed, workers, tx, rx }
    }

    /// Starts the next incarnation of `slot` (the first: incarnation 0), publishing in `mode`.
    pub fn spawn(&mut self, slot: usize, mode: Mode) -> Result<(), String> {
        let w = &mut self.workers[slot];
        if w.process.is_some() {
            return Err(format!("{} is still running", w.label()));
        }
        if w.started {
            w.incarnation += 1;
        }
        let mut cmd = if w.role.remote() {
            let mut c = Process::new("unshare");
            c.args(["--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM]).arg(&self.exe);
            c
        } else {
            Process::new(&self.exe)
        };
        cmd.args(["bench", "soak-worker", "--role", w.role.as_str(), "--name", &w.name])
            .args(["--incarnation", &w.incarnation.to_string(), "--seed", &self.seed.to_string()])
            .args(["--mode", if mode == Mode::Chaos { "chaos" } else { "steady" }])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", w.name))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{}: no pipes to the worker", w.name));
        };
        let (tx, incarnation) = (self.tx.clone(), w.incarnation);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let line = match serde_json::from_str::<Report>(&line) {
                    Ok(r) => Line::Report(r),
                    Err(_) => Line::Unreadable(line),
                };
                if tx.send(Event { slot, incarnation, line }).is_err() {
                    break;
                }
            }
        });
        let label = w.label();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{label}] {line}");
            }
        });
        let now = Instant::now();
        w.process = Some(Proc { pid: child.id(), child, stdin });
        w.started = true;
        w.state = State::Starting;
        w.spawned_at = now;
        w.last_heard = now;
        w.finished = false;
        w.stall_reported = false;
        Ok(())
    }

    /// The next line of any worker, waiting up to `timeout`.
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Sends `signal` to the current incarnation of `slot`; false when it has none.
    pub fn signal(&self, slot: usize, signal: libc::c_int) -> bool {
        match self.workers[slot].pid() {
            // SAFETY: kill(2) has no memory effects. The pid is a child not yet reaped, so it
            // cannot have been reused by another process.
            Some(pid) => unsafe { libc::kill(pid as libc::pid_t, signal) == 0 },
            None => false,
        }
    }

    /// SIGKILLs the current incarnation of `slot` and reaps it.
    pub fn kill(&mut self, slot: usize) -> Result<(), String> {
        self.signal(slot, libc::SIGKILL);
        let w = &mut self.workers[slot];
        let Some(mut p) = w.process.take() else { return Ok(()) };
        let end = Instant::now() + REAP_LIMIT;
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    return Err(format!("{} was not reaped {} s after SIGKILL", w.label(), REAP_LIMIT.as_secs()))
                }
                Err(e) => return Err(format!("waiting for {}: {e}", w.label())),
            }
        }
    }

    /// Sends a command to the current incarnation of `slot`; false when it cannot be written
    /// (the worker is gone).
    pub fn send(&mut self, slot: usize, command: Command) -> bool {
        match &mut self.workers[slot].process {
            Some(p) => writeln!(p.stdin, "{}", command.line()).and_then(|()| p.stdin.flush()).is_ok(),
            None => false,
        }
    }

    /// Workers whose process ended since the last call, with how.
    pub fn reap(&mut self) -> Vec<(usize, ExitStatus)> {
        let mut ended = Vec::new();
        for (slot, w) in self.workers.iter_mut().enumerate() {
            let Some(p) = &mut w.process else { continue };
            if let Ok(Some(status)) = p.child.try_wait() {
                w.process = None;
                ended.push((slot, status));
            }
        }
        ended
    }
}

impl Drop for Fleet {
    /// No worker outlives the soak, whatever ended it.
    fn drop(&mut self) {
        for slot in 0..self.workers.len() {
            // Continued first: a stopped process dies of SIGKILL as well, but says so sooner.
            self.signal(slot, libc::SIGCONT);
            let _ = self.kill(slot);
        }
    }
}
