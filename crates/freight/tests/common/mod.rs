//! Children of a test binary: the binary re-run on one test's name in a
//! role its environment names, reporting on stdout in lines that start with
//! a mark (the test harness writes on the same stdout), and ending when its
//! stdin closes.
// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// How long a peer has to say what a test waits for.
const T: Duration = Duration::from_secs(10);

/// A child process whose marked stdout lines arrive on a channel; dropping it
/// closes its stdin, then kills it if it has not ended within 2 s.
pub struct Peer {
    child: Child,
    lines: Receiver<String>,
}

impl Peer {
    /// This test binary on `test`, with `envs` (its role among them) set;
    /// `mounts`, a shell script ending in `exec "$0" "$@"`, runs first in a
    /// mount namespace of its own (another "host"). Only lines that hold
    /// `mark` come through, from after it.
    pub fn spawn(test: &str, envs: &[(&str, String)], mounts: Option<&str>, mark: &'static str) -> Peer {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = match mounts {
            Some(script) => {
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "sh", "-c", script]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]);
        cmd.envs(envs.iter().map(|(k, v)| (k, v)));
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn peer");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some((_, l)) = line.split_once(mark) {
                    if tx.send(l.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        Peer { child, lines }
    }

    /// The next line that starts with `prefix` (others are passed over);
    /// fails the test when none comes in time.
    pub fn expect(&self, prefix: &str) -> String {
        let deadline = Instant::now() + T;
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => continue,
                Err(_) => panic!("peer never printed a line starting with {prefix:?}"),
            }
        }
    }

    /// Fails the test if the peer said more than it was expected to.
    pub fn expect_nothing_more(&self) {
        if let Ok(line) = self.lines.try_recv() {
            panic!("peer said {line:?}");
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Ends the peer at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }
}

/// In a child: a channel that receives once the parent closes its stdin.
pub fn stdin_closed() -> Receiver<()> {
    let (tx, done) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = tx.send(());
    });
    done
}
