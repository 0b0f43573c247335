//! The `cuda` and `cuda-host` backends end to end, through freight's public
//! API, across real processes, on the simulated CUDA driver
//! (`crates/freight-backend/tests/sim_cuda/`, a test double: it runs the
//! backends' logic — descriptors, IPC open and cache, events, the release
//! thread, copies, host registration — but cannot check real stream order
//! or memory placement; a run on a real GPU remains the final check).
//!
//! `gpu_paths_run_end_to_end_on_the_simulated_driver` builds the driver and
//! runs this binary again on the scenario tests with the driver first on
//! `LD_LIBRARY_PATH` (read by the loader at process start, so every process
//! the scenario starts inherits it). A scenario test is the publisher; it
//! starts its subscribers by running this binary once more on its own name
//! with `FREIGHT_TEST_CHILD=<role>`, one per role, each a process of its own
//! (a subscriber on another device gets another `FREIGHT_SIM_CUDA_UUID`).
//! Children talk to the publisher through lines on stdout and exit when their
//! stdin closes. Without the driver's marker (`sim_cuda::EXPECTED`) the
//! scenario tests do nothing: on a plain run they are run by the test above.

#[allow(dead_code)] // the backend's tests use all of it, these not
#[path = "../../freight-backend/tests/sim_cuda/mod.rs"]
mod sim_cuda;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freight::backend::{cuda, AllocError};
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{
    BackendKind, BackendSet, Context, Limits, LoanError, Node, Publisher, PublisherOptions, QoS, SubscriptionOptions,
};

const CHILD_ENV: &str = "FREIGHT_TEST_CHILD";
/// Marks a child's lines (the test harness writes on the same stdout).
const MARK: &str = "#freight# ";
const T: Duration = Duration::from_secs(10);

/// The publisher's simulated device, and another one.
const GPU_A: &str = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a01";
const GPU_B: &str = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0";

const SCENARIOS: &[&str] = &[
    "cuda_publisher_reaches_same_device_other_device_and_cpu_subscribers",
    "cuda_host_publisher_reaches_cuda_host_and_shm_subscribers",
];

#[test]
fn gpu_paths_run_end_to_end_on_the_simulated_driver() {
    if std::env::var_os(sim_cuda::EXPECTED).is_some() || std::env::var_os(CHILD_ENV).is_some() {
        return; // a run under the driver
    }
    let Some(sim) = sim_cuda::SimDriver::build() else {
        return;
    };
    let mut args = vec!["--exact", "--nocapture", "--test-threads=1"];
    args.extend_from_slice(SCENARIOS);
    let out = sim
        .command(&std::env::current_exe().unwrap(), &args)
        .env("FREIGHT_SIM_CUDA_UUID", GPU_A)
        .env_remove(CHILD_ENV)
        .output()
        .expect("running the scenarios on the simulated driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("driver in {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", sim.dir().display());
    assert!(out.status.success(), "a scenario failed on the simulated driver: {}\n{report}", out.status);
    for name in SCENARIOS {
        assert!(stdout.contains(&format!("test {name} ... ok")), "{name} did not run and pass\n{report}");
    }
    assert!(!stderr.contains("CUDA_ERROR_INVALID_CONTEXT"), "a driver call without a current context\n{report}");
}

/// Whether this process runs a scenario under the simulated driver (and checks
/// that the driver which loaded is the simulation).
fn under_simulation() -> bool {
    if std::env::var_os(sim_cuda::EXPECTED).is_none() {
        return false;
    }
    cuda::available().expect("the simulated driver loads");
    assert_eq!(cuda::device_name(0).unwrap(), sim_cuda::DEVICE_NAME, "the driver that loaded");
    true
}

fn uuid_of(hex: &str) -> [u8; 16] {
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    u
}

/// Byte `i` of message `k`.
fn pat(k: u32, i: usize) -> u8 {
    ((i % 251) as u8).wrapping_add((k as u8).wrapping_mul(31))
}

fn message(k: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| pat(k, i)).collect()
}

/// The length of message `k`: changing sizes, across size classes, some not
/// a multiple of anything, capped at 192 KiB (the 256 KiB class).
fn len_of(k: u32) -> usize {
    const SIZES: [usize; 7] = [1, 4093, 65_536, 192 << 10, 777, 100_003, 131_072];
    SIZES[k as usize % SIZES.len()]
}

fn accepted(list: &str) -> BackendSet {
    let kinds: Vec<BackendKind> =
        list.split(',').map(|n| BackendKind::from_name(n).unwrap_or_else(|| panic!("backend {n}"))).collect();
    BackendSet::of(&kinds)
}

fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn wait_for_subscriptions(p: &Publisher<UInt8MultiArray>, n: usize) {
    assert!(
        wait_until(T, || p.subscription_count() == n),
        "the publisher sees {} subscriptions, expected {n}",
        p.subscription_count()
    );
}

fn topic(name: &str) -> String {
    format!("/cudasim_{}_{name}", std::process::id())
}

// ---------------------------------------------------------------------------
// A child process
// ---------------------------------------------------------------------------

struct Kid {
    role: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Kid {
    /// Runs `test` of this binary as `role`, with `env` (over this process's,
    /// which carries the simulated driver's).
    fn spawn(test: &str, role: &str, env: &[(&str, &str)]) -> Kid {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, role)
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawning a child");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Kid { role: role.into(), child, stdin, lines, seen: Vec::new(), stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn diagnose(&mut self) -> String {
        std::thread::sleep(Duration::from_millis(50));
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!("exited: {s}"),
            _ => "still running".into(),
        };
        format!("child {} {status}\nstdout: {:?}\nstderr:\n{}", self.role, self.seen, self.stderr())
    }

    /// The words after `prefix` on the next line that starts with it.
    fn expect(&mut self, prefix: &str) -> Vec<String> {
        let deadline = Instant::now() + T;
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    let Some(at) = line.find(MARK) else { continue };
                    if let Some(rest) = line[at + MARK.len()..].strip_prefix(prefix) {
                        return rest.split_whitespace().map(String::from).collect();
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {prefix:?} line within {T:?}; {}", self.diagnose()),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("child closed stdout before a {prefix:?} line; {}", self.diagnose())
                }
            }
        }
    }

    /// Closes stdin, waits for a clean exit, checks the driver saw no call
    /// without a current context in it.
    fn finish(mut self) {
        self.stdin = None;
        let deadline = Instant::now() + T;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                let diag = self.diagnose();
                assert!(s.success(), "child failed; {diag}");
                assert!(!diag.contains("CUDA_ERROR_INVALID_CONTEXT"), "a driver call without a context; {diag}");
                return;
            }
            assert!(Instant::now() < deadline, "child did not exit; {}", self.diagnose());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn say(line: impl AsRef<str>) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARK}{}", line.as_ref()).and_then(|_| out.flush()).unwrap();
}

fn param(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child parameter {name} missing"))
}

/// A subscriber: accepts `FREIGHT_TEST_ACCEPT`, reads every byte of each of
/// `FREIGHT_TEST_COUNT` messages, and says for each `GOT k exact
/// sample-backend buffer-backend host-addressable view ordered` (view:
/// `none`, `device:<uuid>` or `mapped:<uuid>`).
fn run_child() {
    let t = param("FREIGHT_TEST_TOPIC");
    let n = Context::new().unwrap().create_node("child").unwrap();
    let opts =
        SubscriptionOptions { accepted_backends: Some(accepted(&param("FREIGHT_TEST_ACCEPT"))), ..Default::default() };
    let sub = n.create_subscription_with_options::<UInt8MultiArray>(&t, QoS::keep_last(4), opts).unwrap();
    say("READY");
    let count: u32 = param("FREIGHT_TEST_COUNT").parse().unwrap();
    for _ in 0..count {
        let s = sub.take(T).unwrap().expect("a message in time");
        let k = s.layout.data_offset;
        let want = message(k, len_of(k));
        let raw = s.data.raw();
        // Every way to read it: the sample's own, and a copy by the storage.
        let vec = raw.to_host_vec().expect("to_host_vec");
        let mut copied = vec![0u8; raw.len_bytes()];
        if let Some(storage) = raw.storage() {
            storage.copy_to_host(&mut copied).expect("copy_to_host");
        }
        let typed = s.data.to_vec().expect("to_vec");
        let exact = vec == want && copied == want && typed == want;
        let host = s.data.as_bytes();
        let exact = exact && host.is_none_or(|h| h == want.as_slice());
        let view = match s.data.device_view() {
            None => "none".to_string(),
            Some(v) => {
                let uuid: String = v.uuid.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(v.ordinal, 0);
                assert_ne!(v.ptr, 0);
                format!("{}:{uuid}", if v.host_mapped { "mapped" } else { "device" })
            }
        };
        // Ordered on the legacy default stream, and on a stream of "its own".
        let ordered = s.data.order_on_stream(0).and_then(|()| s.data.order_on_stream(0x5eed_0000)).is_ok();
        say(format!("GOT {k} {exact} {} {} {} {view} {ordered}", s.backend(), s.data.backend(), host.is_some()));
    }
    // Stays until the publisher is done with every subscriber.
    std::io::stdin().read_to_string(&mut String::new()).unwrap();
}

fn spawn_subscribers(test: &str, t: &str, count: u32, subs: &[(&str, &str)]) -> Vec<Kid> {
    let count = count.to_string();
    let kids: Vec<Kid> = subs
        .iter()
        .map(|(accept, uuid)| {
            let env = [
                ("FREIGHT_TEST_TOPIC", t),
                ("FREIGHT_TEST_ACCEPT", *accept),
                ("FREIGHT_TEST_COUNT", count.as_str()),
                ("FREIGHT_SIM_CUDA_UUID", *uuid),
            ];
            Kid::spawn(test, &format!("sub-{accept}-{uuid}"), &env)
        })
        .collect();
    kids
}

fn is_exhausted(e: &LoanError) -> bool {
    matches!(e, LoanError::Backend(AllocError::Exhausted { .. }))
}

fn node_with_cuda_pool(capacity: usize) -> Node {
    let limits = Limits { cuda_pool_capacity: capacity, ..Default::default() };
    Context::builder().limits(limits).create().unwrap().create_node("cuda_sim_pub").unwrap()
}

// ---------------------------------------------------------------------------
// Scenarios (run under the driver by the first test)
// ---------------------------------------------------------------------------

#[test]
fn cuda_publisher_reaches_same_device_other_device_and_cpu_subscribers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return run_child();
    }
    if !under_simulation() {
        return;
    }
    let name = "cuda_publisher_reaches_same_device_other_device_and_cpu_subscribers";
    const COUNT: u32 = 42;
    const BLOCK: usize = 256 << 10; // the largest message's size class
                                    // Room for four blocks of the largest class: 42 messages of changing
                                    // sizes only pass if blocks go back to the pool.
    let n = node_with_cuda_pool(4 * BLOCK);
    let t = topic("cuda");
    let options = PublisherOptions { backend: BackendKind::Cuda, ..Default::default() };
    let p = n.create_publisher_with_options::<UInt8MultiArray>(&t, QoS::keep_last(4), options).unwrap();
    let subs = [("cuda", GPU_A), ("cpu", GPU_A), ("shm,cuda", GPU_B), ("cuda,cuda-host,shm", GPU_B)];
    let mut kids = spawn_subscribers(name, &t, COUNT, &subs);
    for k in &mut kids {
        k.expect("READY");
    }
    wait_for_subscriptions(&p, kids.len());
    let a = format!("device:{GPU_A}");
    let mapped_b = format!("mapped:{GPU_B}");
    for k in 0..COUNT {
        let len = len_of(k);
        let bytes = message(k, len);
        let mut loan = p.loan(len).unwrap_or_else(|e| panic!("loan {k} of {len} bytes: {e}"));
        assert_eq!(loan.backend(), BackendKind::Cuda);
        let view = loan.device_view(0).expect("cuda memory has a device address");
        assert!(!view.host_mapped);
        assert_eq!(view.uuid, uuid_of(GPU_A));
        assert!(loan.buffer_uninit_mut(0).is_none(), "device memory is not host-writable");
        // In two writes, the second at an offset; out of range is refused.
        let half = len / 2;
        loan.write_buffer_from_host(0, 0, &bytes[..half]).unwrap();
        loan.write_buffer_from_host(0, half, &bytes[half..]).unwrap();
        assert!(loan.write_buffer_from_host(0, len, &[0]).is_err(), "a write past the end");
        assert!(loan.write_buffer_from_host(1, 0, &[0]).is_err(), "a buffer that does not exist");
        // The legacy default stream, the per-thread one, a stream of "its own".
        loan.set_write_stream([0, 2, 0x5eed_0000][k as usize % 3]);
        // SAFETY: both writes above cover every byte.
        let mut m = unsafe { loan.assume_init() };
        m.layout.data_offset = k;
        p.publish(m).unwrap_or_else(|e| panic!("publish {k}: {e}"));
        let k = k.to_string();
        // k, exact, sample backend, buffer backend, host-addressable, view, ordered
        assert_eq!(kids[0].expect("GOT"), [&k, "true", "cuda", "cuda", "false", &a, "true"], "same device");
        assert_eq!(kids[1].expect("GOT"), [&k, "true", "cpu", "cpu", "true", "none", "true"], "cpu only");
        assert_eq!(kids[2].expect("GOT"), [&k, "true", "shm", "shm", "true", "none", "true"], "other device");
        assert_eq!(
            kids[3].expect("GOT"),
            [&k, "true", "cuda-host", "cuda-host", "true", &mapped_b, "true"],
            "other device, cuda-host accepted: the host copy mapped for its device"
        );
    }
    // Every block came back to the pool: one of each of the four largest
    // sizes at once lends again (four: the frames a publisher may lend at
    // once; the last holds go back on the readers' release threads, a
    // moment later).
    let mut last = None;
    let reusable = wait_until(Duration::from_secs(2), || {
        match [3, 6, 5, 2].map(|k| p.loan(len_of(k))).into_iter().collect::<Result<Vec<_>, _>>() {
            Ok(_) => true,
            Err(e) => {
                assert!(is_exhausted(&e), "{e}");
                last = Some(e.to_string());
                false
            }
        }
    });
    assert!(reusable, "the pool does not lend a block of each size after the run: {last:?}");
    // The same-device subscriber keeps its IPC openings of idle blocks (of
    // every size class) while it lives and imports nothing more, and those
    // blocks' memory cannot be given back (documented in device_pool/mod.rs,
    // "Opened blocks"); once it exits, all of the capacity lends again.
    let same_device = kids.remove(0);
    assert!(!same_device.stderr().contains("freight: "), "{}", same_device.stderr());
    same_device.finish();
    let mut last = None;
    let all_back =
        wait_until(Duration::from_secs(2), || match (0..4).map(|_| p.loan(BLOCK)).collect::<Result<Vec<_>, _>>() {
            Ok(_) => true,
            Err(e) => {
                assert!(is_exhausted(&e), "{e}");
                last = Some(e.to_string());
                false
            }
        });
    assert!(all_back, "the pool does not lend its whole capacity once the reader exited: {last:?}");
    // ...and no more: with three blocks lent, a block of the next class up is refused.
    let three: Vec<_> = (0..3).map(|_| p.loan(BLOCK).unwrap()).collect();
    let e = p.loan(BLOCK + 1).expect_err("a 512 KiB block with 256 KiB left");
    assert!(is_exhausted(&e), "{e}");
    drop(three);
    for k in kids {
        k.finish();
    }
}

#[test]
fn cuda_host_publisher_reaches_cuda_host_and_shm_subscribers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return run_child();
    }
    if !under_simulation() {
        return;
    }
    let name = "cuda_host_publisher_reaches_cuda_host_and_shm_subscribers";
    const COUNT: u32 = 14;
    let n = Context::new().unwrap().create_node("cuda_host_pub").unwrap();
    let t = topic("cuda_host");
    let options = PublisherOptions { backend: BackendKind::CudaHost, ..Default::default() };
    let p = n.create_publisher_with_options::<UInt8MultiArray>(&t, QoS::keep_last(4), options).unwrap();
    let subs = [("cuda-host", GPU_A), ("shm", GPU_A), ("cuda-host", GPU_B)];
    let mut kids = spawn_subscribers(name, &t, COUNT, &subs);
    for k in &mut kids {
        k.expect("READY");
    }
    wait_for_subscriptions(&p, kids.len());
    let (mapped_a, mapped_b) = (format!("mapped:{GPU_A}"), format!("mapped:{GPU_B}"));
    for k in 0..COUNT {
        let len = len_of(k);
        let bytes = message(k, len);
        let mut loan = p.loan(len).unwrap_or_else(|e| panic!("loan {k}: {e}"));
        assert_eq!(loan.backend(), BackendKind::CudaHost);
        let view = loan.device_view(0).expect("cuda-host memory is mapped for the device");
        assert!(view.host_mapped);
        assert_eq!(view.uuid, uuid_of(GPU_A));
        let m = if k % 2 == 0 {
            loan.write_from_slice(&bytes).unwrap()
        } else {
            // In place, through the host.
            let mem = loan.buffer_uninit_mut(0).expect("cuda-host memory is host memory");
            mem.iter_mut().zip(&bytes).for_each(|(m, b)| {
                m.write(*b);
            });
            loan.set_write_stream(0);
            // SAFETY: every byte was written just above.
            unsafe { loan.assume_init() }
        };
        let mut m = m;
        m.layout.data_offset = k;
        p.publish(m).unwrap_or_else(|e| panic!("publish {k}: {e}"));
        let k = k.to_string();
        assert_eq!(kids[0].expect("GOT"), [&k, "true", "cuda-host", "cuda-host", "true", &mapped_a, "true"]);
        assert_eq!(kids[1].expect("GOT"), [&k, "true", "shm", "shm", "true", "none", "true"]);
        assert_eq!(kids[2].expect("GOT"), [&k, "true", "cuda-host", "cuda-host", "true", &mapped_b, "true"]);
    }
    for k in kids {
        k.finish();
    }
}
