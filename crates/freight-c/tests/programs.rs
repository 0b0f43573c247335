//! The C ABI and the C++ API from the languages they are for: small programs
//! compiled with the system's `cc` and `c++` against `include/` and
//! `libfreight_c.so`, run as a user's program would be.

mod common;

use std::process::Command;

/// Compiles `source`, runs it with `ROS_DOMAIN_ID=17`, and returns what it
/// printed; fails the test with the program's output otherwise.
fn build_and_run(compiler: &str, flags: &[&str], source: &str) -> String {
    let exe = common::compile(compiler, flags, source);
    let ran = Command::new(&exe).env("ROS_DOMAIN_ID", "17").output().unwrap();
    common::remove(&exe);
    let stdout = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "{source} failed:\n{stdout}{}", String::from_utf8_lossy(&ran.stderr));
    stdout
}

#[test]
fn a_c_program_makes_contexts_and_nodes_and_reads_errors() {
    let out = build_and_run("cc", &["-std=c11"], "c/context_node.c");
    let layout = format!(
        "layout {} {} {}",
        std::mem::size_of::<freight_c::FreightContextOptions>(),
        std::mem::offset_of!(freight_c::FreightContextOptions, domain_id),
        std::mem::offset_of!(freight_c::FreightContextOptions, local_only),
    );
    assert!(out.contains(&layout), "C and Rust lay freight_context_options out differently:\n{out}");
    assert!(out.contains("domain 17\n"), "{out}");
    assert!(out.contains("node /sensors front_lidar\n"), "{out}");
    assert!(out.contains("bad name FREIGHT_ERROR_NAME: ") && out.contains("9lives"), "{out}");
    assert!(out.contains("null context FREIGHT_ERROR_INVALID_ARGUMENT: the context is a null pointer"), "{out}");
    assert!(out.contains(&format!("version {}\n", env!("CARGO_PKG_VERSION"))), "{out}");
}

#[test]
fn a_cpp_program_uses_raii_handles_and_catches_freight_errors() {
    let out = build_and_run("c++", &["-std=c++17"], "cpp/context_node.cpp");
    assert!(out.contains("domain 17\n"), "{out}");
    assert!(out.contains("node /robot/camera\n"), "{out}");
    assert!(out.contains("caught FREIGHT_ERROR_NAME: ") && out.contains("bad-name"), "{out}");
    assert!(out.contains("caught FREIGHT_ERROR_INVALID_ARGUMENT: domain_id 500"), "{out}");
}
