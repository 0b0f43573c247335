//! The C++ examples (`examples/cpp`) build against the installed package as
//! a user's project does, and every mode of each runs, with smaller sizes
//! than their defaults: every element and point checked by the programs.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ok, Program};

#[test]
fn the_cpp_examples_build_against_the_installed_package_and_run_in_every_mode() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = std::env::temp_dir().join(format!("freight-c-examples-{}", std::process::id()));
    let (prefix, build) = (work.join("prefix"), work.join("build"));
    common::install(&prefix);
    common::cmake_build(&repo.join("examples/cpp"), &build, &prefix);
    let (array, pipeline) = (build.join("uint64_array"), build.join("pointcloud_pipeline"));

    // The Qiita experiment, 1 M elements: in one process the message is handed over.
    let out = ok("uint64_array inproc", Command::new(&array).args(["inproc", "1000000", "3"]).output().unwrap());
    assert_eq!(out.matches(" elements via intra (cpu), fill ").count(), 3, "{out}");
    assert!(out.contains("message 2: 1000000 elements") && !out.contains("WRONG"), "{out}");
    // Between two processes, through shared memory.
    let mut sub = Program::start(&array, &["sub", "3"]);
    assert_eq!(sub.line(), "READY\n");
    ok("uint64_array pub", Command::new(&array).args(["pub", "1000000", "3"]).output().unwrap());
    let out = sub.finish("uint64_array sub");
    assert_eq!(out.matches(" elements via shm (shm), publish -> callback ").count(), 3, "{out}");

    // The point-cloud pipeline, 100,000 points (1.6 MB): three nodes in one process ...
    let out =
        ok("pointcloud_pipeline inproc", Command::new(&pipeline).args(["inproc", "100000", "3"]).output().unwrap());
    assert_eq!(out.matches(" via intra, camera -> here ").count(), 3, "{out}");
    assert_eq!(out.matches(": 50000 points via intra").count(), 3, "{out}");
    assert!(!out.contains("WRONG"), "{out}");
    // ... and one process per node.
    let mut consumer = Program::start(&pipeline, &["consumer", "3"]);
    assert_eq!(consumer.line(), "READY\n");
    let mut preprocess = Program::start(&pipeline, &["preprocess", "3"]);
    assert_eq!(preprocess.line(), "READY\n");
    ok("pointcloud_pipeline camera", Command::new(&pipeline).args(["camera", "100000", "3"]).output().unwrap());
    let cropped = preprocess.finish("pointcloud_pipeline preprocess");
    assert_eq!(cropped.matches(" MB via shm, camera -> here ").count(), 3, "{cropped}");
    let consumed = consumer.finish("pointcloud_pipeline consumer");
    assert_eq!(consumed.matches(": 50000 points via shm, preprocess -> here ").count(), 3, "{consumed}");
    assert!(!consumed.contains("WRONG"), "{consumed}");

    // The robot arm (seed 000's CPU path): renderer and display processes, both
    // transports, every pixel checked against the renderer's checksum.
    let arm = build.join("robot_arm");
    let out = ok(
        "robot_arm compare",
        Command::new(&arm).args(["compare", "--seconds", "1", "--resolutions", "640x480"]).output().unwrap(),
    );
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("| 640x480 |")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].contains("| shm (shm) |") && rows[1].contains("| copy (shm) |"), "{out}");
    assert!(rows.iter().all(|r| r.ends_with("| all match |")), "{out}");
    let _ = std::fs::remove_dir_all(&work);
}
