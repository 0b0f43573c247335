//! `freight bench record` end to end, baseline included: a short run whose stock rclpy + mcap
//! row really recorded, checked by reading the baseline's file back with Foxglove's `mcap`
//! reader and its ROS 2 decoder in the project's `.venv` (against the schema the file
//! carries), not by trusting the row's counts. It needs root (the baseline runs in a private
//! network namespace) and the `.venv-ros-jazzy` that `make test` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use freight_testkit::{skip, Lack, PrivateDir};
use serde_json::Value;

/// The workspace root: the command's default interpreter path is relative to it.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads an .mcap with the mcap reader and prints what the test checks, as JSON: the
/// profile, each schema and channel, and per message its decoded image fields.
const READ_BACK: &str = r#"
import json, sys
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
with open(sys.argv[1], "rb") as f:
    reader = make_reader(f, decoder_factories=[DecoderFactory()])
    header = reader.get_header()
    messages = []
    for schema, channel, message, image in reader.iter_decoded_messages():
        messages.append({
            "schema": schema.name, "schema_encoding": schema.encoding,
            "message_encoding": channel.message_encoding, "topic": channel.topic,
            "log_time": message.log_time, "sec": image.header.stamp.sec,
            "width": image.width, "height": image.height, "encoding": image.encoding,
            "len": len(image.data), "head": list(image.data[:3]), "tail": image.data[-1],
        })
print(json.dumps({"profile": header.profile, "messages": messages}))
"#;

#[test]
fn the_baseline_row_records_a_bag_that_the_mcap_reader_reads_back() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("freight bench record --baseline", Lack::Setup, "needs root (a private network namespace)");
    }
    let jazzy = repo().join(".venv-ros-jazzy/bin/python");
    if !jazzy.exists() {
        return skip("freight bench record --baseline", Lack::Setup, "no .venv-ros-jazzy (make test installs it)");
    }
    let dir = PrivateDir::new("freight-bench-record-test");
    let json = dir.path().join("rows.json");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .current_dir(repo())
        .args(["bench", "record", "--baseline", "--keep-bags", "--streams", "4k", "--rates", "2"])
        .args(["--seconds", "1", "--disk-bytes", "64MiB", "--dir"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run freight bench record");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "freight bench record failed:\n{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON")).expect("it parses");
    let rows = doc["rows"].as_array().expect("rows");
    let row = |recorder: &str| {
        rows.iter().find(|r| r["recorder"] == recorder).unwrap_or_else(|| panic!("no {recorder} row: {doc}"))
    };
    let (freight, stock) = (row("freight"), row("rclpy-mcap"));
    for r in [freight, stock] {
        assert_eq!((r["stream"].as_str(), r["rate_hz"].as_f64()), (Some("four-k"), Some(2.0)), "{r}");
        assert_eq!(r["published"], 2, "{r}");
    }
    let recorded = stock["recorded"].as_u64().expect("a count");
    assert!(recorded > 0, "the baseline recorded nothing: {stock}");
    assert!(stock["recorded_mb_s"].as_f64().is_some_and(|v| v > 0.0), "{stock}");
    assert!(stock["recorder_peak_mib"].as_u64().is_some_and(|v| v > 0), "{stock}");
    assert!(Path::new(freight["bag"].as_str().expect("freight's bag kept")).is_dir(), "{freight}");
    // freight's recorder splits its peak: private (cache, buffers) within the whole.
    let private = freight["recorder_private_mib"].as_u64().expect("freight's private peak");
    assert!(private > 0 && private <= freight["recorder_peak_mib"].as_u64().unwrap_or(0), "{freight}");

    let bag = stock["bag"].as_str().expect("the baseline's bag kept");
    let read = Command::new(repo().join(".venv/bin/python"))
        .args(["-c", READ_BACK, bag])
        .output()
        .expect("run .venv/bin/python (make test installs it)");
    assert!(read.status.success(), "the mcap reader failed on {bag}:\n{}", String::from_utf8_lossy(&read.stderr));
    let back: Value = serde_json::from_slice(&read.stdout).expect("the reader's JSON");
    assert_eq!(back["profile"], "ros2");
    let messages = back["messages"].as_array().expect("messages");
    assert_eq!(messages.len() as u64, recorded, "the file holds what the row counted: {}", stdout);
    let mut last_time = 0;
    for m in messages {
        assert_eq!(m["schema"], "sensor_msgs/msg/Image");
        assert_eq!(m["schema_encoding"], "ros2msg");
        assert_eq!(m["message_encoding"], "cdr");
        // One topic per run (the run's pid): tests run at once share /dev/shm.
        assert!(m["topic"].as_str().is_some_and(|t| t.starts_with("/freight_bench_record_")), "{m}");
        assert_eq!((m["width"].as_u64(), m["height"].as_u64()), (Some(3840), Some(2160)), "{m}");
        assert_eq!(m["encoding"], "bgra8");
        // The publisher's pattern, byte i = i % 251, over all 33,177,600 bytes.
        assert_eq!(m["len"], 3840 * 2160 * 4);
        assert_eq!(m["head"], serde_json::json!([0, 1, 2]));
        assert_eq!(m["tail"], (3840 * 2160 * 4 - 1) % 251);
        let log_time = m["log_time"].as_u64().expect("log_time");
        assert!(log_time >= last_time, "receive times go forward: {m}");
        last_time = log_time;
    }
    let stamps: Vec<u64> = messages.iter().filter_map(|m| m["sec"].as_u64()).collect();
    assert_eq!(stamps, (0..recorded).collect::<Vec<_>>(), "the sequence numbers, in order");
    assert!(stdout.contains("rclpy + mcap 2 Hz") || stock["lost"] != 0, "{stdout}");
}

#[test]
fn no_baseline_says_so() {
    let dir = PrivateDir::new("freight-bench-record-test");
    let out = Command::new(env!("CARGO_BIN_EXE_freight"))
        .current_dir(repo())
        .args(["bench", "record", "--no-baseline", "--streams", "4k", "--rates", "2"])
        .args(["--seconds", "0.5", "--disk-bytes", "16MiB", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run freight bench record");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("baseline (stock rclpy + mcap): not run: --no-baseline"), "{stdout}");
    assert!(!stdout.contains("| rclpy + mcap |"), "{stdout}");
}
