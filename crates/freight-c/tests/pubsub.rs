//! Publishers and subscriptions from C++ (tests/cpp/pubsub.cpp): in one
//! process, and across processes to and from freight's Rust API, over shared
//! memory, every byte checked.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::Program;

use freight::msgs::sensor_msgs::Image;
use freight::{Context, QoS, Transport};

/// Byte `i` of frame `k`, as the C++ program makes and checks them.
fn pixel(k: u32, i: usize) -> u8 {
    (k.wrapping_mul(31) as usize).wrapping_add(i.wrapping_mul(7)) as u8
}

fn topic(name: &str) -> String {
    format!("/cpp_{name}_{}", std::process::id())
}

#[test]
fn a_cpp_program_publishes_by_copy_and_by_loan_and_takes_in_one_process() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/pubsub.cpp");
    let ran = Command::new(&exe).arg("inproc").output().unwrap();
    common::remove(&exe);
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "pubsub inproc failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));
    // In one process the frame stays in the heap: no shared memory, no CDR.
    assert!(out.contains("copy intra cpu 1048576\n"), "{out}");
    assert!(out.contains("loan intra cpu\n"), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_PUBLISH: buffer field 0 is not the loan's memory"), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_LOAN: "), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_CREATE: "), "{out}");
    assert!(out.contains("refused \"my_msgs/msg/Thing\" is neither one of freight's"), "{out}");
    assert!(out.contains("refused the message's fields: "), "{out}");
    assert!(out.ends_with("inproc ok\n"), "{out}");
}

#[test]
fn cpp_callbacks_run_in_the_executor_and_their_exceptions_come_out_of_the_spin() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/pubsub.cpp");
    let ran = Command::new(&exe).arg("callbacks").output().unwrap();
    common::remove(&exe);
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "pubsub callbacks failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(out, "called 3\ncallback threw boom\nspin returned\n");
}

/// The C++ side built with AddressSanitizer (leaks included) and
/// UndefinedBehaviorSanitizer, every finding fatal: the paths of one
/// process, callbacks and exceptions included.
#[test]
fn the_cpp_api_is_clean_under_address_and_undefined_behaviour_sanitizers() {
    let flags =
        ["-std=c++17", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];
    let exe = common::compile("c++", &flags, "cpp/pubsub.cpp");
    for mode in ["inproc", "callbacks"] {
        let ran = Command::new(&exe).arg(mode).env("ASAN_OPTIONS", "detect_leaks=1").output().unwrap();
        let err = String::from_utf8_lossy(&ran.stderr);
        assert!(ran.status.success(), "pubsub {mode} under the sanitizers failed:\n{err}");
        assert!(!err.contains("runtime error") && !err.contains("Sanitizer"), "pubsub {mode}:\n{err}");
    }
    common::remove(&exe);
}

#[test]
fn a_cpp_publisher_reaches_a_rust_subscription_in_another_process() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/pubsub.cpp");
    let topic = topic("to_rust");
    let ctx = Context::builder().local_only().create().unwrap();
    let sub = ctx.create_node("rust_sub").unwrap().create_subscription::<Image>(&topic, QoS::keep_last(10)).unwrap();
    let child = Program::start(&exe, &["pub", &topic, "5"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < 5 && Instant::now() < deadline {
        let Some(sample) = sub.take(Duration::from_millis(200)).unwrap() else { continue };
        let k = sample.header.stamp.sec as u32;
        assert_eq!((sample.width, sample.height, sample.encoding.as_str()), (640, 480, "bgra8"));
        let bytes = sample.data.as_slice().expect("host memory");
        assert_eq!(bytes.len(), 640 * 480 * 4);
        assert!(bytes.iter().enumerate().all(|(i, b)| *b == pixel(k, i)), "frame {k} has a wrong byte");
        assert_eq!(sample.info().transport, Transport::Shm);
        got.push(k);
    }
    child.finish("the C++ publisher");
    common::remove(&exe);
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
}

#[test]
fn a_rust_publisher_reaches_a_cpp_subscription_in_another_process() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/pubsub.cpp");
    let topic = topic("from_rust");
    let mut child = Program::start(&exe, &["sub", &topic, "5"]);
    assert_eq!(child.line(), "READY\n");
    let ctx = Context::builder().local_only().create().unwrap();
    let publisher = ctx.create_node("rust_pub").unwrap().create_publisher::<Image>(&topic, QoS::keep_last(10)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while publisher.subscription_count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for k in 0..5u32 {
        let loan = publisher.loan(320 * 240 * 4).unwrap();
        let mut image = loan.write_from_fn(|i| pixel(k, i));
        image.header.frame_id = "camera".into();
        image.header.stamp.sec = k as i32;
        (image.width, image.height, image.step) = (320, 240, 320 * 4);
        image.encoding = "bgra8".into();
        publisher.publish(image).unwrap();
    }
    let lines: Vec<String> = (0..5).map(|_| child.line()).collect();
    child.finish(&format!("the C++ subscriber, after {lines:?},"));
    common::remove(&exe);
    let expected: Vec<String> = (0..5).map(|k| format!("GOT {k} shm shm\n")).collect();
    assert_eq!(lines, expected);
}

/// A C++ subscriber that holds what it took is killed (SIGKILL): the Rust
/// publisher goes on, a Rust subscription on the topic misses nothing, and
/// the dead process's subscription leaves the graph.
#[test]
fn a_killed_cpp_subscriber_holding_samples_stops_nobody() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/pubsub.cpp");
    let topic = topic("killed");
    let mut child = Program::start(&exe, &["hold", &topic]);
    assert_eq!(child.line(), "READY\n");
    let ctx = Context::builder().local_only().create().unwrap();
    let node = ctx.create_node("rust_side").unwrap();
    let publisher = node.create_publisher::<Image>(&topic, QoS::keep_last(4)).unwrap();
    let sub = node.create_subscription::<Image>(&topic, QoS::keep_last(10)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while publisher.subscription_count() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut got = Vec::new();
    let mut send = |k: u32| {
        let mut image = publisher.loan(64 * 64 * 4).unwrap().write_from_fn(|i| pixel(k, i));
        image.header.stamp.sec = k as i32;
        publisher.publish(image).unwrap_or_else(|e| panic!("publish {k}: {e}"));
        let s = sub.take(Duration::from_secs(5)).unwrap().unwrap_or_else(|| panic!("frame {k} did not arrive"));
        assert!(s.data.as_slice().unwrap().iter().enumerate().all(|(i, b)| *b == pixel(k, i)));
        got.push(s.header.stamp.sec as u32);
    };
    for k in 0..3 {
        send(k);
    }
    for k in 0..3 {
        assert_eq!(child.line(), format!("HELD {k}\n"));
    }
    child.kill();
    for k in 3..40 {
        send(k);
    }
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(10);
    while publisher.subscription_count() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(publisher.subscription_count(), 1, "the killed process's subscription is still listed");
    common::remove(&exe);
}
