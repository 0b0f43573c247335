//! `QoS::large_data_lossy`: the network plane tunes DDS for a large stream over a lossy
//! link by itself. What crosses the link with the tuned settings (one RTPS message per IP
//! packet: no IP fragments; 30 Hz at 20 % loss) is measured by `freight lab wireless`,
//! whose `--quick` smoke test runs in `make test` (crates/freight-cli/tests/lab.rs).
//!
//! Cyclone configures a DDS domain once per process, so each test joins a domain of its own.

use std::time::Duration;

use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Context, ContextError, CreateError, DdsConfig, History, LargeData, QoS, TuneError};

/// A domain per test and run: 150..=199 plus the test's offset, away from network.rs's.
fn domain(offset: u32) -> u32 {
    150 + (std::process::id() % 10) * 5 + offset
}

fn context(offset: u32) -> freight::ContextBuilder {
    Context::builder().domain_id(domain(offset)).dds_config(DdsConfig::loopback())
}

const KIB: u64 = 1024;

#[test]
fn the_qos_carries_the_tuners_depth_and_errors() {
    let qos = QoS::large_data_lossy(LargeData::new(30.0, 512 * KIB, 433e6)).expect("tunes");
    assert_eq!(qos.history, History::KeepLast(4));
    assert!(qos.large_data.is_some());
    // 20 % loss with a 20 s outage cannot drain within 100 ms: the tuner says which input.
    let lossy = LargeData { loss: 0.2, ..LargeData::new(30.0, 512 * KIB, 433e6) };
    let err = QoS::large_data_lossy(lossy).unwrap_err();
    assert!(matches!(err, TuneError::BudgetTooSmall { .. }), "{err:?}");
    let too_big = LargeData::new(30.0, 64 << 20, 433e6);
    assert!(matches!(QoS::large_data_lossy(too_big), Err(TuneError::LinkTooSlow { .. })));
}

#[test]
fn a_tuned_stream_joins_the_domain_with_its_settings_and_stricter_streams_are_refused() {
    let node = context(0).create().unwrap().create_node("tuned").unwrap();
    let points = QoS::large_data_lossy(LargeData::new(10.0, 512 * KIB, 433e6)).unwrap();
    // Cyclone accepts the loopback configuration with the tuned one after it.
    let publisher = node.create_publisher::<UInt8MultiArray>("/points", points).expect("tuned publisher");
    assert_eq!(publisher.qos().history, points.history);
    // The same stream again, and a plain endpoint, are served by the joined domain.
    node.create_subscription::<UInt8MultiArray>("/points", points).expect("tuned subscription");
    node.create_publisher::<UInt8MultiArray>("/plain", QoS::default()).expect("plain publisher");
    // A 30 Hz stream needs a faster heartbeat than the 10 Hz one configured.
    let faster = QoS::large_data_lossy(LargeData::new(30.0, 256 * KIB, 433e6)).unwrap();
    match node.create_publisher::<UInt8MultiArray>("/image", faster) {
        Err(CreateError::NetworkTuning { topic, short }) => {
            assert_eq!(topic, "/image");
            assert!(short.contains("heartbeat period"), "{short}");
        }
        other => panic!("expected NetworkTuning, got {other:?}"),
    }
}

#[test]
fn a_domain_joined_untuned_refuses_a_large_data_stream_unless_it_was_declared() {
    let node = context(1).create().unwrap().create_node("untuned").unwrap();
    node.create_publisher::<UInt8MultiArray>("/plain", QoS::default()).unwrap();
    let points = QoS::large_data_lossy(LargeData::new(30.0, 512 * KIB, 433e6)).unwrap();
    let err = node.create_publisher::<UInt8MultiArray>("/points", points).unwrap_err();
    assert!(err.to_string().contains("Context::builder().large_data"), "{err}");

    // Declared up front, with a second stream: both are served, whatever comes first.
    let image = LargeData::new(15.0, 256 * KIB, 433e6);
    let stream = LargeData::new(30.0, 512 * KIB, 433e6);
    let node = context(2).large_data(stream).large_data(image).create().unwrap().create_node("declared").unwrap();
    node.create_publisher::<UInt8MultiArray>("/plain", QoS::default()).unwrap();
    node.create_publisher::<UInt8MultiArray>("/points", points).expect("declared stream");
    node.create_publisher::<UInt8MultiArray>("/image", QoS::large_data_lossy(image).unwrap()).expect("declared image");
}

#[test]
fn a_declared_stream_that_cannot_be_tuned_fails_the_context() {
    let bad = LargeData { mtu: 500, ..LargeData::new(30.0, 512 * KIB, 433e6) };
    match context(3).large_data(bad).create() {
        Err(ContextError::Tune(e)) if matches!(*e, TuneError::MtuTooSmall { mtu: 500 }) => {}
        other => panic!("expected the tuner's MTU error, got {other:?}"),
    }
}

#[test]
fn the_local_plane_caps_a_long_tuned_history_at_the_contexts_depth() {
    // 20 % loss without an outage: N_HC 18, above the default queue limit of 16.
    let lossy = LargeData { loss: 0.2, outage: Duration::ZERO, ..LargeData::new(30.0, 512 * KIB, 433e6) };
    let qos = QoS::large_data_lossy(lossy).unwrap();
    assert!(matches!(qos.history, History::KeepLast(n) if n > 16), "{:?}", qos.history);
    let node = context(4).create().unwrap().create_node("long").unwrap();
    node.create_subscription::<UInt8MultiArray>("/points", qos).expect("capped on shared memory");
}
