//! A writer and a reader in two processes on loopback: bytes arrive intact,
//! discovery sees both ends with their USER_DATA, and a writer knows its
//! matched readers.
//!
//! The test re-runs its own binary as the writer process (selected by an
//! environment variable), so no other program is needed.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight_dds::{DdsConfig, EndpointQos, Participant};

const TYPE: &str = "std_msgs::msg::dds_::UInt8MultiArray_";
const CHILD: &str = "FREIGHT_DDS_TEST_WRITER";
const CHILD_PARENT: &str = "FREIGHT_DDS_TEST_PARENT";

/// A domain of its own per test run keeps parallel runs apart; the writer
/// process gets the parent's through the environment.
fn domain() -> u32 {
    let parent = std::env::var(CHILD_PARENT).ok().and_then(|p| p.parse().ok()).unwrap_or(std::process::id());
    100 + parent % 100
}

fn payload(k: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend((0..len).map(|i| ((i * 7 + k) % 251) as u8));
    v
}

fn qos(user_data: &[u8]) -> EndpointQos {
    EndpointQos { depth: Some(16), user_data: user_data.to_vec(), ..EndpointQos::reliable(Duration::from_secs(1)) }
}

/// The writer process: waits for a reader, writes 8 samples of growing size
/// (up to 8 MiB, many fragments), then lingers so reliable repair can finish.
fn writer_main(topic: &str) {
    let p = Arc::new(Participant::new(domain(), &config()).expect("participant"));
    let w = p.create_writer(topic, TYPE, &qos(b"role=writer;"), Box::new(|| {})).expect("writer");
    let t0 = Instant::now();
    while w.matched_readers().expect("matched").is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no reader matched");
        std::thread::sleep(Duration::from_millis(10));
    }
    let readers = w.matched_readers().expect("matched");
    assert_eq!(readers[0].user_data, b"role=reader;");
    assert_eq!(readers[0].topic_name, topic);
    for k in 0..8 {
        w.write_cdr(&payload(k, 1 << (k * 3).min(23))).expect("write");
    }
    std::thread::sleep(Duration::from_secs(2));
}

#[test]
fn samples_cross_processes_intact() {
    let topic = format!("rt/freight_dds_test_{}", std::process::id());
    if let Ok(t) = std::env::var(CHILD) {
        return writer_main(&t);
    }
    let p = Arc::new(Participant::new(domain(), &config()).expect("participant"));
    let wakeups = Arc::new(AtomicUsize::new(0));
    let w2 = wakeups.clone();
    let reader = p
        .create_reader(&topic, TYPE, &qos(b"role=reader;"), Box::new(move || _ = w2.fetch_add(1, Ordering::Relaxed)))
        .expect("reader");
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args(["samples_cross_processes_intact", "--exact", "--nocapture"])
        .env(CHILD, &topic)
        .env(CHILD_PARENT, std::process::id().to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn writer");
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < 8 && t0.elapsed() < Duration::from_secs(30) {
        match reader.take().expect("take") {
            Some(s) => {
                let w = reader.matched_writer(s.publication_handle()).expect("writer known");
                assert_eq!(w.user_data, b"role=writer;");
                assert!(s.source_timestamp_ns() > 0);
                got.push(s.bytes().to_vec());
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    let snapshot = p.discovered().expect("discovery");
    assert!(child.wait().expect("writer exit").success(), "writer process failed");
    assert_eq!(got.len(), 8, "received {} of 8", got.len());
    for (k, bytes) in got.iter().enumerate() {
        let mut want = payload(k, 1 << (k * 3).min(23));
        want[3] = ((4 - want.len() % 4) % 4) as u8; // the pad count the writer announces
        assert!(
            *bytes == want,
            "sample {k} differs: {} vs {} bytes, starts {:?} vs {:?}",
            bytes.len(),
            want.len(),
            &bytes[..bytes.len().min(12)],
            &want[..12.min(want.len())]
        );
    }
    assert!(wakeups.load(Ordering::Relaxed) > 0, "the data-available callback never ran");
    let ours = snapshot.endpoints.iter().filter(|e| e.topic_name == topic).collect::<Vec<_>>();
    assert!(ours.iter().any(|e| e.is_writer && e.user_data == b"role=writer;" && e.reliable), "{ours:?}");
    assert!(ours.iter().any(|e| !e.is_writer && e.type_name == TYPE), "{ours:?}");
    let me = std::process::id();
    assert!(snapshot.participants.iter().any(|p| p.pid == Some(me) && p.hostname.is_some()), "{snapshot:?}");
}

fn config() -> DdsConfig {
    match std::env::var("FREIGHT_DDS_TEST_XML") {
        Ok(x) => DdsConfig::with_xml(x),
        Err(_) => DdsConfig::loopback(),
    }
}
