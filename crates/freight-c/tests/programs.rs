//! The C ABI and the C++ API from the languages they are for: small programs
//! compiled with the system's `cc` and `c++` against `include/` and
//! `libfreight_c.so`, run as a user's program would be.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/release` (or `debug`), where cargo puts `libfreight_c.so`: two
/// levels above this test's executable (`deps/programs-<hash>`).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf();
    assert!(
        dir.join("libfreight_c.so").is_file(),
        "{} has no libfreight_c.so: build the crate first (cargo build -p freight-c)",
        dir.display()
    );
    dir
}

/// Compiles `source` with `compiler` and `flags`, runs it with
/// `ROS_DOMAIN_ID=17`, and returns what it printed; fails the test with the
/// compiler's or the program's output otherwise.
fn build_and_run(compiler: &str, flags: &[&str], source: &str) -> String {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = library_dir();
    let name = source.replace(['/', '.'], "_");
    // One folder per program: the tests run in parallel.
    let out_dir = std::env::temp_dir().join(format!("freight-c-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(&name);
    let compiled = Command::new(compiler)
        .args(flags)
        .args(["-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests").join(source))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-lfreight_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(compiled.status.success(), "{compiler} {source}:\n{}", String::from_utf8_lossy(&compiled.stderr));
    let ran = Command::new(&exe).env("ROS_DOMAIN_ID", "17").output().unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
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
