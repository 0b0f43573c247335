//! In-process frames give their memory back after a burst of large messages.
//! One test per binary: it measures this process's anonymous resident memory,
//! which other tests in the same process would disturb.

use std::time::Duration;

use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Context, QoS};

/// Kilobytes of anonymous memory this process has resident (`RssAnon`).
fn resident_anonymous_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).expect("RssAnon in /proc/self/status");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number of kB")
}

#[test]
fn a_burst_of_large_in_process_messages_does_not_stay_resident() {
    let node = Context::builder().local_only().create().unwrap().create_node("heap_memory").unwrap();
    let topic = format!("/heap_memory_{}", std::process::id());
    let publisher = node.create_publisher::<UInt8MultiArray>(&topic, QoS::keep_last(4)).unwrap();
    let subscription = node.create_subscription::<UInt8MultiArray>(&topic, QoS::keep_last(4)).unwrap();
    let round = |len: usize| {
        publisher.publish(publisher.loan(len).unwrap().write_from_fn(|i| i as u8)).unwrap();
        let got = subscription.take(Duration::from_secs(5)).unwrap().expect("the message");
        assert_eq!(got.data.len(), len);
    };
    for _ in 0..8 {
        round(4096);
    }
    let before = resident_anonymous_kib();
    for _ in 0..2 {
        round(64 << 20);
    }
    // A steady small stream again: the large frames leave the publisher's pool.
    for _ in 0..8 {
        round(4096);
    }
    let grown_mib = resident_anonymous_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 16, "{grown_mib} MiB of two 64 MiB messages stayed resident");
}
