//! The tuner's formulas at their edges: each test names the behaviour it proves.

use std::time::Duration;

use freight_tune::{tune, Inputs, TuneError, MAX_DATAGRAM, MAX_MTU, MIN_MTU};

/// The issue's example: 512 KiB at 30 Hz over 433 Mbit/s, defaults otherwise.
fn example() -> Inputs {
    Inputs::new(30.0, 512 << 10, 433e6)
}

#[test]
fn issue_example_gives_one_packet_messages_fast_repair_and_a_drainable_history() {
    let p = tune(&example()).unwrap();
    assert_eq!((p.max_message_size, p.fragment_size, p.packets_per_sample), (1472, 1344, 391));
    assert_eq!(p.heartbeat_period, Duration::from_nanos(16_666_667));
    assert_eq!(p.repair_rounds, 2);
    assert_eq!(p.depth_for_repair, 2);
    assert_eq!(p.depth_for_budget, Some(6));
    assert_eq!(p.history_depth, 4);
    assert!(p.drain_time <= Duration::from_millis(100), "{:?}", p.drain_time);
    assert_eq!(p.lease, Duration::from_secs(30));
    assert!((p.stream_bps / 1e6 - 142.2).abs() < 0.1, "{}", p.stream_bps);
}

#[test]
fn history_always_outlives_the_repair_it_needs() {
    for loss in [0.0, 0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.45] {
        for payload in [8, 1000, 64 << 10, 512 << 10, 4 << 20] {
            let mut i = Inputs::new(30.0, payload, 10e9);
            (i.loss, i.outage) = (loss, Duration::ZERO);
            let p = tune(&i).unwrap();
            let needed = p.repair_round.as_secs_f64() * f64::from(p.repair_rounds);
            assert!(p.history_lifetime.as_secs_f64() + 1e-9 >= needed, "loss {loss} payload {payload}: {p:?}");
            assert!(p.history_depth >= p.depth_for_repair);
        }
    }
}

#[test]
fn tiny_payload_is_one_packet_and_one_round_without_loss() {
    let mut i = Inputs::new(100.0, 1, 10e6);
    i.loss = 0.0;
    let p = tune(&i).unwrap();
    assert_eq!(p.packets_per_sample, 1);
    assert_eq!(p.sample_bytes, 5);
    assert_eq!(p.repair_rounds, 1, "even lossless links drop packets in full receive buffers");
    assert!(p.history_depth >= 1);
    assert_eq!(p.socket_buffer_min, 1 << 20, "never below Cyclone's default 1 MiB");
}

#[test]
fn payload_of_exactly_one_fragment_and_one_byte_more() {
    let i = Inputs::new(30.0, 1344 - 4, 433e6);
    assert_eq!(tune(&i).unwrap().packets_per_sample, 1);
    let i = Inputs::new(30.0, 1344 - 3, 433e6);
    assert_eq!(tune(&i).unwrap().packets_per_sample, 2);
}

#[test]
fn payload_larger_than_one_message_is_split_into_fragments_of_the_mtu() {
    for mtu in [MIN_MTU, 1500, 9000, MAX_MTU] {
        let mut i = Inputs::new(10.0, 1 << 20, 1e9);
        i.mtu = mtu;
        let p = tune(&i).unwrap();
        assert_eq!(p.max_message_size, (mtu - 28).min(MAX_DATAGRAM), "at most the largest datagram");
        assert!(p.fragment_size + 128 <= p.max_message_size && p.fragment_size.is_multiple_of(4));
        assert_eq!(p.packets_per_sample, ((1 << 20) + 4u64).div_ceil(u64::from(p.fragment_size)));
    }
}

#[test]
fn zero_loss_has_no_resend_overhead() {
    let mut i = example();
    i.loss = 0.0;
    let p = tune(&i).unwrap();
    assert_eq!(p.loss_factor, 1.0);
    assert_eq!(p.repair_rounds, 1);
}

#[test]
fn loss_near_one_is_refused_with_the_input_named() {
    for loss in [0.5, 0.99, 1.0, -0.01, f64::NAN] {
        let mut i = example();
        i.loss = loss;
        let err = tune(&i).unwrap_err();
        assert!(matches!(err, TuneError::LossOutOfRange { .. }), "{loss}: {err}");
        assert!(err.to_string().contains("--loss"), "{err}");
    }
    let mut i = example();
    (i.loss, i.outage) = (0.49, Duration::ZERO);
    assert!(tune(&i).is_ok(), "just under the limit still tunes");
}

#[test]
fn a_stream_the_link_cannot_carry_names_the_rate_that_fits() {
    let err = tune(&Inputs::new(30.0, 512 << 10, 100e6)).unwrap_err();
    let TuneError::LinkTooSlow { max_rate_hz, max_payload_bytes, .. } = err.clone() else { panic!("{err}") };
    let text = err.to_string();
    assert!(text.contains("--rate") && text.contains("--payload") && text.contains("--link"), "{text}");
    // Its advice works: just under the suggested rate or payload the stream fits the link.
    let mut at_rate = Inputs::new(max_rate_hz * 0.999, 512 << 10, 100e6);
    at_rate.outage = Duration::ZERO;
    assert!(tune(&at_rate).is_ok());
    let mut at_size = Inputs::new(30.0, max_payload_bytes.saturating_sub(2000), 100e6);
    at_size.outage = Duration::ZERO;
    assert!(tune(&at_size).is_ok(), "{max_payload_bytes}");
}

#[test]
fn a_link_barely_enough_carries_the_stream_but_no_outage_backlog() {
    let need = tune(&example()).unwrap().stream_bps;
    let mut i = example();
    i.link_bps = need * 1.001;
    // The stream fits, but its spare capacity drains nothing within 100 ms after an outage:
    let err = tune(&i).unwrap_err();
    assert!(matches!(err, TuneError::BudgetTooSmall { depth_for_budget: 0, .. }), "{err}");
    assert!(err.to_string().contains("--latency-budget"), "{err}");
    // Without an outage to ride through it tunes, on repair timing alone.
    i.outage = Duration::ZERO;
    let p = tune(&i).unwrap();
    assert!(p.spare_bps > 0.0 && p.depth_for_budget.is_none());
    // And exactly at the link rate it does not fit at all.
    i.link_bps = need;
    assert!(matches!(tune(&i), Err(TuneError::LinkTooSlow { .. })));
}

#[test]
fn zero_outage_leaves_no_backlog_and_the_default_lease() {
    let mut i = example();
    i.outage = Duration::ZERO;
    let p = tune(&i).unwrap();
    assert_eq!(p.outage_samples, 0);
    assert_eq!(p.depth_for_budget, None);
    assert_eq!(p.drain_time, Duration::ZERO);
    assert_eq!(p.history_depth, 2 * p.depth_for_repair);
    assert_eq!(p.lease, Duration::from_secs(10));
}

#[test]
fn a_short_outage_does_not_bound_the_depth() {
    let mut i = example();
    i.outage = Duration::from_millis(100); // 3 samples, which drain within the budget
    let p = tune(&i).unwrap();
    assert_eq!(p.outage_samples, 3);
    assert_eq!(p.depth_for_budget, None);
    assert!(p.drain_time <= i.latency_budget);
}

#[test]
fn lease_outlives_the_outage() {
    for secs in [1, 7, 20, 60, 600] {
        let mut i = example();
        i.outage = Duration::from_secs(secs);
        let p = tune(&i).unwrap();
        assert!(p.lease > i.outage && p.lease >= Duration::from_secs(10));
        assert!(p.lease_announcement <= Duration::from_secs(3));
    }
}

#[test]
fn an_unsatisfiable_budget_says_what_budget_or_outage_would_work() {
    let mut i = example();
    i.loss = 0.2;
    let err = tune(&i).unwrap_err();
    let TuneError::BudgetTooSmall { budget_needed, max_outage, depth_for_repair, .. } = err.clone() else {
        panic!("{err}")
    };
    assert_eq!(depth_for_repair, 9);
    assert!(err.to_string().contains("--latency-budget") && err.to_string().contains("--outage"));
    let mut fixed = i.clone();
    fixed.latency_budget = budget_needed;
    assert_eq!(tune(&fixed).unwrap().history_depth, 9, "the suggested budget admits the repair depth");
    let mut fixed = i.clone();
    fixed.outage = max_outage;
    assert!(tune(&fixed).is_ok(), "the suggested outage fits the budget");
}

/// Makes one input bad.
type Spoil = fn(&mut Inputs);

#[test]
fn bad_inputs_name_the_input_to_change() {
    let cases: [(Spoil, &str); 9] = [
        (|i| i.rate_hz = 0.0, "--rate"),
        (|i| i.rate_hz = -30.0, "--rate"),
        (|i| i.rate_hz = f64::INFINITY, "--rate"),
        (|i| i.payload_bytes = 0, "--payload"),
        (|i| i.link_bps = 0.0, "--link"),
        (|i| i.mtu = 575, "--mtu"),
        (|i| i.latency_budget = Duration::ZERO, "--latency-budget"),
        (|i| i.heartbeats_per_sample = 0.5, "--heartbeats-per-sample"),
        (|i| i.topic = "points with spaces".into(), "--topic"),
    ];
    for (spoil, flag) in cases {
        let mut i = example();
        spoil(&mut i);
        let err = tune(&i).unwrap_err().to_string();
        assert!(err.contains(flag), "{flag}: {err}");
    }
    let mut i = example();
    i.mtu = MIN_MTU;
    assert!(tune(&i).is_ok(), "MTU 576 itself is accepted");
}
