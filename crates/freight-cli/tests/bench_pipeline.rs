//! End-to-end: `freight bench pipeline` run as a user would, small. Every row
//! checks its final matrix against the native program bit for bit, so a row
//! that completes proves the data went to every worker and back intact; how
//! fast is for BENCHMARKS.md, not for a test.

use std::process::Command;

use freight_testkit::{skip, Lack, PrivateDir};

fn freight(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_freight")).args(args).output().expect("run freight")
}

#[test]
fn every_topology_paradigm_mode_and_workload_computes_what_the_native_program_does() {
    let dir = PrivateDir::new("freight-cli-pipeline");
    let json = dir.path().join("rows.json");
    let json_arg = json.to_str().expect("a UTF-8 temporary path");
    let plot = dir.path().join("rows.png");
    let plot_arg = plot.to_str().expect("a UTF-8 temporary path");
    // Rows that do not divide by the workers: the split leaves no gap.
    let small = [
        "--runs", "1", "--frames", "3", "--rows", "13", "--cols", "17", "--gpu", "stand-in", "--json", json_arg,
        "--plot", plot_arg,
    ];
    let out = freight(&[&["bench", "pipeline"], &small[..]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight failed: {stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json rows");
    assert_eq!(rows.len(), 3 * 2 * 3 * 2, "nodes x paradigms x modes x workloads");
    for row in &rows {
        for key in ["nodes", "paradigm", "mode", "workload", "mean_ms", "sd_ms", "overhead_pct", "native_mean_ms"] {
            assert!(row.get(key).is_some(), "{key} missing in {row}");
        }
        assert!(row["mean_ms"].as_f64().is_some_and(|t| t > 0.0), "{row}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("gpu-stand-in"), "the GPU stand-in is named in the table: {stdout}");
    assert!(stdout.contains("+2640 %"), "the paper's numbers are beside ours: {stdout}");
    let png = std::fs::read(&plot).expect("the plot was written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a PNG of {} bytes", png.len());
}

/// With CUDA, GPU workers run the kernels on the device and the row still
/// ends with the native program's matrix; without it, `--gpu cuda` says why
/// and what to do. (The GPU checklist, scripts/gpu-check.sh, runs the table.)
#[test]
fn gpu_workers_run_on_cuda_or_say_why_not() {
    let args = ["bench", "pipeline", "--gpu", "cuda", "--nodes", "3", "--runs", "1", "--frames", "2", "--rows", "13"];
    let out = freight(&[&args[..], &["--cols", "300", "--modes", "shm,cuda-host,cuda"]].concat());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        assert!(stdout.contains("1 cpu + 1 gpu ") && stdout.contains("gpu: kernels on"), "{stdout}");
        assert!(stdout.contains("| cuda-host |"), "rows with the frames mapped for the GPU: {stdout}");
        assert!(stdout.contains("| cuda      |"), "rows with the frames in device memory: {stdout}");
        assert!(stderr.contains("kernel is within"), "the kernels were checked against a reference: {stderr}");
    } else {
        assert!(stderr.contains("--gpu cuda: ") && stderr.contains("use --gpu stand-in"), "{stderr}");
        skip("gpu_workers_run_on_cuda", Lack::Gpu, "no CUDA device: only the refusal was checked");
    }
}

/// `cuda` rows without a GPU: the frames in the simulated device's memory,
/// which GPU workers take as it is (each checks that its rows arrived there)
/// and everyone else receives as host copies; every run still ends with the
/// native program's matrix.
#[test]
fn frames_in_device_memory_run_on_the_simulated_device() {
    let args = ["bench", "pipeline", "--gpu", "stand-in", "--modes", "cuda", "--nodes", "3,5", "--runs", "1"];
    let out = freight(&[&args[..], &["--frames", "3", "--rows", "13", "--cols", "17"]].concat());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("| cuda |")).collect();
    assert_eq!(rows.len(), 2 * 2 * 2, "nodes x paradigms x workloads: {stdout}");
}

#[test]
fn frames_mapped_for_the_gpu_need_cuda() {
    let out = freight(&["bench", "pipeline", "--gpu", "stand-in", "--modes", "cuda-host"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--modes cuda-host needs CUDA"), "{stderr}");
}

#[test]
fn a_topology_the_paper_does_not_have_is_refused() {
    let out = freight(&["bench", "pipeline", "--nodes", "4"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--nodes 4") && stderr.contains("2, 3 or 5"), "{stderr}");
}
