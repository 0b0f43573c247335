//! `freight topic` against a real publisher and subscription in this test process.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use freight::msgs::geometry_msgs::Twist;
use freight::msgs::sensor_msgs::Image;
use freight::{BackendKind, BackendSet, Context, PublisherOptions, QoS, SubscriptionOptions};
use freight_testkit::{other_host_available, OTHER_HOST_MOUNTS};

fn freight(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_freight")).args(args).output().expect("run freight");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn topic_commands_show_the_graph_and_the_traffic() {
    let domain = "77";
    let ctx = Context::builder().domain_id(77).fake_device_uuid([0x3f; 16]).create().unwrap();
    let node = ctx.create_node_with_namespace("camera", "/robot").unwrap();
    let topic = format!("/cli_test_{}/image", std::process::id());
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = node.create_publisher_with_options::<Image>(&topic, 5, options).unwrap();
    let device_ok = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    // Best effort: it never takes, and a full reliable queue would (rightly)
    // make the publisher wait for it.
    let _sub = node.create_subscription_with_options::<Image>(&topic, QoS::sensor_data(), device_ok).unwrap();
    // The same, on another (simulated) device.
    let other_gpu = Context::builder().domain_id(77).fake_device_uuid([0xab; 16]).create().unwrap();
    let other_node = other_gpu.create_node_with_namespace("viewer", "/robot").unwrap();
    let _other = other_node.create_subscription_with_options::<Image>(&topic, QoS::sensor_data(), device_ok).unwrap();

    let (ok, out, err) = freight(&["topic", "list", "-t", "--domain", domain]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{topic} [sensor_msgs/msg/Image]")), "{out}");

    let (ok, out, err) = freight(&["topic", "info", &topic, "-v", "--domain", domain]);
    assert!(ok, "{err}");
    assert!(out.contains("Publisher count: 1") && out.contains("Subscription count: 2"), "{out}");
    assert!(out.contains("Node name: /robot/camera") && out.contains("Node name: /robot/viewer"), "{out}");
    assert!(out.contains("Buffers live in: fake-device"), "{out}");
    assert!(out.contains("Accepted backends: fake-device,shm,cpu"), "{out}");
    // Each endpoint's device, and the device rule per pair.
    assert!(out.contains("Device of fake-device: GPU-3f3f3f3f\u{2026} (3f3f3f3f3f3f3f3f)"), "{out}");
    assert!(out.contains("Device of fake-device: GPU-abababab\u{2026} (abababababababab)"), "{out}");
    let pairs: Vec<&str> = out.lines().filter(|l| l.contains("] -> [")).collect();
    assert_eq!(pairs.len(), 2, "{out}");
    let same = pairs.iter().find(|l| l.contains("fake-device (")).unwrap_or_else(|| panic!("{out}"));
    assert!(same.contains(": intra, fake-device (zero-copy, GPU-3f3f3f3f\u{2026})"), "{out}");
    let other = pairs.iter().find(|l| !l.contains("fake-device (")).unwrap_or_else(|| panic!("{out}"));
    assert!(other.ends_with(": intra, cpu (device\u{2192}host copy once per message; on another device)"), "{out}");

    let running = Arc::new(AtomicBool::new(true));
    let publishing = {
        let running = running.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let mut img = publisher.loan(64 * 48 * 4).unwrap().write_from_fn(|i| i as u8);
                img.width = 64;
                img.height = 48;
                img.encoding = "bgra8".into();
                let _ = publisher.publish(img);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // As `ros2 topic echo` prints it: YAML, the first 128 bytes of the data
    // and `'...'`, the buffer's length and memory in a comment. The device
    // buffer reaches the other process as its host copy in shared memory.
    let (ok, out, err) = freight(&["topic", "echo", &topic, "--once", "--duration", "5", "--domain", domain]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let header = lines.first().copied().unwrap_or_default();
    assert!(header.starts_with("# from publisher ") && header.contains(", sequence "), "{out}");
    assert!(header.ends_with(", via shm, buffers in shm"), "the path and backend `topic info -v` names: {out}");
    let mut expected: Vec<String> = [
        "header:",
        "  stamp:",
        "    sec: 0",
        "    nanosec: 0",
        "  frame_id: ''",
        "height: 48",
        "width: 64",
        "encoding: bgra8",
        "is_bigendian: 0",
        "step: 0",
        "data:  # 12288 elements (uint8) in shm",
    ]
    .map(String::from)
    .into();
    expected.extend((0..128).map(|i| format!("- {i}")));
    expected.extend(["- '...'".to_string(), "---".to_string()]);
    assert_eq!(lines[1..], expected, "{out}");

    let (ok, out, err) =
        freight(&["topic", "echo", &topic, "--once", "--no-arr", "--duration", "5", "--domain", domain]);
    assert!(ok, "{err}");
    assert!(out.ends_with("\nstep: 0\ndata: '<sequence type: uint8, length: 12288>'\n---\n"), "{out}");
    let (ok, out, err) = freight(&["topic", "echo", &topic, "--once", "-f", "--duration", "5", "--domain", domain]);
    assert!(ok, "{err}");
    let data: Vec<&str> = out.lines().skip_while(|l| *l != "data:").skip(1).collect();
    assert_eq!(data.len(), 12288 + 1, "every byte, then `---`: {out}");
    assert!(data[..12288].iter().enumerate().all(|(i, l)| *l == format!("- {}", i as u8)), "{out}");

    let (ok, out, err) = freight(&["topic", "hz", &topic, "--duration", "1.5", "--domain", domain]);
    assert!(ok, "{err}");
    let rate: f64 = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("average rate: "))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {out}"));
    assert!((20.0..=120.0).contains(&rate), "published every 10 ms, measured {rate} Hz");

    let (ok, out, err) = freight(&["topic", "bw", &topic, "--duration", "1.5", "--domain", domain]);
    assert!(ok, "{err}");
    assert!(out.contains("Message size mean: 12."), "{out}");
    running.store(false, Ordering::Relaxed);
    publishing.join().unwrap();

    let (ok, _, err) = freight(&["topic", "info", "/no/such/topic", "--domain", domain]);
    assert!(!ok && err.contains("does not exist"), "{err}");
}

/// `echo` decodes every built-in type, not only the large-data ones: here a
/// `geometry_msgs/msg/Twist`, all small fields.
#[test]
fn topic_echo_prints_any_built_in_type() {
    let ctx = Context::builder().domain_id(76).local_only().create().unwrap();
    let node = ctx.create_node("teleop").unwrap();
    let topic = format!("/cli_test_{}/cmd_vel", std::process::id());
    let publisher = node.create_publisher::<Twist>(&topic, 5).unwrap();
    let mut twist = Twist::default();
    (twist.linear.x, twist.angular.z) = (1.5, -0.25);
    let running = Arc::new(AtomicBool::new(true));
    let publishing = {
        let running = running.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let _ = publisher.publish_copy(&twist);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let (ok, out, err) = freight(&["topic", "echo", &topic, "--once", "--duration", "5", "--domain", "76"]);
    running.store(false, Ordering::Relaxed);
    publishing.join().unwrap();
    assert!(ok, "{err}");
    let yaml: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        yaml,
        ["linear:", "  x: 1.5", "  y: 0.0", "  z: 0.0", "angular:", "  x: 0.0", "  y: 0.0", "  z: -0.25", "---"],
        "{out}"
    );
}

/// `freight topic echo` stopped and continued (Ctrl-Z and `fg`) while it waits
/// goes on waiting, as `ros2 topic echo` does, and prints what comes after.
#[test]
fn topic_echo_stopped_and_continued_goes_on() {
    let ctx = Context::builder().domain_id(75).local_only().create().unwrap();
    let node = ctx.create_node("teleop_later").unwrap();
    let topic = format!("/cli_test_{}/cmd_vel_later", std::process::id());
    // There first, so that echo knows the type; it publishes after the signals.
    let publisher = node.create_publisher::<Twist>(&topic, 5).unwrap();
    let mut echo = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["topic", "echo", &topic, "--once", "--duration", "20", "--domain", "75"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run freight");
    std::thread::sleep(Duration::from_millis(500));
    let pid = echo.id() as libc::pid_t;
    for sig in [libc::SIGSTOP, libc::SIGCONT, libc::SIGTSTP, libc::SIGCONT] {
        // SAFETY: kill has no memory preconditions; the child is not reaped yet.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "signal {sig}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(echo.try_wait().unwrap().is_none(), "echo ended before anything was published");
    let mut twist = Twist::default();
    twist.linear.x = 2.5;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while echo.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        let _ = publisher.publish_copy(&twist);
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = echo.kill();
    let out = echo.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("  x: 2.5"), "echo printed nothing after a stop and continue: {stdout:?}");
}

/// Runs `freight` as if on another host: a mount namespace with private
/// /dev/shm and /tmp/iceoryx2, so only DDS reaches this process. `None` where
/// that needs privileges this test does not have.
fn freight_on_another_host(args: &[&str]) -> Option<(bool, String, String)> {
    if !other_host_available("freight topic on a second 'host'") {
        return None;
    }
    let loopback = concat!(env!("CARGO_MANIFEST_DIR"), "/../freight-dds/loopback.xml");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", OTHER_HOST_MOUNTS, env!("CARGO_BIN_EXE_freight")])
        .args(args)
        .env("CYCLONEDDS_URI", format!("file://{loopback}"))
        .output()
        .expect("run freight");
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    ))
}

#[test]
fn topic_commands_see_publishers_on_other_hosts_through_dds() {
    let domain = 78;
    let ctx = Context::builder().domain_id(domain).dds_config(freight::DdsConfig::loopback()).create().unwrap();
    let node = ctx.create_node_with_namespace("lidar", "/robot").unwrap();
    let topic = format!("/cli_remote_{}/image", std::process::id());
    let publisher = node.create_publisher::<Image>(&topic, 5).unwrap();
    let d = domain.to_string();
    let Some((ok, out, err)) = freight_on_another_host(&["topic", "info", &topic, "-v", "--domain", &d]) else {
        return;
    };
    assert!(ok, "{err}");
    assert!(out.contains("Type: sensor_msgs/msg/Image") && out.contains("Publisher count: 1"), "{out}");
    assert!(out.contains("Node name: /robot/lidar"), "{out}");
    assert!(out.contains(&format!("Process id: {}", std::process::id())), "{out}");
    assert!(out.contains("Reached by: DDS (freight on another host)"), "{out}");

    let running = Arc::new(AtomicBool::new(true));
    let publishing = {
        let running = running.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let mut img = publisher.loan(32 * 16 * 4).unwrap().write_from_fn(|i| i as u8);
                img.width = 32;
                img.encoding = "bgra8".into();
                let _ = publisher.publish(img);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let echo = freight_on_another_host(&["topic", "echo", &topic, "--once", "--duration", "10", "--domain", &d]);
    running.store(false, Ordering::Relaxed);
    publishing.join().unwrap();
    let (ok, out, err) = echo.expect("probed above");
    assert!(ok, "{err}");
    assert!(out.lines().next().is_some_and(|l| l.ends_with(", via network, buffers in cpu")), "{out}");
    assert!(out.contains("\nwidth: 32\nencoding: bgra8\n"), "{out}");
    assert!(out.contains("\ndata:  # 2048 elements (uint8) in cpu\n- 0\n- 1\n"), "{out}");
}

/// Issue 22's container, with the tool: in a mount and network namespace
/// whose /dev/shm is Docker's default 64 MB, `topic pub` sends 4K frames at
/// 10 Hz to `topic hz`. Two frames fill /dev/shm; the rest go over DDS. The
/// publisher says so on stderr, sends every frame and exits 0, and `topic
/// info -v` lists its spill writer beside it.
#[test]
fn topic_info_shows_the_spill_writer_of_a_publisher_in_a_small_dev_shm() {
    if !other_host_available("topic_info_shows_the_spill_writer_of_a_publisher_in_a_small_dev_shm") {
        return;
    }
    let topic = format!("/cli_spill_{}/image", std::process::id());
    let script = r#"set -e
        ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo
        mkdir -p /tmp/iceoryx2 && mount -t tmpfs -o size=64m tmpfs /dev/shm && mount -t tmpfs tmpfs /tmp/iceoryx2
        "$0" topic hz "$1" > /dev/null 2>&1 &
        hz=$!
        "$0" topic pub "$1" sensor_msgs/msg/Image --width 3840 --height 2160 --rate 10 --count 30 \
            --wait-for-subscribers 1 > /dev/null 2> "$2" &
        publisher=$!
        sleep 2
        "$0" topic info -v "$1"
        wait "$publisher"
        echo "publisher exit $?"
        kill "$hz""#;
    let dir = freight_testkit::PrivateDir::new("freight-spill-cli");
    let stderr_file = dir.path().join("pub.err");
    let loopback = concat!(env!("CARGO_MANIFEST_DIR"), "/../freight-dds/loopback.xml");
    let out = Command::new("unshare")
        .args(["--mount", "--net", "--propagation", "private", "sh", "-c", script, env!("CARGO_BIN_EXE_freight")])
        .arg(&topic)
        .arg(&stderr_file)
        .env("CYCLONEDDS_URI", format!("file://{loopback}"))
        .output()
        .expect("run the namespace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let published = std::fs::read_to_string(&stderr_file).unwrap_or_default();
    assert!(out.status.success(), "{stdout}\n{}\n{published}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Publisher count: 2"), "{stdout}");
    assert!(stdout.contains("Reached by: DDS, for the frames /dev/shm has no room for"), "{stdout}");
    assert!(stdout.contains("] -> [2]: network, cpu (serialized once per message)"), "{stdout}");
    assert!(stdout.contains("publisher exit 0"), "{stdout}\n{published}");
    assert!(published.contains("go to the subscribers over DDS"), "{published}");
}

freight_msg::message! {
    /// A type of this test's own: not one of freight's built-in types.
    pub struct Odo = "cli_test_msgs/msg/Odo" {
        pub frame: String,
        pub pose: [f64; 3],
        pub hits: Vec<u16>,
    }
}

/// `freight topic echo` of a type outside the built-in ones reads it from DDS
/// as CDR and decodes it by the `.msg` file `--msg-path` finds; without one,
/// the error says where it looked and what to set.
#[test]
fn topic_echo_decodes_a_type_outside_the_built_in_ones_by_its_msg_file() {
    let share = freight_testkit::PrivateDir::new("cli-msg-path");
    let msg_dir = share.path().join("cli_test_msgs/msg");
    std::fs::create_dir_all(&msg_dir).unwrap();
    std::fs::write(msg_dir.join("Odo.msg"), "string frame\nfloat64[3] pose\nuint16[] hits\n").unwrap();
    let ctx = Context::builder().domain_id(74).create().unwrap();
    let node = ctx.create_node("odometer").unwrap();
    let topic = format!("/cli_test_{}/odo", std::process::id());
    let publisher = node.create_publisher::<Odo>(&topic, 5).unwrap();
    let odo = Odo { frame: "odom".into(), pose: [1.0, 2.5, -3.0], hits: vec![7, 9] };
    let running = Arc::new(AtomicBool::new(true));
    let publishing = {
        let running = running.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let _ = publisher.publish_copy(&odo);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let msg_path = share.path().to_str().unwrap();
    let (ok, out, err) =
        freight(&["topic", "echo", &topic, "--once", "--duration", "10", "--domain", "74", "--msg-path", msg_path]);
    let without = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["topic", "echo", &topic, "--once", "--duration", "5", "--domain", "74"])
        .env_remove("AMENT_PREFIX_PATH")
        .output()
        .expect("run freight");
    running.store(false, Ordering::Relaxed);
    publishing.join().unwrap();
    assert!(ok, "{err}");
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.ends_with("via network, as CDR decoded by its .msg definition"), "{out}");
    assert_eq!(
        lines.collect::<Vec<_>>(),
        ["frame: odom", "pose:", "- 1.0", "- 2.5", "- -3.0", "hits:", "- 7", "- 9", "---"],
        "{out}"
    );
    let err = String::from_utf8_lossy(&without.stderr);
    assert!(!without.status.success());
    assert!(err.contains("cli_test_msgs/msg/Odo, which is not a built-in type") && err.contains("--msg-path"), "{err}");
}
