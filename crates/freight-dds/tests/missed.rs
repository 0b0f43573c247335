//! A reader counts the samples DDS knows it missed: a best-effort writer in
//! another process (readers ignore their own process's writers) sends ten
//! samples to a keep-all reader with room for two that takes none; eight are
//! rejected, and `Reader::missed` says so. A reliable reader with room for two
//! rejects too, but the writer sends them again: it gets all ten and has
//! missed none.
//!
//! The test re-runs its own binary as the writer process.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight_dds::{DdsConfig, EndpointQos, Participant};

const TYPE: &str = "std_msgs::msg::dds_::UInt8MultiArray_";
const CHILD: &str = "FREIGHT_DDS_MISSED_WRITER";
const DOMAIN: &str = "FREIGHT_DDS_MISSED_DOMAIN";

fn qos(reliable: bool) -> EndpointQos {
    EndpointQos { reliable, ..EndpointQos::reliable(Duration::from_secs(1)) }
}

/// The writer process: waits for the reader, writes ten samples, lingers.
fn writer_main(topic: &str, domain: u32, reliable: bool) {
    let p = Arc::new(Participant::new(domain, &DdsConfig::loopback()).expect("participant"));
    let writer = p.create_writer(topic, TYPE, &qos(reliable), Box::new(|| {})).expect("writer");
    let t0 = Instant::now();
    while writer.matched_readers().expect("matched").is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no reader matched");
        std::thread::sleep(Duration::from_millis(10));
    }
    for k in 0..10u8 {
        writer.write_cdr(&[0, 1, 0, 0, 1, 0, 0, 0, k]).expect("write");
    }
    std::thread::sleep(Duration::from_secs(if reliable { 2 } else { 1 }));
}

/// A reader of `reliable` QoS with room for two samples, and the writer
/// process (this binary, running `test`) started.
fn reader_and_writer(test: &str, reliable: bool) -> (freight_dds::Reader, std::process::Child) {
    if let (Ok(topic), Ok(domain)) = (std::env::var(CHILD), std::env::var(DOMAIN)) {
        writer_main(&topic, domain.parse().expect("a domain id"), reliable);
        std::process::exit(0);
    }
    let domain = 100 + std::process::id() % 100;
    let topic = format!("rt/freight_dds_missed_{}_{reliable}", std::process::id());
    let p = Arc::new(Participant::new(domain, &DdsConfig::loopback()).expect("participant"));
    let reader_qos = EndpointQos { depth: None, max_samples: Some(2), ..qos(reliable) };
    let reader = p.create_reader(&topic, TYPE, &reader_qos, Box::new(|| {})).expect("reader");
    assert_eq!(reader.missed().expect("status"), 0);
    let child = Command::new(std::env::current_exe().expect("exe"))
        .args([test, "--exact", "--nocapture"])
        .env(CHILD, &topic)
        .env(DOMAIN, domain.to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn writer");
    (reader, child)
}

#[test]
fn samples_a_full_reader_rejects_are_counted_as_missed() {
    let (reader, mut child) = reader_and_writer("samples_a_full_reader_rejects_are_counted_as_missed", false);
    assert!(child.wait().expect("writer exit").success(), "writer process failed");
    let t0 = Instant::now();
    while reader.missed().expect("status") < 8 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(reader.missed().expect("status"), 8);
    let mut kept = Vec::new();
    while let Some(sample) = reader.take().expect("take") {
        kept.push(sample.bytes()[8]);
    }
    assert_eq!(kept, [0, 1]);
}

#[test]
fn a_reliable_reader_without_room_misses_nothing() {
    let (reader, mut child) = reader_and_writer("a_reliable_reader_without_room_misses_nothing", true);
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < 10 && t0.elapsed() < Duration::from_secs(10) {
        // Slowly: the writer is ahead, the reader full most of the time.
        std::thread::sleep(Duration::from_millis(50));
        if let Some(sample) = reader.take().expect("take") {
            got.push(sample.bytes()[8]);
        }
    }
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
    assert_eq!(reader.missed().expect("status"), 0);
    assert!(child.wait().expect("writer exit").success(), "writer process failed");
}
