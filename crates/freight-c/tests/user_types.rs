//! Message and service types of the user's own `.msg` and `.srv` files from
//! C++: their header made by `freight msg cpp`'s generator, their endpoints
//! the core's generic ones (the types registered from the definitions the
//! header carries), meeting the generated Rust types of the same files across
//! processes, both ways.

mod common;

#[allow(dead_code)] // the backend's tests use all of it, these not
#[path = "../../freight-backend/tests/sim_cuda/mod.rs"]
mod sim_cuda;

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
use test_pkg::freight_test_msgs::srv::{Detect, Detect_Request, Detect_Response};
use test_pkg::sensor_msgs::msg::Image;

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

/// Also a service of the package's `.srv`, loans both ways, and a bound.
#[test]
fn a_cpp_type_of_a_users_package_publishes_by_copy_and_by_loan_in_one_process() {
    let (exe, dir) = compile("inproc");
    let ran = Command::new(&exe).arg("inproc").output().unwrap();
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "user_types inproc failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));
    assert!(out.contains(&format!("took {}\n", summary(3))), "{out}");
    // A string over its `.msg` bound, refused with its path and the reason.
    let refused = "\nrefused FREIGHT_ERROR_PUBLISH: freight_test_msgs/msg/Everything: field `inner.label`: \
                   a string<=8 holds at most 8 bytes, not 9\n";
    assert!(out.contains(refused), "{out}");
    assert!(out.ends_with("inproc ok\n"), "{out}");
}

#[test]
fn a_users_types_from_cpp_are_clean_under_address_and_undefined_behaviour_sanitizers() {
    let (dir, include) = generated_include("sanitizers");
    let flags = [
        "-std=c++17",
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        &include,
    ];
    let exe = common::compile("c++", &flags, "cpp/user_types.cpp");
    let ran = Command::new(&exe).arg("inproc").env("ASAN_OPTIONS", "detect_leaks=1").output().unwrap();
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "user_types inproc under the sanitizers failed:\n{err}");
    assert!(!err.contains("runtime error") && !err.contains("Sanitizer"), "user_types inproc:\n{err}");
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_cpp_type_of_a_users_package_meets_the_rust_type_across_processes() {
    let (exe, dir) = compile("processes");
    let node = Context::builder().local_only().create().unwrap().create_node("user_types_rust").unwrap();

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

#[test]
fn a_cpp_service_of_a_users_srv_answers_rust_and_calls_rust() {
    let (exe, dir) = compile("services");
    for (serve, call) in [("serve", "call"), ("serve_loaned", "call_loaned")] {
        cpp_server_answers_rust(&exe, serve);
        cpp_client_calls_rust(&exe, call);
    }
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
}

/// A Rust client of a C++ server (`mode`): an image in the request, masks back.
fn cpp_server_answers_rust(exe: &Path, mode: &str) {
    let node = Context::builder().local_only().create().unwrap().create_node("user_services_rust").unwrap();
    let name = topic(mode);
    let client = node.create_client::<Detect>(&name).unwrap();
    let mut cpp = Program::start(exe, &[mode, &name]);
    assert_eq!(cpp.line(), "ready\n");
    assert!(client.wait_for_service(Duration::from_secs(10)));
    for len in [1usize << 20, 0] {
        let pixels: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let request = Detect_Request {
            image: Image { width: 640, data: Buffer::from(pixels.clone()), ..Default::default() },
            min_score: 0.75,
        };
        let reply = client.call(request, Duration::from_secs(10)).unwrap();
        assert_eq!(reply.count, 640, "{mode}");
        assert_eq!(reply.masks.as_bytes().unwrap(), pixels.iter().rev().copied().collect::<Vec<_>>(), "{mode}");
    }
    cpp.finish(mode);
}

/// A C++ client (`mode`) of a Rust server.
fn cpp_client_calls_rust(exe: &Path, mode: &str) {
    let node = Context::builder().local_only().create().unwrap().create_node("user_services_rust").unwrap();
    let name = topic(mode);
    let mut service = node
        .create_service::<Detect>(&name, |rq| Detect_Response {
            count: rq.image.width * 10,
            masks: Buffer::from(vec![rq.image.data.as_bytes().unwrap()[2]; 5]),
        })
        .unwrap();
    let mut cpp = Program::start(exe, &[mode, &name, "2"]);
    // One `serve` answers every request queued: the client's second call
    // may come while the first's `serve` still looks.
    let mut served = 0;
    for k in 1..=2u32 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while served < k as usize {
            assert!(
                std::time::Instant::now() < deadline,
                "the C++ client ({mode}) never made call {k} ({})",
                cpp.status()
            );
            served += service.serve(Duration::from_millis(50)).unwrap();
        }
        assert_eq!(cpp.line(), format!("reply {} 5 {k}\n", k * 10), "{mode}");
    }
    cpp.finish(mode);
}

#[test]
fn a_cpp_service_of_a_users_srv_lends_and_takes_device_memory_both_ways() {
    let Some(sim) = sim_cuda::SimDriver::build() else { return };
    let (exe, dir) = compile("device_service");
    let ran = common::ok("user_types device_service", sim.run(&exe, &["device_service"]));
    assert!(ran.contains("refused FREIGHT_ERROR_INVALID_ARGUMENT: no backend is named \"warp-drive\""), "{ran}");
    assert!(ran.contains("device service cuda ok\n"), "{ran}");
    common::remove(&exe);
    let _ = std::fs::remove_dir_all(dir);
}
