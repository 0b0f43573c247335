//! Behaviour inside one process: intra-process zero copy, QoS, negotiation,
//! executor and wait-set, and the errors bad arguments get.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight::msgs::builtin_interfaces::Time;
use freight::msgs::sensor_msgs::{Image, PointCloud2};
use freight::msgs::std_msgs::Header;
use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{
    BackendKind, BackendSet, Buffer, Context, ContextBuilder, CreateError, Executor, Limits, LoanError, Message,
    PublishError, PublisherOptions, QoS, SubscriptionOptions, TakeError, Transport, WaitMode, WaitOutcome, WaitSet,
};
use freight_testkit::{skip, Lack};

const T: Duration = Duration::from_secs(2);

fn topic(name: &str) -> String {
    format!("/test_{}_{name}", std::process::id())
}

fn node(name: &str) -> freight::Node {
    Context::new().unwrap().create_node(name).unwrap()
}

#[test]
fn intra_process_subscriptions_share_the_publishers_buffer() {
    let n = node("intra");
    let t = topic("intra");
    let subs: Vec<_> = (0..3).map(|_| n.create_subscription::<UInt8MultiArray>(&t, 5).unwrap()).collect();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, 5).unwrap();
    let loan = publisher.loan(1 << 20).unwrap();
    assert_eq!(loan.backend(), BackendKind::Cpu, "nobody outside this process listens: heap memory");
    publisher.publish(loan.write_from_fn(|i| (i % 256) as u8)).unwrap();
    let got: Vec<_> = subs.iter().map(|s| s.take(T).unwrap().expect("message")).collect();
    let addr = got[0].data.as_bytes().unwrap().as_ptr();
    for s in &got {
        assert_eq!(s.info().transport, Transport::Intra);
        assert_eq!(s.backend(), BackendKind::Cpu);
        assert_eq!(s.data.as_bytes().unwrap().as_ptr(), addr, "every subscription sees the same memory");
        assert_eq!(s.data.as_bytes().unwrap()[1000], (1000 % 256) as u8);
    }
}

#[test]
fn a_loan_is_handed_over_as_it_is_with_its_small_fields_sequence_and_time() {
    // Every reader in this process: the message itself goes to the queues,
    // nothing encoded (the frame path would write and read back the same).
    let n = node("handover");
    let t = topic("handover");
    let subs: Vec<_> = (0..2).map(|_| n.create_subscription::<Image>(&t, 5).unwrap()).collect();
    let publisher = n.create_publisher::<Image>(&t, 5).unwrap();
    let before = freight::clock::monotonic_ns();
    let mut addrs = Vec::new();
    for k in 0..3u8 {
        let mut loan = publisher.loan(12).unwrap();
        addrs.push(loan.buffer_uninit_mut(0).unwrap().as_ptr() as usize);
        let mut img = loan.write_from_fn(|i| i as u8 + k);
        img.header.frame_id = format!("cam{k}");
        img.encoding = "mono8".into();
        (img.width, img.height, img.step) = (4, 3, 4);
        publisher.publish(img).unwrap();
    }
    let mut publisher_ids = std::collections::HashSet::new();
    for sub in &subs {
        for k in 0..3u8 {
            let s = sub.take(T).unwrap().expect("message");
            publisher_ids.insert(s.info().publisher_id);
            assert_eq!((s.header.frame_id.as_str(), s.encoding.as_str()), (format!("cam{k}").as_str(), "mono8"));
            assert_eq!((s.width, s.height, s.step), (4, 3, 4));
            assert_eq!(s.data.as_bytes().unwrap(), &(0..12u8).map(|i| i + k).collect::<Vec<_>>()[..]);
            assert_eq!(s.data.as_bytes().unwrap().as_ptr() as usize, addrs[k as usize], "the loan's own memory");
            let info = s.info();
            assert_eq!((info.sequence, info.transport, info.backend), (k as u64, Transport::Intra, BackendKind::Cpu));
            assert!(info.publish_time_ns >= before);
        }
    }
    assert_eq!(publisher_ids.len(), 1, "one publisher, one id");
}

freight::message! {
    /// `std_msgs/Header` declared again, as a crate that generates its own
    /// `.msg` types has it: another Rust type, the same ROS type and hash.
    pub struct OwnHeader = "std_msgs/msg/Header" {
        pub stamp: Time,
        pub frame_id: String,
    }
}

#[test]
fn a_loan_reaches_a_subscription_of_another_rust_type_of_the_same_ros_type() {
    // Not handed over as a `Sample<OwnHeader>` (the subscription takes
    // `Header`): sent as a frame, which both read.
    assert_eq!(OwnHeader::TYPE_HASH, Header::TYPE_HASH);
    let n = node("two_rust_types");
    let t = topic("two_rust_types");
    let theirs = n.create_subscription::<Header>(&t, 5).unwrap();
    let ours = n.create_subscription::<OwnHeader>(&t, 5).unwrap();
    let publisher = n.create_publisher::<OwnHeader>(&t, 5).unwrap();
    let mut msg = publisher.loan_buffers(&[]).unwrap().write_from_fn(|_| 0);
    msg.frame_id = "base_link".into();
    msg.stamp.sec = 7;
    publisher.publish(msg).unwrap();
    let got = theirs.take(T).unwrap().expect("message");
    assert_eq!((got.frame_id.as_str(), got.stamp.sec), ("base_link", 7));
    assert_eq!(ours.take(T).unwrap().expect("message").frame_id, "base_link");
}

#[test]
fn publish_copy_delivers_every_field() {
    let n = node("copy");
    let t = topic("copy");
    let sub = n.create_subscription::<Image>(&t, 5).unwrap();
    let publisher = n.create_publisher::<Image>(&t, 5).unwrap();
    let img = Image {
        height: 2,
        width: 3,
        encoding: "rgb8".into(),
        step: 9,
        data: Buffer::from((0..18u8).collect::<Vec<_>>()),
        ..Default::default()
    };
    publisher.publish_copy(&img).unwrap();
    let got = sub.take(T).unwrap().unwrap();
    assert_eq!(*got, img);
}

#[test]
fn publish_copy_hands_each_in_process_subscription_a_copy_that_is_not_the_publishers() {
    // Every reader in this process and of the type: the message goes as it
    // is, its buffers copied once (aligned for their elements) and shared by
    // the subscriptions' copies; the publisher's own buffer stays its own.
    let n = node("copy_handover");
    let t = topic("copy_handover");
    let subs: Vec<_> = (0..2).map(|_| n.create_subscription::<DepthWithConfidence>(&t, 5).unwrap()).collect();
    let publisher = n.create_publisher::<DepthWithConfidence>(&t, 5).unwrap();
    let mut msg = DepthWithConfidence {
        width: 3,
        depth: Buffer::from(vec![0.5f32, 1.5, 2.5]),
        label: "copied".into(),
        confidence: Buffer::from(vec![7u8, 8]),
    };
    for k in 0..2u8 {
        msg.confidence.get_mut().expect("the publisher's buffer is still only its own")[0] = k;
        publisher.publish_copy(&msg).unwrap();
    }
    let mut seen = Vec::new();
    for sub in &subs {
        for k in 0..2u8 {
            let s = sub.take(T).unwrap().expect("message");
            assert_eq!((s.width, s.label.as_str()), (3, "copied"));
            assert_eq!(s.depth.as_slice().unwrap(), &[0.5, 1.5, 2.5]);
            assert_eq!(s.confidence.as_slice().unwrap(), &[k, 8]);
            let (info, at) = (s.info(), s.confidence.as_bytes().unwrap().as_ptr() as usize);
            assert_eq!((info.sequence, info.transport), (k as u64, Transport::Intra));
            assert_ne!(at, msg.confidence.as_bytes().unwrap().as_ptr() as usize, "a copy, not the publisher's memory");
            seen.push((k, at));
        }
    }
    assert_eq!(seen[0], seen[2], "both subscriptions view one copy of message 0");
    // A message without buffers goes the same way.
    let headers = n.create_subscription::<Header>(&topic("copy_handover_small"), 5).unwrap();
    let small = n.create_publisher::<Header>(&topic("copy_handover_small"), 5).unwrap();
    small.publish_copy(&Header { frame_id: "small".into(), ..Default::default() }).unwrap();
    assert_eq!(headers.take(T).unwrap().expect("message").frame_id, "small");
}

#[test]
fn messages_of_any_size_arrive_in_order_including_empty_ones() {
    let n = node("sizes");
    let t = topic("sizes");
    let sub = n.create_subscription::<UInt8MultiArray>(&t, 10).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, 10).unwrap();
    for len in [0usize, 1, 1 << 20, 3, 72_000_000, 1 << 20] {
        let mut m = publisher.loan(len).unwrap().write_from_fn(|i| (i % 7) as u8);
        m.layout.data_offset = len as u32;
        publisher.publish(m).unwrap();
        let got = sub.take(T).unwrap().unwrap();
        assert_eq!(got.data.len(), len);
        assert_eq!(got.layout.data_offset, len as u32);
        if len > 0 {
            assert_eq!(got.data.as_bytes().unwrap()[len - 1], ((len - 1) % 7) as u8);
        }
    }
}

#[test]
fn best_effort_publisher_never_waits_for_a_slow_subscription() {
    let n = node("slow_be");
    let t = topic("slow_be");
    let _slow = n.create_subscription::<UInt8MultiArray>(&t, QoS::sensor_data()).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, QoS::sensor_data()).unwrap();
    let start = Instant::now();
    for _ in 0..100 {
        publisher.publish(publisher.loan(16).unwrap().write_from_fn(|_| 1)).unwrap();
    }
    assert!(start.elapsed() < Duration::from_secs(1), "took {:?}", start.elapsed());
}

/// A node whose keep-all queues hold `depth` messages.
fn node_with_depth(name: &str, depth: usize) -> freight::Node {
    let limits = Limits { max_depth: depth, ..Default::default() };
    ContextBuilder::default().limits(limits).create().unwrap().create_node(name).unwrap()
}

#[test]
fn a_full_keep_last_queue_keeps_the_newest_and_never_slows_a_reliable_publisher() {
    // rclpy's and rclcpp's default profile (reliable, keep last) on both sides,
    // a subscription that does not take: as a Fast DDS writer's keep-last
    // history, the queue keeps the newest and the publisher never waits.
    let n = node("slow_keep_last");
    let t = topic("slow_keep_last");
    let slow = n.create_subscription::<UInt8MultiArray>(&t, QoS::keep_last(2)).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, QoS::keep_last(2)).unwrap();
    let start = Instant::now();
    for i in 0..100u8 {
        publisher.publish(publisher.loan(8).unwrap().write_from_fn(|_| i)).unwrap();
    }
    assert!(start.elapsed() < Duration::from_secs(1), "100 publishes took {:?}", start.elapsed());
    let got: Vec<u8> = std::iter::from_fn(|| slow.try_take().unwrap()).map(|s| s.data.as_bytes().unwrap()[0]).collect();
    assert_eq!(got, [98, 99]);
    // A keep-all publisher does not wait for a keep-last queue either.
    let keep_all = n.create_publisher::<UInt8MultiArray>(&t, QoS::keep_all()).unwrap();
    for i in 0..100u8 {
        keep_all.publish(keep_all.loan(8).unwrap().write_from_fn(|_| i)).unwrap();
    }
}

#[test]
fn a_keep_all_publisher_reports_a_full_keep_all_queue_after_its_blocking_time() {
    let n = node_with_depth("slow_rel", 2);
    let t = topic("slow_rel");
    let qos = QoS::keep_all().with_max_blocking_time(Duration::from_millis(50));
    let slow = n.create_subscription::<UInt8MultiArray>(&t, qos).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, qos).unwrap();
    for _ in 0..2 {
        publisher.publish(publisher.loan(8).unwrap().write_from_fn(|_| 1)).unwrap();
    }
    let start = Instant::now();
    let err = publisher.publish(publisher.loan(8).unwrap().write_from_fn(|_| 1)).unwrap_err();
    assert!(matches!(err, PublishError::QueueFull { subscribers: 1 }), "{err}");
    assert!(start.elapsed() >= Duration::from_millis(50));
    // The subscription still has what was accepted.
    assert!(slow.try_take().unwrap().is_some());
    assert!(slow.try_take().unwrap().is_some());
}

#[test]
fn a_keep_all_publisher_waiting_for_room_is_woken_by_the_take_that_makes_it() {
    let n = node_with_depth("woken", 1);
    let t = topic("woken");
    // Room comes after 100 ms; the blocking time is far longer, so a publish
    // that returns before it was woken by the take, not by its timeout.
    let blocking = Duration::from_secs(20);
    let qos = QoS::keep_all().with_max_blocking_time(blocking);
    let sub = n.create_subscription::<UInt8MultiArray>(&t, qos).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, qos).unwrap();
    publisher.publish(publisher.loan(8).unwrap().write_from_fn(|_| 1)).unwrap();
    let start = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            assert!(sub.try_take().unwrap().is_some());
        });
        publisher.publish(publisher.loan(8).unwrap().write_from_fn(|_| 2)).unwrap();
    });
    assert!(start.elapsed() < blocking / 2, "the publisher waited {:?} for room", start.elapsed());
    assert_eq!(sub.try_take().unwrap().expect("the second message").data.as_bytes().unwrap()[0], 2);
}

#[test]
fn transient_local_late_joiner_gets_the_last_n() {
    let limits = Limits { max_history: 3, ..Default::default() };
    let n = ContextBuilder::default().limits(limits).create().unwrap().create_node("latch").unwrap();
    let t = topic("latch");
    let qos = QoS::keep_last(3).transient_local();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, qos).unwrap();
    for i in 0..5u8 {
        publisher.publish(publisher.loan(1).unwrap().write_from_fn(|_| i)).unwrap();
    }
    let late = n.create_subscription::<UInt8MultiArray>(&t, qos).unwrap();
    let got: Vec<u8> = std::iter::from_fn(|| late.take(Duration::from_millis(200)).unwrap())
        .map(|s| s.data.as_bytes().unwrap()[0])
        .collect();
    assert_eq!(got, vec![2, 3, 4]);
    let volatile = n.create_subscription::<UInt8MultiArray>(&t, QoS::keep_last(3)).unwrap();
    assert!(volatile.take(Duration::from_millis(100)).unwrap().is_none(), "volatile gets no history");
}

#[test]
fn fake_device_buffers_reach_accepting_subscriptions_and_host_copies_reach_the_rest() {
    let n = node("fakedev");
    let t = topic("fakedev");
    let device_ok = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let cpu_only = SubscriptionOptions { accepted_backends: Some(BackendSet::CPU_ONLY), ..Default::default() };
    let dev_sub = n.create_subscription_with_options::<UInt8MultiArray>(&t, 5, device_ok).unwrap();
    let cpu_sub = n.create_subscription_with_options::<UInt8MultiArray>(&t, 5, cpu_only).unwrap();
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = n.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options).unwrap();
    let mut loan = publisher.loan(4096).unwrap();
    assert_eq!(loan.backend(), BackendKind::FakeDevice);
    assert!(loan.buffer_uninit_mut(0).is_none(), "device memory is not host-addressable");
    let payload: Vec<u8> = (0..4096).map(|i| (i * 7 % 256) as u8).collect();
    publisher.publish(loan_write(&mut loan, &payload).then(|| unsafe { loan.assume_init() }).unwrap()).unwrap();

    let dev = dev_sub.take(T).unwrap().unwrap();
    assert_eq!(dev.backend(), BackendKind::FakeDevice);
    assert!(dev.data.as_bytes().is_none());
    assert_eq!(dev.data.to_vec().unwrap(), payload);

    let cpu = cpu_sub.take(T).unwrap().unwrap();
    assert_eq!(cpu.backend(), BackendKind::Cpu);
    assert_eq!(cpu.data.as_bytes().unwrap(), &payload[..], "the fallback carries the same bytes, never empty");
}

fn loan_write(loan: &mut freight::LoanUninit<UInt8MultiArray>, payload: &[u8]) -> bool {
    loan.write_buffer_from_host(0, 0, payload).is_ok()
}

#[test]
fn executor_runs_callbacks_and_waitset_reports_the_ready_subscription() {
    let n = node("exec");
    let (ta, tb) = (topic("exec_a"), topic("exec_b"));
    let pa = n.create_publisher::<UInt8MultiArray>(&ta, 5).unwrap();
    let pb = n.create_publisher::<PointCloud2>(&tb, 5).unwrap();
    let sa = n.create_subscription::<UInt8MultiArray>(&ta, 5).unwrap();
    let sb = n.create_subscription::<PointCloud2>(&tb, 5).unwrap();
    {
        let mut ws = WaitSet::new();
        let (ia, ib) = (ws.add(&sa), ws.add(&sb));
        assert_eq!(ws.wait(Duration::from_millis(50)).unwrap(), WaitOutcome::Timeout);
        pb.publish_copy(&PointCloud2::default()).unwrap();
        assert_eq!(ws.wait(T).unwrap(), WaitOutcome::Ready(vec![ib]));
        assert!(sb.try_take().unwrap().is_some());
        let _ = ia;
    }
    let count = Arc::new(AtomicUsize::new(0));
    let mut exec = Executor::new();
    let c = count.clone();
    exec.add_subscription(sa, move |m| {
        assert_eq!(m.data.len(), 3);
        c.fetch_add(1, Ordering::SeqCst);
    });
    pa.publish(pa.loan(3).unwrap().write_from_fn(|_| 0)).unwrap();
    pa.publish(pa.loan(3).unwrap().write_from_fn(|_| 0)).unwrap();
    let mut ran = 0;
    let deadline = Instant::now() + T;
    while ran < 2 && Instant::now() < deadline {
        ran += exec.spin_once(Duration::from_millis(100)).unwrap();
    }
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let stop = exec.stop_handle();
    let t = std::thread::spawn(move || exec.spin());
    stop.stop();
    t.join().unwrap().unwrap();
}

#[test]
fn spin_mode_take_busy_polls_until_the_timeout() {
    let n = node("spin");
    let t = topic("spin");
    let opts = SubscriptionOptions { wait: WaitMode::Spin, ..Default::default() };
    let sub = n.create_subscription_with_options::<UInt8MultiArray>(&t, 5, opts).unwrap();
    let start = Instant::now();
    assert!(sub.take(Duration::from_millis(30)).unwrap().is_none());
    assert!(start.elapsed() >= Duration::from_millis(30));
}

#[test]
fn bad_arguments_get_typed_errors() {
    let n = node("bad");
    assert!(matches!(n.create_publisher::<Image>("", 5), Err(CreateError::Name(_))));
    assert!(matches!(n.create_publisher::<Image>("bad topic", 5), Err(CreateError::Name(_))));
    assert!(matches!(n.create_subscription::<Image>("a//b", 5), Err(CreateError::Name(_))));
    assert!(Context::new().unwrap().create_node("bad-name").is_err());
    assert!(matches!(
        n.create_subscription::<Image>(&topic("depth"), 1000),
        Err(CreateError::OverLimit { what: "history depth (1..)", .. })
    ));
    assert!(matches!(n.create_subscription::<Image>(&topic("depth0"), 0), Err(CreateError::OverLimit { .. })));
    assert!(n.create_subscription::<Image>(&topic("latched"), QoS::keep_last(1).transient_local()).is_ok());
    assert!(matches!(
        n.create_publisher::<Image>(&topic("latched2"), QoS::keep_last(2).transient_local()),
        Err(CreateError::OverLimit { what: "transient-local depth (Limits::max_history)", asked: 2, limit: 1 })
    ));

    let t = topic("wrongtype");
    let _p = n.create_publisher::<Image>(&t, 5).unwrap();
    match n.create_subscription::<PointCloud2>(&t, 5) {
        Err(CreateError::WrongType { existing, requested, .. }) => {
            assert_eq!(existing, "sensor_msgs/msg/Image");
            assert_eq!(requested, "sensor_msgs/msg/PointCloud2");
        }
        other => panic!("expected WrongType, got {other:?}"),
    }

    let small = ContextBuilder::default()
        .limits(Limits { max_message_bytes: 1 << 20, ..Default::default() })
        .create()
        .unwrap()
        .create_node("small")
        .unwrap();
    let p = small.create_publisher::<Image>(&topic("limit"), 5).unwrap();
    assert!(matches!(p.loan(2 << 20), Err(LoanError::TooLarge { .. })));
    assert!(p.loan(1000).is_ok());
    assert!(matches!(p.loan_buffers(&[1, 2]), Err(LoanError::BufferCount { expected: 1, given: 2, .. })));
}

#[test]
fn a_loan_size_that_would_wrap_around_is_refused_with_the_limit() {
    // Before sizes were checked arithmetic, header + length wrapped to a small
    // frame and the loan's slot reached past its end.
    let n = node("wrap");
    let t = topic("wrap");
    let p = n.create_publisher::<Image>(&t, 5).unwrap();
    let max = Limits::default().max_message_bytes;
    for len in [usize::MAX, usize::MAX - 63, usize::MAX - 4096, max + 1] {
        match p.loan(len) {
            Err(LoanError::TooLarge { len: asked, max: limit }) => {
                assert_eq!((asked, limit), (len, max), "the error names the size asked for and the limit");
            }
            other => panic!("loan({len}): expected TooLarge, got {other:?}"),
        }
    }
    // The same with a subscription in this process (heap frames) and after it.
    let _sub = n.create_subscription::<Image>(&t, 5).unwrap();
    assert!(matches!(p.loan(usize::MAX), Err(LoanError::TooLarge { .. })));
    let loan = p.loan(64).unwrap().write_from_fn(|i| i as u8);
    p.publish(loan).unwrap();
}

#[test]
fn a_loan_whose_buffer_was_swapped_is_refused() {
    let n = node("swap");
    let t = topic("swap");
    let _sub = n.create_subscription::<Image>(&t, 5).unwrap();
    let p = n.create_publisher::<Image>(&t, 5).unwrap();
    let mut loan = p.loan(10).unwrap().write_from_fn(|_| 0);
    loan.data = Buffer::from(vec![1u8; 10]);
    assert!(matches!(p.publish(loan), Err(PublishError::BufferNotFromLoan { ordinal: 0 })));
}

#[test]
fn a_subscription_cannot_hold_more_samples_than_its_limit() {
    let limits = Limits { max_held_samples: 2, max_history: 8, ..Default::default() };
    let ctx = ContextBuilder::default().limits(limits).create().unwrap();
    let n = ctx.create_node("held").unwrap();
    let t = topic("held");
    // A second process' subscriber forces the shared-memory route; here a
    // transient-local publisher does the same inside one process.
    let qos = QoS::keep_last(8).transient_local();
    let sub = n.create_subscription::<UInt8MultiArray>(&t, qos).unwrap();
    let p = n.create_publisher::<UInt8MultiArray>(&t, qos).unwrap();
    for _ in 0..3 {
        p.publish(p.loan(4).unwrap().write_from_fn(|_| 0)).unwrap();
    }
    let a = sub.take(T).unwrap().unwrap();
    let b = sub.take(T).unwrap().unwrap();
    assert_eq!(a.info().transport, Transport::Shm);
    assert!(matches!(sub.try_take(), Err(TakeError::TooManyHeld(2))));
    drop((a, b));
    assert!(sub.take(T).unwrap().is_some(), "released samples make room");
}

freight::message! {
    /// A user message with two large fields of different element types.
    pub struct DepthWithConfidence = "test_msgs/msg/DepthWithConfidence" {
        pub width: u32,
        pub depth: Buffer<f32>,
        pub label: String,
        pub confidence: Buffer<u8>,
    }
}

#[test]
fn user_messages_with_several_buffers_travel_by_loan_and_by_copy() {
    let n = node("user");
    let t = topic("user");
    let sub = n.create_subscription::<DepthWithConfidence>(&t, 5).unwrap();
    let publisher = n.create_publisher::<DepthWithConfidence>(&t, 5).unwrap();
    let mut loan = publisher.loan_buffers(&[4 * 4, 4]).unwrap();
    let depth: Vec<u8> = [1.5f32, 2.5, 3.5, 4.5].iter().flat_map(|f| f.to_le_bytes()).collect();
    loan.write_buffer_from_host(0, 0, &depth).unwrap();
    loan.write_buffer_from_host(1, 0, &[9, 8, 7, 6]).unwrap();
    // SAFETY: both buffers were written in full just above.
    let mut msg = unsafe { loan.assume_init() };
    msg.width = 4;
    msg.label = "near".into();
    publisher.publish(msg).unwrap();
    let got = sub.take(T).unwrap().unwrap();
    assert_eq!(got.depth.as_slice().unwrap(), &[1.5, 2.5, 3.5, 4.5]);
    assert_eq!(got.confidence.as_slice().unwrap(), &[9, 8, 7, 6]);
    assert_eq!((got.width, got.label.as_str()), (4, "near"));

    let copy = DepthWithConfidence {
        width: 1,
        depth: Buffer::from(vec![0.25f32]),
        label: "far".into(),
        confidence: Buffer::from(vec![1u8]),
    };
    publisher.publish_copy(&copy).unwrap();
    assert_eq!(*sub.take(T).unwrap().unwrap(), copy);
}

#[test]
fn different_ros_domains_do_not_see_each_other() {
    let t = topic("domains");
    let a = ContextBuilder::default().domain_id(7).create().unwrap().create_node("a").unwrap();
    let b = ContextBuilder::default().domain_id(8).create().unwrap().create_node("b").unwrap();
    let sub = b.create_subscription::<UInt8MultiArray>(&t, 5).unwrap();
    let publisher = a.create_publisher::<UInt8MultiArray>(&t, 5).unwrap();
    assert_eq!(publisher.subscription_count(), 0);
    publisher.publish(publisher.loan(4).unwrap().write_from_fn(|_| 1)).unwrap();
    assert!(sub.take(Duration::from_millis(100)).unwrap().is_none());
}

#[test]
fn domain_id_comes_from_ros_domain_id() {
    // The variable is process-wide and other tests create contexts in parallel,
    // so each case runs in a child process of this test binary.
    if let Ok(expect) = std::env::var("FREIGHT_EXPECT_DOMAIN") {
        match (expect.as_str(), Context::new()) {
            ("error", Err(freight::ContextError::BadDomainId(_))) => {}
            (n, Ok(ctx)) if n.parse() == Ok(ctx.domain_id()) => {}
            (_, got) => panic!("ROS_DOMAIN_ID gave {got:?}, expected {expect}"),
        }
        return;
    }
    for (value, expect) in [("42", "42"), ("not-a-number", "error"), ("233", "error"), ("", "0")] {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["domain_id_comes_from_ros_domain_id", "--exact", "--test-threads=1"])
            .env("ROS_DOMAIN_ID", value)
            .env("FREIGHT_EXPECT_DOMAIN", expect)
            .output()
            .unwrap();
        assert!(status.status.success(), "ROS_DOMAIN_ID={value:?}: {}", String::from_utf8_lossy(&status.stdout));
    }
}

#[test]
fn the_graph_lists_topics_endpoints_and_negotiated_backends() {
    use freight::graph::EndpointKind;
    let n = node("graph");
    let t = topic("graph");
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let _p = n.create_publisher_with_options::<Image>(&t, 5, options).unwrap();
    let device_ok = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let _a = n.create_subscription_with_options::<Image>(&t, 5, device_ok).unwrap();
    let _b = n.create_subscription::<Image>(&t, 5).unwrap();
    let topics = n.topic_names_and_types().unwrap();
    assert!(topics.iter().any(|x| x.name == t && x.type_name == "sensor_msgs/msg/Image"), "{topics:?}");
    let g = n.topic_graph(&t).unwrap().expect("the topic exists");
    assert_eq!(g.endpoints.len(), 3);
    assert_eq!(g.endpoints[0].kind, EndpointKind::Publisher);
    assert_eq!(g.endpoints[0].backend, Some(BackendKind::FakeDevice));
    assert!(g.endpoints.iter().all(|e| e.pid == std::process::id() && e.node == "/graph"));
    let mut got: Vec<BackendKind> = g.pairings.iter().map(|p| p.backend).collect();
    got.sort();
    assert_eq!(got, vec![BackendKind::Cpu, BackendKind::FakeDevice]);
    assert!(n.topic_graph("/no_such_topic").unwrap().is_none());
}

/// A node on simulated device `uuid` (its own context).
fn node_on_device(name: &str, uuid: [u8; 16]) -> freight::Node {
    let limits = Limits { fake_device_capacity: 16 << 20, ..Default::default() };
    Context::builder().limits(limits).fake_device_uuid(uuid).create().unwrap().create_node(name).unwrap()
}

#[test]
fn device_memory_stays_on_its_device_and_one_host_copy_serves_every_other_subscription() {
    let t = topic("devices");
    let gpu_a = node_on_device("gpu_a", [0xa; 16]);
    let gpu_b = node_on_device("gpu_b", [0xb; 16]);
    let devices = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let cpu_only = SubscriptionOptions { accepted_backends: Some(BackendSet::CPU_ONLY), ..Default::default() };
    let same = gpu_a.create_subscription_with_options::<UInt8MultiArray>(&t, 5, devices).unwrap();
    let other = gpu_b.create_subscription_with_options::<UInt8MultiArray>(&t, 5, devices).unwrap();
    let cpu = gpu_a.create_subscription_with_options::<UInt8MultiArray>(&t, 5, cpu_only).unwrap();
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = gpu_a.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options).unwrap();
    for k in 0..40u8 {
        // Sizes vary, and 40 messages of up to 8 MiB pass through a 16 MiB
        // pool only if no block is kept for the subscription on device b.
        let len = (1 << 20) * (1 + k as usize % 8);
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(k)).collect();
        publisher.publish(publisher.loan(len).unwrap().write_from_slice(&payload).unwrap()).unwrap();
        let s = same.take(T).unwrap().expect("same device");
        assert_eq!((s.backend(), s.data.backend()), (BackendKind::FakeDevice, BackendKind::FakeDevice));
        assert_eq!(s.data.to_vec().unwrap(), payload);
        let o = other.take(T).unwrap().expect("other device");
        let c = cpu.take(T).unwrap().expect("cpu only");
        for got in [&o, &c] {
            assert_eq!((got.backend(), got.data.backend()), (BackendKind::Cpu, BackendKind::Cpu));
            assert_eq!(got.data.as_bytes().unwrap(), &payload[..], "the host copy carries the same bytes");
        }
        let (po, pc) = (o.data.as_bytes().unwrap().as_ptr(), c.data.as_bytes().unwrap().as_ptr());
        assert_eq!(po, pc, "one host copy per message, shared by every subscription that needs host bytes");
    }
}

#[test]
fn a_publisher_of_a_backend_this_process_cannot_use_is_refused_with_the_reason() {
    let ctx = Context::new().unwrap();
    let n = ctx.create_node("no_gpu").unwrap();
    let t = topic("no_gpu");
    for kind in [BackendKind::Cuda, BackendKind::CudaHost] {
        if ctx.backend_available(kind).is_ok() {
            skip(&format!("no_gpu ({kind})"), Lack::Gpu, "this machine has a usable CUDA device");
            continue;
        }
        let options = PublisherOptions { backend: kind, ..Default::default() };
        match n.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options) {
            Err(CreateError::BackendUnavailable(e)) => {
                assert_eq!(e.backend, kind);
                let why = freight::backend::cuda::available().expect_err("unavailable, so CUDA says why");
                assert!(e.reason.contains(&why.to_string()), "the reason is CUDA's own: {e}");
                let text = CreateError::BackendUnavailable(e.clone()).to_string();
                assert!(
                    text.contains(&format!("backend {kind} is not available")) && text.contains(&e.reason),
                    "{text}"
                );
            }
            other => panic!("a {kind} publisher without a GPU: {other:?}"),
        }
        let accepts = SubscriptionOptions { accepted_backends: Some(BackendSet::of(&[kind])), ..Default::default() };
        let refused = n.create_subscription_with_options::<UInt8MultiArray>(&t, 5, accepts);
        assert!(matches!(refused, Err(CreateError::BackendUnavailable(ref e)) if e.backend == kind), "{refused:?}");
    }
}

#[test]
fn host_memory_loans_have_no_device_view_and_ignore_the_write_stream() {
    let n = node("streams");
    let t = topic("streams");
    let sub = n.create_subscription::<UInt8MultiArray>(&t, 5).unwrap();
    for backend in [BackendKind::Shm, BackendKind::FakeDevice] {
        let options = PublisherOptions { backend, ..Default::default() };
        let publisher = n.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options).unwrap();
        let mut loan = publisher.loan(64).unwrap();
        assert_eq!(loan.device_view(0), None, "{backend}: the CPU writes it");
        assert_eq!(loan.device_view(1), None, "no buffer 1");
        loan.set_write_stream(42);
        let mut loan = loan.write_from_fn(|i| i as u8);
        assert_eq!(loan.device_view(0), None);
        loan.set_write_stream(7);
        publisher.publish(loan).unwrap();
        let got = sub.take(T).unwrap().expect("the message");
        assert_eq!(got.data.device_view(), None);
        assert_eq!(got.data.order_on_stream(0), Ok(()), "host memory needs no stream order");
        assert_eq!(got.data.as_bytes().unwrap()[63], 63);
    }
}

#[test]
fn device_holds_of_a_subscription_dropped_between_loan_and_publish_return_to_the_pool() {
    const BLOCK: usize = 1 << 20;
    let limits = Limits { fake_device_capacity: 2 * BLOCK, ..Default::default() };
    let n = Context::builder().limits(limits).create().unwrap().create_node("dropped_reader").unwrap();
    let t = topic("dropped_reader");
    let devices = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = n.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options).unwrap();
    // Each loan names the subscription as a reader of its block; the
    // subscription is gone when the loan is published. A hold kept for it
    // would keep the block: the two-block pool would be empty by the third.
    for k in 0..8u8 {
        let sub = n.create_subscription_with_options::<UInt8MultiArray>(&t, 5, devices).unwrap();
        let loan = publisher.loan(BLOCK).unwrap_or_else(|e| panic!("loan {k}: {e}"));
        drop(sub);
        publisher.publish(loan.write_from_fn(|i| i as u8 ^ k)).unwrap();
    }
}

#[test]
fn a_best_effort_subscription_that_falls_behind_keeps_the_newest_messages() {
    let n = node("keep_last");
    let t = topic("keep_last");
    let sub = n.create_subscription::<UInt8MultiArray>(&t, QoS::keep_last(2).best_effort()).unwrap();
    let publisher = n.create_publisher::<UInt8MultiArray>(&t, QoS::keep_last(2)).unwrap();
    for k in 0..10u8 {
        publisher.publish(publisher.loan(1).unwrap().write_from_fn(|_| k)).unwrap();
    }
    let kept: Vec<u8> = std::iter::from_fn(|| sub.try_take().unwrap()).map(|s| s.data.as_bytes().unwrap()[0]).collect();
    assert_eq!(kept, vec![8, 9], "keep last 2, as ROS 2's history does");
}

#[test]
fn a_full_best_effort_queue_gives_back_the_device_holds_of_the_messages_it_lets_go() {
    const BLOCK: usize = 1 << 20;
    let limits = Limits { fake_device_capacity: 4 * BLOCK, ..Default::default() };
    let n = Context::builder().limits(limits).create().unwrap().create_node("evicted_holds").unwrap();
    let t = topic("evicted_holds");
    let devices = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = n.create_publisher_with_options::<UInt8MultiArray>(&t, 2, options).unwrap();
    let idle = n.create_subscription_with_options::<UInt8MultiArray>(&t, QoS::keep_last(2).best_effort(), devices);
    let idle = idle.unwrap();
    // Four pools' worth of messages through a subscription that never takes:
    // each message it lets go must give its block back, or the pool runs dry
    // (and the reader's share of it sends the last ones as host copies).
    for k in 0..16u8 {
        let loan = publisher.loan(BLOCK).unwrap_or_else(|e| panic!("loan {k} from a four-block pool: {e}"));
        publisher.publish(loan.write_from_fn(|i| i as u8 ^ k)).unwrap();
    }
    for k in [14u8, 15] {
        let s = idle.try_take().unwrap().unwrap_or_else(|| panic!("message {k} was kept"));
        assert_eq!(s.data.backend(), BackendKind::FakeDevice, "message {k}");
        let bytes = s.data.to_vec().unwrap();
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8 ^ k), "message {k}");
    }
    assert!(idle.try_take().unwrap().is_none());
}

#[test]
fn a_device_subscription_that_never_takes_gets_host_copies_instead_of_exhausting_the_pool() {
    const BLOCK: usize = 1 << 20;
    let limits = Limits { fake_device_capacity: 4 * BLOCK, ..Default::default() };
    let n = Context::builder().limits(limits).create().unwrap().create_node("never_takes").unwrap();
    let t = topic("never_takes");
    let devices = SubscriptionOptions {
        accepted_backends: Some(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice])),
        ..Default::default()
    };
    let options = PublisherOptions { backend: BackendKind::FakeDevice, ..Default::default() };
    let publisher = n.create_publisher_with_options::<UInt8MultiArray>(&t, 5, options).unwrap();
    let idle = n.create_subscription_with_options::<UInt8MultiArray>(&t, QoS::keep_last(16), devices).unwrap();
    // The subscription's queue could hold four pools' worth of blocks.
    for k in 0..16u8 {
        let loan = publisher.loan(BLOCK).unwrap_or_else(|e| panic!("loan {k} from a four-block pool: {e}"));
        publisher.publish(loan.write_from_fn(|i| i as u8 ^ k)).unwrap();
    }
    // Every queued message is intact: the first ones in device memory, the
    // rest as host copies.
    let mut backends = Vec::new();
    for k in 0..16u8 {
        let s = idle.try_take().unwrap().unwrap_or_else(|| panic!("message {k} was queued"));
        let bytes = s.data.to_vec().unwrap();
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8 ^ k), "message {k}");
        backends.push(s.data.backend());
    }
    assert_eq!(backends[0], BackendKind::FakeDevice);
    assert_eq!(backends[15], BackendKind::Cpu, "{backends:?}");
}
