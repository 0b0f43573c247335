//! Device memory from C++ (tests/cpp/devices.cpp): a `cuda` publisher writes
//! each loan through its device pointer, a subscription that accepts `cuda`
//! reads each message through its own, in another process. Run against the
//! simulated CUDA driver here (freight-backend's test double: device memory
//! is host shared memory, so what it checks is freight's side: the
//! addresses, the holds, the stream calls); the GPU checklist runs the same
//! program on a real GPU.

mod common;

#[allow(dead_code)] // the backend's tests use all of it, these not
#[path = "../../freight-backend/tests/sim_cuda/mod.rs"]
mod sim_cuda;

use std::process::Command;

use common::{ok, Program};

#[test]
fn cpp_moves_cuda_memory_between_processes_through_device_pointers() {
    let Some(sim) = sim_cuda::SimDriver::build() else { return };
    let exe = common::compile("c++", &["-std=c++17"], "cpp/devices.cpp");
    let topic = format!("/cpp_devices_{}", std::process::id());
    let mut sub = Program::spawn(sim.command(&exe, &["sub", &topic, "3", "1048576"]));
    assert_eq!(sub.line(), "READY\n");
    let mut publisher = Program::spawn(sim.command(&exe, &["pub", &topic, "3", "1048576"]));
    for k in 0..3 {
        assert_eq!(publisher.line(), format!("SENT {k}\n"));
    }
    let got: Vec<String> = (0..3).map(|_| sub.line()).collect();
    assert_eq!(got, ["GOT 0 cuda ok\n", "GOT 1 cuda ok\n", "GOT 2 cuda ok\n"]);
    sub.finish("the C++ device subscriber");
    publisher.finish("the C++ device publisher");
    common::remove(&exe);
}

#[test]
fn device_pointers_of_host_memory_and_unknown_backends_are_typed_errors() {
    let exe = common::compile("c++", &["-std=c++17"], "cpp/devices.cpp");
    let out = ok("devices errors", Command::new(&exe).arg("errors").output().unwrap());
    common::remove(&exe);
    assert!(out.contains("refused FREIGHT_ERROR_LOAN: buffer 0 is cpu memory, which no device addresses"), "{out}");
    assert!(out.contains("refused FREIGHT_ERROR_INVALID_ARGUMENT: no backend is named \"gpu\": one of "), "{out}");
    // A subscription's and a callback subscription's.
    assert_eq!(out.matches("refused FREIGHT_ERROR_INVALID_ARGUMENT: no backend is named \"tpu\"").count(), 2, "{out}");
    assert!(out.ends_with("errors ok\n"), "{out}");
}
