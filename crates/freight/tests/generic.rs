//! Generic endpoints (a type known at run time, as the C ABI makes them for
//! a user's C++ types) against typed ones of the same definition: in one
//! process, across processes through shared memory, and across "hosts" over
//! DDS, where the generic side writes and reads the wire's CDR by its layout.
//!
//! Children are this test binary re-run on the test's own name with
//! `FREIGHT_GENERIC_ROLE=<role>`; they report on stdout in lines marked
//! `#gen# ` and end when their stdin closes.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Peer;

use freight::generic::{
    layout_from_definition, ElementInfo, FieldKind, GenericMessage, GenericPublisher, GenericSubscription, Item,
    MessageLayout, Number, StructLayout,
};
use freight::msgs::sensor_msgs::Image;
use freight::msgs::std_msgs::Header;
use freight::{
    Buffer, Context, DdsConfig, LoanError, Message, Node, PublishError, PublisherOptions, QoS, SubscriptionOptions,
    Transport,
};
use freight::{CallError, Sample, ServiceOptions, ServiceType};
use freight_msg::message::InlineBuffers;
use freight_msg::CdrWriter;
use freight_testkit::{other_host_available, OTHER_HOST_MOUNTS};

const T: Duration = Duration::from_secs(10);
const ROLE: &str = "FREIGHT_GENERIC_ROLE";
const TOPIC: &str = "FREIGHT_GENERIC_TOPIC";
const DOMAIN: &str = "FREIGHT_GENERIC_DOMAIN";
const MARK: &str = "#gen# ";

/// `sensor_msgs/msg/Image` as a layout, from its `ros2msg` text as a C++ or
/// Python user's build step gives it: the generated Rust type's hash.
fn image_layout() -> Arc<MessageLayout> {
    let definition = "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\n\
                      uint32 step\nuint8[] data\n\
                      ================================================================================\n\
                      MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
                      ================================================================================\n\
                      MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n";
    let layout = layout_from_definition(Image::TYPE_NAME, definition).unwrap();
    assert_eq!(layout.hash(), Image::TYPE_HASH);
    Arc::new(layout)
}

fn image(n: u32, len: usize) -> Image {
    Image {
        header: Header { frame_id: format!("frame-{n}"), ..Default::default() },
        width: n,
        height: 1,
        encoding: "mono8".into(),
        is_bigendian: 0,
        step: n,
        data: Buffer::from((0..len).map(|i| (i as u32 ^ n) as u8).collect::<Vec<_>>()),
    }
}

/// The small fields of `image(n, _)` with its buffer as ordinal 0.
fn image_fields(n: u32) -> Vec<u8> {
    let mut w = CdrWriter::new();
    freight_msg::CdrField::write(&Image { data: Buffer::default(), ..image(n, 0) }, &mut w, &mut Ordinal).unwrap();
    w.finish()
}

struct Ordinal;

impl freight_msg::BufferEncoder for Ordinal {
    fn write_buffer(
        &mut self,
        w: &mut CdrWriter,
        _: &freight_msg::RawBuffer,
        _: ElementInfo,
    ) -> Result<(), freight_msg::EncodeError> {
        w.write_u32(0);
        Ok(())
    }
}

/// Publishes `image(n, len)` from a loan of `publisher`.
fn publish_loaned(publisher: &GenericPublisher, n: u32, len: usize) {
    let mut loan = publisher.loan_buffers(&[len]).unwrap();
    loan.write_buffer_from_host(0, 0, image(n, len).data.as_bytes().unwrap()).unwrap();
    // SAFETY: the one buffer was written whole.
    publisher.publish(unsafe { loan.assume_init() }, image_fields(n)).unwrap();
}

/// Takes the next message from `sub` and checks it is `image(n, len)`, sent
/// by `transport`.
fn expect_image(sub: &GenericSubscription, n: u32, len: usize, transport: Transport) {
    let sample = sub
        .take(T)
        .unwrap()
        .unwrap_or_else(|| panic!("image {n} never came ({} publishers listed)", sub.publisher_count()));
    assert_eq!(sample.info.transport, transport);
    let typed = Image::from_cdr_with(&sample.to_cdr().unwrap(), &mut InlineBuffers).unwrap();
    assert_eq!(typed, image(n, len));
}

fn node(name: &str) -> Node {
    Context::new().unwrap().create_node(name).unwrap()
}

fn topic(name: &str) -> String {
    format!("/generic_{}_{name}", std::process::id())
}

/// This run's DDS domain (children inherit it): 230..=231 (their ports stay under 65536 for the participants a test makes).
fn domain() -> u32 {
    std::env::var(DOMAIN).ok().and_then(|d| d.parse().ok()).unwrap_or(230 + std::process::id() % 2)
}

fn network_node(name: &str) -> Node {
    let ctx = Context::builder().domain_id(domain()).dds_config(DdsConfig::loopback()).create().expect("context");
    ctx.create_node(name).expect("node")
}

#[test]
fn generic_and_typed_endpoints_meet_in_one_process() {
    let node = node("generic_in_process");
    let t = topic("in_process");
    let layout = image_layout();
    let generic_pub = node.create_generic_publisher(&t, layout.clone(), 5, PublisherOptions::default()).unwrap();
    let generic_sub = node.create_generic_subscription(&t, layout.clone(), 5, SubscriptionOptions::default()).unwrap();
    let typed_pub = node.create_publisher::<Image>(&t, 5).unwrap();
    let typed_sub = node.create_subscription::<Image>(&t, 5).unwrap();

    publish_loaned(&generic_pub, 1, 4096);
    assert_eq!(*typed_sub.take(T).unwrap().expect("typed subscription"), image(1, 4096));
    expect_image(&generic_sub, 1, 4096, Transport::Intra);

    typed_pub.publish_copy(&image(2, 100)).unwrap();
    expect_image(&generic_sub, 2, 100, Transport::Intra);
    assert_eq!(*typed_sub.take(T).unwrap().unwrap(), image(2, 100));

    let copy = GenericMessage::new(layout, image_fields(3), vec![image(3, 10).data.raw().clone()]).unwrap();
    generic_pub.publish_copy(&copy).unwrap();
    assert_eq!(*typed_sub.take(T).unwrap().unwrap(), image(3, 10));
    expect_image(&generic_sub, 3, 10, Transport::Intra);

    // Refused: a loan of the wrong shape, fields that name no buffer, a
    // message of another type.
    assert!(matches!(generic_pub.loan_buffers(&[1, 2]), Err(LoanError::BufferCount { expected: 1, given: 2, .. })));
    let loan = generic_pub.loan_buffers(&[8]).unwrap();
    let mut no_buffer = image_fields(4);
    no_buffer.truncate(no_buffer.len() - 4);
    // SAFETY: never published: the fields are refused first.
    let e = generic_pub.publish(unsafe { loan.assume_init() }, no_buffer).unwrap_err();
    assert!(matches!(e, PublishError::Fields { .. }), "{e}");
    // A string over its `.msg` bound, as ROS 2 would refuse to serialize it.
    let tag = layout_from_definition("my_msgs/msg/Tag", "string<=4 name\n").unwrap();
    let tag_pub = node.create_generic_publisher(&topic("tag"), Arc::new(tag), 5, PublisherOptions::default()).unwrap();
    let loan = tag_pub.loan_buffers(&[]).unwrap();
    let mut w = CdrWriter::new();
    w.write_string("fives").unwrap();
    // SAFETY: no buffers to write.
    let e = tag_pub.publish(unsafe { loan.assume_init() }, w.finish()).unwrap_err();
    assert!(matches!(e, PublishError::OverBound { .. }), "{e}");
    assert!(e.to_string().ends_with("my_msgs/msg/Tag: field `name`: a string<=4 holds at most 4 bytes, not 5"));
    // A Rust type says it alike, with the path from its message.
    freight::message! {
        struct Tag = "my_msgs/msg/Tag" {
            name: String where (string(4)),
        }
    }
    freight::message! {
        struct Tags = "my_msgs/msg/Tags" {
            tags: Vec<Tag>,
        }
    }
    let tags = Tags { tags: vec![Tag { name: "four".into() }, Tag { name: "fives".into() }] };
    // Latched: its frames go through shared memory whoever reads them, and
    // are encoded.
    let latched = node.create_publisher::<Tags>(&topic("tags_latched"), QoS::keep_last(1).transient_local()).unwrap();
    let e = latched.publish_copy(&tags).unwrap_err();
    assert!(matches!(e, PublishError::OverBound { .. }), "{e}");
    let said = "my_msgs/msg/Tags: field `tags[1].name`: a string<=4 holds at most 4 bytes, not 5";
    assert!(e.to_string().ends_with(said), "{e}");
    // Handed over as it is to its readers in this process (none here), as
    // rclcpp's intra-process delivery does: nothing is encoded, nor checked.
    let volatile = node.create_publisher::<Tags>(&topic("tags"), 5).unwrap();
    volatile.publish_copy(&tags).expect("handed over, not encoded");
    let other = Arc::new(MessageLayout::new("my_msgs/msg/Other", 7, StructLayout::new(vec![])));
    let mut w = CdrWriter::new();
    w.write_u8(0);
    let e = generic_pub.publish_copy(&GenericMessage::new(other, w.finish(), vec![]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("my_msgs/msg/Other"), "{e}");
    // A loan is sent by the publisher that lent it, typed or generic.
    let other = node.create_generic_publisher(&topic("other"), image_layout(), 5, PublisherOptions::default()).unwrap();
    let foreign = other.loan_buffers(&[8]).unwrap();
    // SAFETY: never sent: refused first.
    let e = generic_pub.publish(unsafe { foreign.assume_init() }, image_fields(5)).unwrap_err();
    assert!(matches!(e, PublishError::ForeignLoan), "{e}");
    let typed_other = node.create_publisher::<Image>(&topic("typed_other"), 5).unwrap();
    let e = typed_pub.publish(typed_other.loan(8).unwrap().write_from_fn(|_| 0)).unwrap_err();
    assert!(matches!(e, PublishError::ForeignLoan), "{e}");
    assert!(typed_sub.try_take().unwrap().is_none(), "a refused message was delivered");
}

#[test]
fn generic_endpoints_alone_in_one_process_hand_a_message_over_as_it_is() {
    // Every reader a generic subscription here: the message itself goes to
    // the queues, nothing encoded. Loans that leave 8 bytes for the small
    // fields show it: a frame of this publisher has no room for an image's,
    // a message handed over needs none.
    let node = node("generic_handover");
    let t = topic("handover");
    let layout = image_layout();
    let subs: Vec<_> = (0..2)
        .map(|_| node.create_generic_subscription(&t, layout.clone(), 5, SubscriptionOptions::default()).unwrap())
        .collect();
    let options = PublisherOptions { meta_reserve: 8, ..Default::default() };
    let publisher = node.create_generic_publisher(&t, layout.clone(), 5, options).unwrap();

    let mut loan = publisher.loan_buffers(&[64]).unwrap();
    let lent_at = loan.buffer_uninit_mut(0).unwrap().as_ptr() as usize;
    loan.write_buffer_from_host(0, 0, image(1, 64).data.as_bytes().unwrap()).unwrap();
    // SAFETY: the one buffer was written whole.
    publisher.publish(unsafe { loan.assume_init() }, image_fields(1)).expect("handed over: no frame holds the fields");
    let copy = GenericMessage::new(layout.clone(), image_fields(2), vec![image(2, 32).data.raw().clone()]).unwrap();
    publisher.publish_copy(&copy).unwrap();
    let mut copies = Vec::new();
    for sub in &subs {
        let s = sub.take(T).unwrap().expect("the loan");
        assert_eq!((s.info.sequence, s.info.transport), (0, Transport::Intra));
        assert_eq!(s.buffers()[0].host_bytes().unwrap().as_ptr() as usize, lent_at, "the loan's own memory");
        assert_eq!(typed::<Image>(&s.message), image(1, 64));
        let s = sub.take(T).unwrap().expect("the copy");
        assert_eq!(s.info.sequence, 1);
        assert_eq!(typed::<Image>(&s.message), image(2, 32));
        let at = s.buffers()[0].host_bytes().unwrap().as_ptr() as usize;
        assert_ne!(at, copy.buffers()[0].host_bytes().unwrap().as_ptr() as usize, "a copy, not the publisher's memory");
        copies.push(at);
    }
    assert_eq!(copies[0], copies[1], "both subscriptions view one copy");

    // Fields that do not follow the layout are refused on this way too.
    let loan = publisher.loan_buffers(&[8]).unwrap();
    let mut no_buffer = image_fields(3);
    no_buffer.truncate(no_buffer.len() - 4);
    // SAFETY: never published: the fields are refused first.
    let e = publisher.publish(unsafe { loan.assume_init() }, no_buffer).unwrap_err();
    assert!(matches!(e, PublishError::Fields { .. }), "{e}");
    // A typed subscription joins: messages go as frames again, and this
    // publisher's have no room for the fields.
    let typed_sub = node.create_subscription::<Image>(&t, 5).unwrap();
    let mut loan = publisher.loan_buffers(&[8]).unwrap();
    loan.write_buffer_from_host(0, 0, &[0; 8]).unwrap();
    // SAFETY: the one buffer was written whole.
    let e = publisher.publish(unsafe { loan.assume_init() }, image_fields(4)).unwrap_err();
    assert!(matches!(e, PublishError::MetaTooLarge { .. }), "{e}");
    assert!(typed_sub.try_take().unwrap().is_none(), "a refused message was delivered");
    for sub in &subs {
        assert!(sub.try_take().unwrap().is_none(), "a refused message was delivered");
    }
}

freight::message! {
    /// Bytes to sum.
    pub struct SumRequest = "freight_test/srv/Sum_Request" {
        pub salt: u64,
        pub data: Buffer<u8>,
    }
}

freight::message! {
    /// The sum plus the salt, a word, and the bytes reversed.
    pub struct SumResponse = "freight_test/srv/Sum_Response" {
        pub sum: u64,
        pub word: String,
        pub reversed: Buffer<u8>,
    }
}

/// A service with a buffer each way.
pub struct Sum;

impl ServiceType for Sum {
    const TYPE_NAME: &'static str = "freight_test/srv/Sum";
    type Request = SumRequest;
    type Response = SumResponse;
}

fn sum(request: Sample<SumRequest>) -> SumResponse {
    let bytes = request.data.as_bytes().expect("host bytes");
    let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
    SumResponse {
        sum: bytes.iter().map(|&b| u64::from(b)).sum::<u64>() + request.salt,
        word: "typed".into(),
        reversed: Buffer::from(reversed),
    }
}

fn sum_layouts() -> (Arc<MessageLayout>, Arc<MessageLayout>) {
    let eight = || FieldKind::Single(Item::Number(Number::Eight));
    let bytes = || FieldKind::Buffer(ElementInfo::of::<u8>());
    let request = MessageLayout::new(
        SumRequest::TYPE_NAME,
        SumRequest::TYPE_HASH,
        StructLayout::new(vec![("salt".into(), eight()), ("data".into(), bytes())]),
    );
    let response = MessageLayout::new(
        SumResponse::TYPE_NAME,
        SumResponse::TYPE_HASH,
        StructLayout::new(vec![
            ("sum".into(), eight()),
            ("word".into(), FieldKind::Single(Item::String)),
            ("reversed".into(), bytes()),
        ]),
    );
    (Arc::new(request), Arc::new(response))
}

/// A generic message of `layout` from the typed `msg`'s CDR.
fn generic<M: Message>(layout: &Arc<MessageLayout>, msg: &M) -> GenericMessage {
    GenericMessage::read(layout.clone(), &msg.to_cdr().unwrap(), &mut InlineBuffers).unwrap()
}

/// A typed message from a generic one's CDR.
fn typed<M: Message>(msg: &GenericMessage) -> M {
    M::from_cdr_with(&msg.to_cdr().unwrap(), &mut InlineBuffers).unwrap()
}

/// The small fields of `msg` with its buffers as ordinals 0, 1, …: what a
/// loan is published with.
fn ordinal_fields<M: Message>(layout: &Arc<MessageLayout>, msg: &M) -> Vec<u8> {
    generic(layout, msg).fields().to_vec()
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn generic_and_typed_service_ends_call_each_other_in_one_process() {
    let node = node("generic_services");
    let (rq, rs) = sum_layouts();

    // A generic client of a typed service, by copy and by loan.
    let name = topic("typed_server");
    let mut service = node.create_service::<Sum>(&name, sum).unwrap();
    let client = node.create_generic_client(&name, rq.clone(), rs.clone(), ServiceOptions::default()).unwrap();
    assert!(client.wait_for_service(T));
    let pending = client.call_async(&generic(&rq, &SumRequest { salt: 5, data: Buffer::from(data(1000)) })).unwrap();
    service.serve(T).unwrap();
    let reply: SumResponse = typed(&pending.wait(T).unwrap());
    assert_eq!(reply.sum, data(1000).iter().map(|&b| u64::from(b)).sum::<u64>() + 5);
    assert_eq!(reply.reversed.as_bytes().unwrap(), data(1000).iter().rev().copied().collect::<Vec<_>>());

    let mut loan = client.loan_request(&[64]).unwrap();
    loan.write_buffer_from_host(0, 0, &data(64)).unwrap();
    let fields = ordinal_fields(&rq, &SumRequest { salt: 1, data: Buffer::default() });
    // SAFETY: the one buffer was written whole.
    let pending = client.call_loaned(unsafe { loan.assume_init() }, &fields).unwrap();
    service.serve(T).unwrap();
    let reply: SumResponse = typed(&pending.wait(T).unwrap());
    assert_eq!(reply.sum, data(64).iter().map(|&b| u64::from(b)).sum::<u64>() + 1);

    // Of the wrong type: refused before anything is sent.
    let e = client.call_async(&generic(&rs, &SumResponse::default())).unwrap_err();
    assert!(e.to_string().contains("freight_test/srv/Sum_Response"), "{e}");

    // A typed client of a generic server, answered by copy and by loan.
    let name = topic("generic_server");
    let server = node.create_generic_service_server(&name, rq.clone(), rs.clone(), ServiceOptions::default()).unwrap();
    let typed_client = node.create_client::<Sum>(&name).unwrap();
    assert!(typed_client.wait_for_service(T));
    let pending = typed_client.call_async(SumRequest { salt: 2, data: Buffer::from(data(10)) }).unwrap();
    let (request, id) = server.take_request(T).unwrap().expect("a request");
    let request: SumRequest = typed(&request);
    assert_eq!(request, SumRequest { salt: 2, data: Buffer::from(data(10)) });
    let answer = SumResponse { sum: 7, word: "generic".into(), reversed: Buffer::from(vec![3, 2, 1]) };
    server.send_response(id, &generic(&rs, &answer)).unwrap();
    assert_eq!(*pending.wait(T).unwrap(), answer);

    let pending = typed_client.call_async(SumRequest { salt: 3, data: Buffer::from(data(3)) }).unwrap();
    let (_, id) = server.take_request(T).unwrap().expect("a request");
    let mut loan = server.loan_response(&[4]).unwrap();
    loan.write_buffer_from_host(0, 0, &[9, 8, 7, 6]).unwrap();
    let fields = ordinal_fields(&rs, &SumResponse { sum: 30, word: "loaned".into(), reversed: Buffer::default() });
    // SAFETY: the one buffer was written whole.
    server.send_loaned_response(id, unsafe { loan.assume_init() }, &fields).unwrap();
    let reply = pending.wait(T).unwrap();
    assert_eq!((reply.sum, reply.word.as_str()), (30, "loaned"));
    assert_eq!(reply.reversed.as_bytes().unwrap(), [9, 8, 7, 6]);
}

#[test]
fn a_generic_client_calls_a_typed_server_in_another_process_and_sees_it_die() {
    const TEST: &str = "a_generic_client_calls_a_typed_server_in_another_process_and_sees_it_die";
    if child() {
        return;
    }
    let name = topic("service_processes");
    let node = node("generic_client_parent");
    let (rq, rs) = sum_layouts();
    let client = node.create_generic_client(&name, rq.clone(), rs, ServiceOptions::default()).unwrap();
    assert!(matches!(client.call_async(&generic(&rq, &SumRequest::default())), Err(CallError::NoServer { .. })));
    let mut peer = spawn(TEST, "typed_server", &name, None);
    peer.expect("READY");
    assert!(client.wait_for_service(T));
    for len in [0, 1 << 20] {
        let reply = client.call(&generic(&rq, &SumRequest { salt: 9, data: Buffer::from(data(len)) }), T).unwrap();
        assert_eq!(reply.info.transport, Transport::Shm);
        let reply: SumResponse = typed(&reply);
        assert_eq!(reply.sum, data(len).iter().map(|&b| u64::from(b)).sum::<u64>() + 9);
        assert_eq!(reply.word, "typed");
    }
    // A server that dies mid-call: the call ends promptly with a typed error.
    peer.expect_nothing_more();
    peer.kill();
    let started = Instant::now();
    let e = client.call(&generic(&rq, &SumRequest::default()), T);
    assert!(matches!(e, Err(CallError::ServerGone { .. } | CallError::NoServer { .. })), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------
// Children
// ---------------------------------------------------------------------------

/// This test binary on `test` in `role`, for `topic` (or a service's name);
/// `mounts` as [`Peer::spawn`] takes them.
fn spawn(test: &str, role: &str, topic: &str, mounts: Option<&str>) -> Peer {
    let envs = [(ROLE, role.to_string()), (TOPIC, topic.to_string()), (DOMAIN, domain().to_string())];
    Peer::spawn(test, &envs, mounts, MARK)
}

/// Runs the child role if this process is a child; true if it was.
///
/// - `typed_pub`, `network_typed_pub`: once a subscription matched, publishes
///   `image(1..=3, 1 MiB)` as typed messages, one per line `SENT n`, and
///   keeps the publisher until stdin closes.
/// - `network_typed_sub`: takes three images and prints `GOT n OK` for each
///   that is `image(n, 1 MiB)`.
fn child() -> bool {
    let Ok(role) = std::env::var(ROLE) else { return false };
    let t = std::env::var(TOPIC).expect("the topic");
    let done = common::stdin_closed();
    match role.as_str() {
        "typed_pub" | "network_typed_pub" => {
            let node = if role == "typed_pub" { node("gen_child") } else { network_node("gen_child") };
            let publisher = node.create_publisher::<Image>(&t, 5).expect("publisher");
            // The subscription this role is for: in another process of this
            // host, or on the other "host" over DDS.
            let matched = || match role.as_str() {
                "typed_pub" => publisher.subscription_count(),
                _ => publisher.network_subscription_count(),
            };
            let deadline = Instant::now() + T;
            while matched() == 0 {
                assert!(Instant::now() < deadline, "no subscription matched");
                std::thread::sleep(Duration::from_millis(10));
            }
            // DDS matches both ways before a reliable reader has the first sample.
            std::thread::sleep(Duration::from_millis(300));
            for n in 1..=3 {
                publisher.publish_copy(&image(n, 1 << 20)).expect("publish");
                println!("{MARK}SENT {n}");
            }
            // The publisher stays until the parent is done: samples of a
            // publisher that went away may never be received.
            let _ = done.recv_timeout(T);
        }
        "network_typed_sub" => {
            let node = network_node("gen_child");
            let sub = node.create_subscription::<Image>(&t, 5).expect("subscription");
            println!("{MARK}READY");
            for _ in 1..=3 {
                let image_n = sub.take(T).expect("take").expect("an image");
                let n = image_n.width;
                let ok = *image_n == image(n, 1 << 20) && image_n.info().transport == Transport::Network;
                println!("{MARK}GOT {n} {}", if ok { "OK" } else { "WRONG" });
            }
            let _ = done.recv_timeout(T);
        }
        // Serves Sum until stdin closes.
        "typed_server" => {
            let node = node("gen_child");
            let mut service = node.create_service::<Sum>(&t, sum).expect("service");
            println!("{MARK}READY");
            while done.try_recv().is_err() {
                service.serve(Duration::from_millis(20)).expect("serve");
            }
        }
        other => panic!("unknown role {other}"),
    }
    true
}

#[test]
fn a_generic_subscription_takes_typed_frames_from_another_process() {
    const TEST: &str = "a_generic_subscription_takes_typed_frames_from_another_process";
    if child() {
        return;
    }
    let t = topic("processes");
    let node = node("generic_parent");
    let sub = node.create_generic_subscription(&t, image_layout(), 5, SubscriptionOptions::default()).unwrap();
    let peer = spawn(TEST, "typed_pub", &t, None);
    for n in 1..=3 {
        peer.expect(&format!("SENT {n}"));
        expect_image(&sub, n, 1 << 20, Transport::Shm);
    }
}

#[test]
fn generic_endpoints_speak_the_wire_cdr_to_another_host() {
    const TEST: &str = "generic_endpoints_speak_the_wire_cdr_to_another_host";
    if child() || !other_host_available(TEST) {
        return;
    }
    let node = network_node("generic_parent");

    // Typed CDR from the other host, read by the layout.
    let t = topic("network_in");
    let sub = node.create_generic_subscription(&t, image_layout(), 5, SubscriptionOptions::default()).unwrap();
    let peer = spawn(TEST, "network_typed_pub", &t, Some(OTHER_HOST_MOUNTS));
    for n in 1..=3 {
        peer.expect(&format!("SENT {n}"));
        expect_image(&sub, n, 1 << 20, Transport::Network);
    }
    drop(peer);

    // A generic message written as the wire's CDR for a typed reader there.
    let t = topic("network_out");
    let publisher = node.create_generic_publisher(&t, image_layout(), 5, PublisherOptions::default()).unwrap();
    let peer = spawn(TEST, "network_typed_sub", &t, Some(OTHER_HOST_MOUNTS));
    peer.expect("READY");
    let deadline = Instant::now() + T;
    while publisher.network_subscription_count() == 0 {
        assert!(Instant::now() < deadline, "the other host's subscription never matched");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    for n in 1..=3 {
        publish_loaned(&publisher, n, 1 << 20);
        assert_eq!(peer.expect("GOT"), format!("GOT {n} OK"));
    }
}
