//! A message type of the user's own `.msg` files from C++: its header made
//! by `freight msg cpp`'s generator, its endpoints the core's generic ones
//! (the type registered from the definition the header carries), meeting
//! the generated Rust type of the same file across processes, both ways.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::Program;
use freight::{Buffer, Context, QoS, Transport};

#[allow(dead_code, clippy::all)]
mod test_pkg {
    include!(concat!(env!("OUT_DIR"), "/freight_test_msgs.rs"));
}

use test_pkg::freight_test_msgs::msg::{Everything, Inner};

fn topic(name: &str) -> String {
    format!("/cpp_user_{name}_{}", std::process::id())
}

/// The generated header in a folder of this test's own, as `-I` flags.
fn generated_include(name: &str) -> (PathBuf, String) {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../freight-msg-gen/tests/msgs/freight_test_msgs");
    let dir = std::env::temp_dir().join(format!("freight-c-user-{name}-{}", std::process::id()));
    let headers = freight_msg_gen::Builder::new().package_dir(&package).cpp_headers().expect("headers");
    let header = headers.iter().find(|h| h.package == "freight_test_msgs").expect("the package's header");
    std::fs::create_dir_all(dir.join("freight/msgs")).unwrap();
    std::fs::write(dir.join("freight/msgs/freight_test_msgs.hpp"), &header.source).unwrap();
    let flag = format!("-I{}", dir.display());
    (dir, flag)
}

fn compile(name: &str) -> (PathBuf, PathBuf) {
    let (dir, include) = generated_include(name);
    (common::compile("c++", &["-std=c++17", &include], "cpp/user_types.cpp"), dir)
}

fn inner(value: i32, label: &str) -> Inner {
    Inner { value, label: label.into() }
}

/// Message k, as `everything(k)` in cpp/user_types.cpp makes it.
fn everything(k: u32) -> Everything {
    let mut m = Everything::default();
    m.header.frame_id = format!("frame-{k}");
    m.header.stamp.sec = k as i32;
    m.inner = inner(k as i32, "in");
    m.inners = vec![inner(1, "a"), inner(2, "b")];
    m.fixed_inners[1] = inner(9, "nine");
    m.data = Buffer::from((0..1usize << 20).map(|i| (i * 7 + k as usize) as u8).collect::<Vec<_>>());
    m.floats = Buffer::from(vec![0.5f32, 1.5 * k as f32]);
    m.chars = Buffer::from(b"hi".to_vec());
    m.flags = vec![true, false, true];
    m.names = vec!["x".into(), "y".into()];
    m.fixed[2] = 3.5;
    m.covariance[35] = f64::from(k);
    m.bounded = vec![-1, 2];
    m.r#type = "kind".into();
    m.r#loop = 7;
    m.pose.pose.position.x = 1.25;
    m
}

/// What cpp/user_types.cpp prints of `everything(k)`.
fn summary(k: u32) -> String {
    let sum: u64 = (0..1usize << 20).map(|i| u64::from((i * 7 + k as usize) as u8)).sum();
    format!(
        "frame-{k} inner={k} inners=2 fixed_inner=nine data=1048576/{sum} floats={:.6} chars=hi names=y \
         covariance={:.6} bounded=-1 type=kind x=1.250000",
        1.5 * k as f32,
        f64::from(k)
    )
}

#[test]
fn a_cpp_type_of_a_users_package_publishes_by_copy_and_by_loan_in_one_process() {
    let (exe, dir) = compile("inproc");
    let ran = Command::new(&exe).arg("inproc").output().unwrap();
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "user_types inproc failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));
    assert!(out.contains(&format!("took {}\n", summary(3))), "{out}");
    assert!(out.ends_with("inproc ok\n"), "{out}");
}

#[test]
fn a_cpp_type_of_a_users_package_meets_the_rust_type_across_processes() {
    let (exe, dir) = compile("processes");
    let node = Context::new().unwrap().create_node("user_types_rust").unwrap();

    // C++ publishes, the generated Rust type takes: every field as sent.
    let t = topic("to_rust");
    let sub = node.create_subscription::<Everything>(&t, QoS::keep_last(10)).unwrap();
    let mut cpp = Program::start(&exe, &["pub", &t, "3"]);
    for k in 1..=3 {
        assert_eq!(cpp.line(), format!("sent {k}\n"));
        let got = sub.take(Duration::from_secs(10)).unwrap().expect("a message from C++");
        assert_eq!(got.info().transport, Transport::Shm);
        assert_eq!(*got, everything(k), "message {k}");
    }
    cpp.finish("user_types pub");

    // Rust publishes, C++ takes and prints what it holds.
    let t = topic("to_cpp");
    let publisher = node.create_publisher::<Everything>(&t, QoS::keep_last(10)).unwrap();
    let mut cpp = Program::start(&exe, &["sub", &t, "3"]);
    assert_eq!(cpp.line(), "ready\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while publisher.subscription_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "the C++ subscription never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    for k in 1..=3 {
        publisher.publish_copy(&everything(k)).unwrap();
        assert_eq!(cpp.line(), format!("got shm {}\n", summary(k)));
    }
    cpp.finish("user_types sub");
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
}
