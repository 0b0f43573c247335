//! End-to-end: run the `freight` binary as a user would and check what it writes.

use std::path::Path;
use std::process::{Command, Output};

use freight_testkit::{skip, Lack, PrivateDir};

#[test]
fn bench_latency_writes_table_json_and_png() {
    let dir = PrivateDir::new("freight-cli-bench");
    let json = dir.path().join("rows.json");
    let png = dir.path().join("latency.png");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args([
            "bench",
            "latency",
            "--sizes",
            "8B,64KiB",
            "--transports",
            "iceoryx2,memcpy",
            "--wait",
            "both",
            "--iterations",
            "200",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&png)
        .output()
        .expect("run freight");
    let stderr = succeeded(&out);

    // 2 sizes x 2 waits x 2 transports (memcpy is measured once, reported per wait).
    let rows = rows_of(&json);
    assert_eq!(rows.len(), 8, "{rows:#?}");
    for row in &rows {
        let p50 = row["p50_us"].as_f64().expect("p50_us is a number");
        assert!(p50 > 0.0, "{row}");
        assert!(row["p99_us"].as_f64().unwrap() >= p50, "{row}");
        assert!(row["msgs_per_s"].as_f64().unwrap() > 0.0, "{row}");
    }

    let png_bytes = std::fs::read(&png).expect("png written");
    assert!(png_bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("transport | wait"), "{stdout}");
    assert_eq!(stdout.matches("baseline").count(), 8 + 1, "{stdout}");
    assert!(stderr.contains("[1/6] iceoryx2 spin 8 B"), "{stderr}");
}

#[test]
fn unknown_transport_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--transports", "shm-loan,zeromq"])
        .output()
        .expect("run freight");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("zeromq"), "{stderr}");
    assert!(stderr.contains("shm-loan") && stderr.contains("iceoryx2"), "the valid names are listed: {stderr}");
    assert!(out.stdout.is_empty(), "nothing may be measured");
}

#[test]
fn a_python_only_option_without_lang_python_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--user-type", "--sizes", "8B"])
        .output()
        .expect("run freight");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--user-type only applies to --lang python"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing may be measured");
}

#[test]
fn bench_latency_measures_a_dds_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--sizes", "1KiB", "--transports", "dds", "--wait", "block", "--iterations", "50"])
        .output()
        .expect("run freight");
    succeeded(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("dds ")).unwrap_or_else(|| panic!("no dds row: {stdout}"));
    assert!(row.contains("block") && row.contains("1 KiB") && row.contains("baseline"), "{row}");
}

/// `--lang python` runs `python -m freight.bench latency` in the interpreter that
/// `FREIGHT_PYTHON` names (the Makefile points it at the project's virtual environment).
/// Skipped, saying so, where no interpreter with freight's Python package is configured.
#[test]
fn bench_latency_lang_python_runs_the_python_benchmark() {
    let Some(python) = std::env::var_os("FREIGHT_PYTHON") else {
        skip("bench latency --lang python", Lack::Setup, "FREIGHT_PYTHON is not set (make test sets it)");
        return;
    };
    let probe = Command::new(&python).args(["-c", "import freight.bench"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        let why = format!("{} cannot import freight.bench", python.to_string_lossy());
        skip("bench latency --lang python", Lack::Setup, &why);
        return;
    }
    let dir = PrivateDir::new("freight-cli-bench-python");
    let json = dir.path().join("rows.json");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--lang", "python", "--sizes", "8B,1MiB", "--iterations", "50", "--user-type"])
        .args(["--duration-per-row", "0.2", "--json"])
        .arg(&json)
        .env("FREIGHT_PYTHON", &python)
        .output()
        .expect("run freight");
    succeeded(&out);

    // freight, a user's type (--user-type), and iceoryx2 where its Python binding is
    // installed, for each size.
    let rows = rows_of(&json);
    for library in ["freight", "freight-user"] {
        let of_library: Vec<&serde_json::Value> = rows.iter().filter(|r| r["transport"] == library).collect();
        assert_eq!(of_library.len(), 2, "{library}: {rows:#?}");
    }
    for row in &rows {
        assert_eq!(row["lang"], "python", "{row}");
        assert_eq!(row["samples"], 50, "{row}");
        assert!(row["p50_us"].as_f64().expect("p50_us is a number") > 0.0, "{row}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("freight p50 µs"), "{stdout}");
    assert!(stdout.contains("freight-user/freight (p50)"), "{stdout}");
}

/// The C++ program `make build` leaves beside the tool; its absence fails the test with
/// the tool's own advice.
#[test]
fn bench_latency_lang_cpp_compares_the_cpp_api_with_the_rust_api() {
    let dir = PrivateDir::new("freight-cli-bench-cpp");
    let json = dir.path().join("rows.json");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--lang", "cpp", "--sizes", "8B,1MiB", "--wait", "spin", "--iterations", "100"])
        .args(["--duration-per-row", "0.2", "--json"])
        .arg(&json)
        .env_remove("FREIGHT_BENCH_CPP")
        .output()
        .expect("run freight");
    succeeded(&out);

    // cpp-loan, shm-loan, iceoryx2, cpp-copy, shm-copy, memcpy for each size.
    let rows = rows_of(&json);
    assert_eq!(rows.len(), 12, "{rows:#?}");
    for transport in ["cpp-loan", "cpp-copy"] {
        let cpp: Vec<&serde_json::Value> = rows.iter().filter(|r| r["transport"] == transport).collect();
        assert_eq!(cpp.len(), 2, "{rows:#?}");
        for row in cpp {
            assert!(row["p50_us"].as_f64().expect("p50_us is a number") > 0.0, "{row}");
            assert!(row["msgs_per_s"].as_f64().expect("msgs/s") > 0.0, "{row}");
        }
    }
    // Each C++ row is compared with the Rust row it wraps.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cpp_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("cpp-")).collect();
    assert_eq!(cpp_lines.len(), 4, "{stdout}");
    assert!(cpp_lines.iter().all(|l| l.trim_end().ends_with('x')), "{stdout}");
}

#[test]
fn a_failing_cpp_program_fails_the_row_with_its_reason() {
    let dir = PrivateDir::new("freight-cli-bench-cpp-fails");
    let program = dir.path().join("freight-bench-cpp");
    std::fs::write(&program, "#!/bin/sh\necho 'error: no shared memory today' >&2\nexit 1\n").expect("a script");
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .args(["bench", "latency", "--transports", "cpp-loan", "--sizes", "8B", "--wait", "spin"])
        .env("FREIGHT_BENCH_CPP", &program)
        .output()
        .expect("run freight");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cpp-loan spin 8 B") && stderr.contains("no shared memory today"), "{stderr}");
}

/// The rows `--json` wrote.
fn rows_of(json: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(json).expect("json written")).expect("valid json")
}

/// The stderr of a run of the tool that must have succeeded.
fn succeeded(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "freight failed: {stderr}");
    stderr
}
