//! Services from C++ (tests/cpp/services.cpp): in one process, and across
//! processes to and from freight's Rust and Python APIs over shared memory.

mod common;

use std::process::Command;
use std::time::Duration;

use freight::msgs::std_srvs::{SetBool, SetBool_Request, SetBool_Response};
use freight::Context;
use freight_testkit::{skip, Lack};

use common::Program;

fn service_name(name: &str) -> String {
    format!("/cpp_{name}_{}", std::process::id())
}

#[test]
fn cpp_services_and_clients_answer_time_out_and_fail_as_rclcpp_users_expect() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/services.cpp");
    let ran = Command::new(&exe).arg("inproc").output().unwrap();
    common::remove(&exe);
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "services inproc failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));
    assert!(out.contains("refused FREIGHT_ERROR_NO_SERVER: service /cpp/enable_"), "{out}");
    // In one process a request and its reply are handed over, never serialized.
    assert!(out.contains("call on intra\n"), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_INVALID_ARGUMENT: the call already handed out its reply"), "{out}");
    assert!(out.contains("rclcpp-shaped triggered\n"), "{out}");
    assert!(out.contains("polled 1\n"), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_TIMEOUT: no reply from service /cpp/enable_"), "{out}");
    assert!(out.contains("callback threw no motor\n"), "{out}");
    assert!(out.ends_with("inproc ok\n"), "{out}");
}

#[test]
fn a_rust_client_calls_a_cpp_service_in_another_process() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/services.cpp");
    let name = service_name("rust_calls");
    let mut server = Program::start(&exe, &["serve", &name, "2"]);
    assert_eq!(server.line(), "READY\n");

    let node = Context::builder().local_only().create().unwrap().create_node("rust_client").unwrap();
    let client = node.create_client::<SetBool>(&name).unwrap();
    assert!(client.wait_for_service(Duration::from_secs(10)), "the C++ service did not appear");
    let pid = server.id();
    for data in [true, false] {
        let reply = client.call(SetBool_Request { data }, Duration::from_secs(10)).unwrap();
        let expected = format!("cpp {pid} {}", if data { "on" } else { "off" });
        assert_eq!((reply.success, reply.message.as_str()), (data, expected.as_str()));
    }
    assert_eq!(server.line(), "served 2\n");
    server.finish("the C++ service");
    common::remove(&exe);
}

#[test]
fn a_cpp_client_calls_a_rust_service_in_another_process() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/services.cpp");
    let name = service_name("cpp_calls");
    let node = Context::builder().local_only().create().unwrap().create_node("rust_server").unwrap();
    let mut service = node
        .create_service::<SetBool>(&name, |request| SetBool_Response {
            success: request.data,
            message: format!("rust {}", request.data),
        })
        .unwrap();
    let mut client = Program::start(&exe, &["call", &name]);
    let mut served = 0;
    for _ in 0..100 {
        served += service.serve(Duration::from_millis(100)).unwrap();
        if served > 0 {
            break;
        }
    }
    assert_eq!(served, 1, "the C++ client's request did not come");
    assert_eq!(client.line(), "reply 1 rust true\n");
    client.finish("the C++ client");
    common::remove(&exe);
}

/// The Python client of the project's environment (`FREIGHT_PYTHON`, which
/// `make test` sets) calls a C++ service: the two sides' CDR agree.
#[test]
fn a_python_client_calls_a_cpp_service_in_another_process() {
    let Some(python) = std::env::var_os("FREIGHT_PYTHON") else {
        return skip("python_client_calls_cpp", Lack::Setup, "FREIGHT_PYTHON is not set (make test sets it)");
    };
    let exe = common::compile("c++", &["-std=c++17"], "cpp/services.cpp");
    let name = service_name("python_calls");
    let mut server = Program::start(&exe, &["serve", &name, "1"]);
    assert_eq!(server.line(), "READY\n");
    let script = r#"
import sys
import freight
from freight.msgs.std_srvs import SetBool
node = freight.Node("python_client", context=freight.Context(local_only=True))
client = node.create_client(SetBool, sys.argv[1])
assert client.wait_for_service(timeout_sec=10), "no server"
response = client.call(SetBool.Request(data=True), timeout_sec=10)
print(response.success, response.message)
"#;
    let ran = Command::new(&python).args(["-c", script, &name]).output().expect("running python");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "python failed: {stdout}{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(stdout, format!("True cpp {} on\n", server.id()));
    assert_eq!(server.line(), "served 1\n");
    server.finish("the C++ service");
    common::remove(&exe);
}

/// The services program's one-process paths (a throwing callback included)
/// built with AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer,
/// every finding fatal.
#[test]
fn cpp_services_are_clean_under_address_and_undefined_behaviour_sanitizers() {
    let flags =
        ["-std=c++17", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];
    let exe = common::compile("c++", &flags, "cpp/services.cpp");
    let ran = Command::new(&exe).arg("inproc").env("ASAN_OPTIONS", "detect_leaks=1").output().unwrap();
    common::remove(&exe);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "services inproc under the sanitizers failed:\n{err}");
    assert!(!err.contains("runtime error") && !err.contains("Sanitizer"), "services inproc:\n{err}");
}
