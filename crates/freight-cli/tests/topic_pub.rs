//! `freight topic pub` as a child process, received by a subscription in this
//! test process (or by `freight topic echo` as a second child).
//!
//! Every child is killed and reaped when its test ends, however it ends, and
//! every wait has a deadline. DDS stays on loopback: this process uses
//! `DdsConfig::loopback()`, the children `CYCLONEDDS_URI` pointing at the same file.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use freight::msgs::builtin_interfaces::Time;
use freight::msgs::sensor_msgs::Image;
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Context, DdsConfig, Message, Node, QoS, Subscription, Transport};
use freight_testkit::{skip, Lack};

/// The domain of these tests (topic.rs uses 77 and 78).
const DOMAIN: &str = "79";
/// Deadline of a wait that should succeed.
const T: Duration = Duration::from_secs(20);
/// `--keep-alive` where this process must take the last message: messages
/// not taken when the publisher goes are lost, so the child waits for us.
const KEEP_ALIVE: &str = "3";

const LOOPBACK: &str = concat!("file://", env!("CARGO_MANIFEST_DIR"), "/../freight-dds/loopback.xml");

/// Data byte `i` of message `k`, as `freight topic pub` writes it.
fn pattern(k: u64, i: usize) -> u8 {
    ((k + i as u64) % 251) as u8
}

fn assert_pattern(k: u64, bytes: &[u8]) {
    if let Some(i) = (0..bytes.len()).find(|&i| bytes[i] != pattern(k, i)) {
        panic!("message {k}: byte {i} is {}, expected {}", bytes[i], pattern(k, i));
    }
}

/// A topic no other test (or earlier run) uses.
fn topic(name: &str) -> String {
    format!("/pub_test_{}/{name}", std::process::id())
}

fn node(name: &str) -> Node {
    let domain = DOMAIN.parse().unwrap();
    let ctx = Context::builder().domain_id(domain).dds_config(DdsConfig::loopback()).create().unwrap();
    ctx.create_node(name).unwrap()
}

/// A `freight` child whose stdout lines arrive on a channel; killed and
/// reaped on drop.
struct Freight {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Freight {
    fn spawn(args: &[&str]) -> Self {
        Self::spawn_command(Command::new(env!("CARGO_BIN_EXE_freight")), args)
    }

    fn spawn_command(mut cmd: Command, args: &[&str]) -> Self {
        let mut child = cmd
            .args(args)
            .env("CYCLONEDDS_URI", LOOPBACK)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run freight");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Freight { child, lines, seen: Vec::new() }
    }

    /// Waits for a stdout line starting with `prefix`.
    fn expect_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!("no line `{prefix}...` within {timeout:?}; stdout so far: {:?}", self.seen),
            }
        }
    }

    /// Waits for the exit; returns success, every stdout line, stderr.
    fn finish(mut self, timeout: Duration) -> (bool, Vec<String>, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for freight") {
                break status;
            }
            assert!(Instant::now() < deadline, "freight did not exit within {timeout:?}; stdout: {:?}", self.seen);
            std::thread::sleep(Duration::from_millis(10));
        };
        // The reader thread ends at EOF, which the exit brought.
        self.seen.extend(self.lines.iter());
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        (status.success(), std::mem::take(&mut self.seen), stderr)
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child, which is not reaped before drop.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, sig) }, 0);
    }
}

impl Drop for Freight {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Takes `n` (at most 16, what a subscription may hold) messages, each within `T`.
fn take_n<M: Message>(sub: &Subscription<M>, n: usize) -> Vec<freight::Sample<M>> {
    (0..n)
        .map(|i| sub.take(T).expect("take").unwrap_or_else(|| panic!("message {i} of {n} did not arrive within {T:?}")))
        .collect()
}

#[test]
fn pub_sends_numbered_patterned_arrays_to_a_subscription_in_another_process() {
    let t = topic("array");
    let n = node("array_sub");
    let sub = n.create_subscription::<UInt8MultiArray>(&t, QoS::default()).unwrap();
    let size = 100 << 10;
    let args = ["topic", "pub", &t, "std_msgs/msg/UInt8MultiArray", "--size", "100KiB", "--rate", "10"];
    let publisher = Freight::spawn(
        &[&args[..], &["--count", "8", "--spin-time", "0", "--keep-alive", KEEP_ALIVE, "--domain", DOMAIN]].concat(),
    );
    for (k, s) in take_n(&sub, 8).iter().enumerate() {
        let k = k as u64;
        assert_eq!(s.layout.data_offset as u64, k, "messages arrive in order, numbered");
        assert_eq!(s.info().transport, Transport::Shm);
        let bytes = s.data.as_bytes().expect("host bytes");
        assert_eq!(bytes.len(), size);
        assert_pattern(k, bytes);
    }
    let (ok, out, err) = publisher.finish(T);
    assert!(ok, "{err}");
    let expected: Vec<String> = (0..8).map(|k| format!("published {k} {size} bytes")).collect();
    assert_eq!(out, expected, "one line per message at 10 Hz");
    assert!(sub.take(Duration::from_millis(200)).unwrap().is_none(), "--count 8 sends 8");
}

#[test]
fn pub_waits_for_subscribers_then_sends_images_from_the_first() {
    let t = topic("image");
    let mut publisher = Freight::spawn(&[
        "topic",
        "pub",
        &t,
        "sensor_msgs/Image",
        "--width",
        "64",
        "--height",
        "48",
        "--rate",
        "20",
        "--count",
        "3",
        "--wait-for-subscribers",
        "1",
        "--keep-alive",
        KEEP_ALIVE,
        "--spin-time",
        "0",
        "--domain",
        DOMAIN,
    ]);
    let waiting = publisher.expect_line("waiting", T);
    assert_eq!(waiting, format!("waiting for 1 subscription(s) on {t}: 0 matched"));
    // Nothing is sent while it waits.
    std::thread::sleep(Duration::from_millis(300));
    assert!(publisher.lines.try_recv().is_err(), "a line after `waiting` before any subscription");
    let before = Time::now();
    let n = node("image_sub");
    let sub = n.create_subscription::<Image>(&t, QoS::default()).unwrap();
    for (k, s) in take_n(&sub, 3).iter().enumerate() {
        assert_eq!((s.width, s.height, s.step, s.encoding.as_str()), (64, 48, 256, "bgra8"));
        assert_eq!(s.header.frame_id, "freight");
        let stamp = (s.header.stamp.sec, s.header.stamp.nanosec);
        assert!(stamp >= (before.sec, before.nanosec) && s.header.stamp.sec <= Time::now().sec, "{stamp:?}");
        assert_pattern(k as u64, s.data.as_bytes().expect("host bytes"));
    }
    let (ok, out, err) = publisher.finish(T);
    assert!(ok, "{err}");
    // Above 10 Hz: per-second lines; the last message always gets one.
    let last = out.last().expect("a line");
    assert!(last.starts_with("published 2 12288 bytes (") && last.ends_with(" Hz)"), "{out:?}");
}

#[test]
fn echo_prints_what_pub_sends() {
    let t = topic("echoed");
    let mut publisher = Freight::spawn(&[
        "topic",
        "pub",
        &t,
        "std_msgs/UInt8MultiArray",
        "--size",
        "1KB",
        "--rate",
        "20",
        "--count",
        "3",
        "--wait-for-subscribers",
        "1",
        "--keep-alive",
        KEEP_ALIVE,
        "--spin-time",
        "0",
        "--domain",
        DOMAIN,
    ]);
    publisher.expect_line("waiting", T);
    // echo subscribes best effort with depth 5: all 3 fit in its queue.
    let echo = Freight::spawn(&[
        "topic",
        "echo",
        &t,
        "--count",
        "3",
        "--duration",
        "20",
        "--spin-time",
        "0",
        "--domain",
        DOMAIN,
    ]);
    let (ok, out, err) = echo.finish(T);
    assert!(ok, "{err}");
    let out = out.join("\n");
    // YAML as `ros2 topic echo` prints it: 1000 bytes are cut at 128, with the length said.
    for k in 0..3 {
        assert!(out.lines().any(|l| l == format!("  data_offset: {k}")), "{out}");
    }
    assert_eq!(out.matches("data:  # 1000 elements (uint8) in").count(), 3, "{out}");
    let (ok, _, err) = publisher.finish(T);
    assert!(ok, "{err}");
}

#[test]
fn ctrl_c_and_sigterm_end_pub_cleanly() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let t = topic(&format!("signal_{sig}"));
        let n = node(&format!("signal_sub_{sig}"));
        let sub = n.create_subscription::<UInt8MultiArray>(&t, QoS::sensor_data()).unwrap();
        let mut publisher = Freight::spawn(&[
            "topic",
            "pub",
            &t,
            "std_msgs/msg/UInt8MultiArray",
            "--size",
            "4KiB",
            "--rate",
            "200",
            "--qos",
            "sensor",
            "--spin-time",
            "0",
            "--domain",
            DOMAIN,
        ]);
        // Best effort: some may be missed, but whatever arrives is whole and right.
        for _ in 0..20 {
            // One at a time: a subscription holds at most 16 samples.
            let s = sub.take(T).expect("take").expect("a message within T");
            assert_pattern(u64::from(s.layout.data_offset), s.data.as_bytes().expect("host bytes"));
        }
        publisher.expect_line("published", T);
        publisher.signal(sig);
        let (ok, out, err) = publisher.finish(Duration::from_secs(5));
        assert!(ok, "signal {sig} is a clean exit: {err}");
        let last = out.last().expect("a line");
        let k: u64 = last.split(' ').nth(1).and_then(|k| k.parse().ok()).unwrap_or_else(|| panic!("{out:?}"));
        assert!(k >= 19 && last.starts_with(&format!("published {k} 4096 bytes (")), "{out:?}");
    }
}

#[test]
fn pub_sends_the_message_its_yaml_values_set_of_any_built_in_type() {
    let t = topic("values");
    let n = node("values_sub");
    let sub = n.create_subscription::<freight::msgs::sensor_msgs::Imu>(&t, QoS::default()).unwrap();
    let values = "{header: {frame_id: imu_link, stamp: {sec: 7}}, linear_acceleration: {z: 9.81}, \
                  orientation_covariance: [1, 0, 0, 0, 1, 0, 0, 0, 1]}";
    let args = ["topic", "pub", &t, "sensor_msgs/Imu", values, "--rate", "10", "--count", "3"];
    let publisher =
        Freight::spawn(&[&args[..], &["--spin-time", "0", "--keep-alive", KEEP_ALIVE, "--domain", DOMAIN]].concat());
    for s in take_n(&sub, 3) {
        assert_eq!((s.header.frame_id.as_str(), s.header.stamp.sec), ("imu_link", 7));
        assert_eq!(s.linear_acceleration.z, 9.81);
        assert_eq!(s.orientation_covariance[4], 1.0);
        // Fields not named keep their defaults: the identity rotation.
        assert_eq!(s.orientation.w, 1.0);
    }
    let (ok, out, err) = publisher.finish(T);
    assert!(ok, "{err}");
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out[0].starts_with("published 0 "), "{out:?}");
}

#[test]
fn unknown_types_and_options_of_the_other_type_are_errors() {
    let t = topic("bad");
    for (args, says) in [
        (&[&t, "std_msgs/msg/String"][..], "only std_msgs/msg/UInt8MultiArray, sensor_msgs/msg/Image are generated"),
        (&[&t, "std_msgs/msg/String", "{text: hi}"], "std_msgs/msg/String has no field `text`; its fields are: data"),
        (&[&t, "std_msgs/msg/UInt8", "{data: 256}"], "field data: 256 does not fit a uint8"),
        (&[&t, "my_msgs/msg/Thing", "{}"], "not a built-in type, and my_msgs/msg/Thing: no message definition"),
        (&[&t, "sensor_msgs/msg/Image", "{width: 2}", "--width", "2"], "--size, --width and --height size generated"),
        (&[&t, "sensor_msgs/msg/Image", "--size", "1MiB"], "--size applies to std_msgs/msg/UInt8MultiArray only"),
        (&[&t, "std_msgs/msg/UInt8MultiArray", "--height", "2"], "--width and --height apply to"),
        (&[&t, "std_msgs/msg/UInt8MultiArray", "--size", "1.5MiB"], "not a whole number"),
        (&[&t, "std_msgs/msg/UInt8MultiArray", "--rate", "0"], "not a rate"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_freight"))
            .args(["topic", "pub", "--domain", DOMAIN])
            .args(args)
            .output()
            .expect("run freight");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `freight topic pub` as if on another host: a mount namespace with private
/// /dev/shm and /tmp/iceoryx2, so only DDS reaches this process. `None` where
/// that needs privileges this test does not have.
fn pub_on_another_host(args: &[&str]) -> Option<Freight> {
    const PRIVATE_SHM: &str = "mkdir -p /tmp/iceoryx2 && mount -t tmpfs tmpfs /dev/shm && \
        mount -t tmpfs tmpfs /tmp/iceoryx2 && exec \"$0\" \"$@\"";
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM, "true"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        skip(
            "freight topic pub to a second 'host'",
            Lack::Setup,
            "no private /dev/shm (needs root and `unshare --mount`)",
        );
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM, env!("CARGO_BIN_EXE_freight")]);
    Some(Freight::spawn_command(cmd, args))
}

#[test]
fn pub_on_another_host_waits_for_and_reaches_a_subscription_over_dds() {
    let t = topic("remote");
    let Some(mut publisher) = pub_on_another_host(&[
        "topic",
        "pub",
        &t,
        "std_msgs/msg/UInt8MultiArray",
        "--size",
        "200KiB",
        "--rate",
        "10",
        "--count",
        "3",
        "--wait-for-subscribers",
        "1",
        "--spin-time",
        "0",
        "--keep-alive",
        KEEP_ALIVE,
        "--domain",
        DOMAIN,
    ]) else {
        return;
    };
    publisher.expect_line("waiting", T);
    let n = node("remote_sub");
    let sub = n.create_subscription::<UInt8MultiArray>(&t, QoS::default()).unwrap();
    for (k, s) in take_n(&sub, 3).iter().enumerate() {
        assert_eq!(s.info().transport, Transport::Network);
        assert_eq!(s.layout.data_offset as usize, k);
        let bytes = s.data.as_bytes().expect("host bytes");
        assert_eq!(bytes.len(), 200 << 10);
        assert_pattern(k as u64, bytes);
    }
    let (ok, out, err) = publisher.finish(T);
    assert!(ok, "{err}");
    assert_eq!(out.last().map(String::as_str), Some("published 2 204800 bytes"), "{out:?}");
}
