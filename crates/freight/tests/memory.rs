//! Shared memory stays bounded while large messages flow. One test per binary:
//! it measures this process's resident shared memory, which other tests in the
//! same process would disturb.

use std::time::Duration;

use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Buffer, Context, QoS};

/// Kilobytes of shared memory this process has resident (`RssShmem`).
fn resident_shared_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status.lines().find(|l| l.starts_with("RssShmem:")).expect("RssShmem in /proc/self/status");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number of kB")
}

#[test]
fn publishing_large_messages_reuses_shared_memory_instead_of_growing_it() {
    const SIZE: usize = 16 << 20;
    let node = Context::new().unwrap().create_node("memory").unwrap();
    let topic = format!("/memory_{}", std::process::id());
    // Transient local sends through shared memory even inside one process.
    let qos = QoS::keep_last(1).transient_local();
    let publisher = node.create_publisher::<UInt8MultiArray>(&topic, qos).unwrap();
    let subscription = node.create_subscription::<UInt8MultiArray>(&topic, qos).unwrap();
    let msg = UInt8MultiArray { data: Buffer::from(vec![3u8; SIZE]), ..Default::default() };
    let round = || {
        publisher.publish_copy(&msg).unwrap();
        let got = subscription.take(Duration::from_secs(5)).unwrap().expect("the message");
        assert_eq!(got.data.len(), SIZE);
    };
    for _ in 0..4 {
        round();
    }
    let before = resident_shared_kib();
    for _ in 0..24 {
        round();
    }
    let grown_mib = resident_shared_kib().saturating_sub(before) / 1024;
    // A publisher keeps Limits::max_history (1) message for late joiners and
    // one in flight; every further message must reuse their memory.
    assert!(grown_mib < 2 * (SIZE >> 20) as u64, "shared memory grew by {grown_mib} MiB over 24 messages of 16 MiB");
}
