//! The code `build.rs` generated (with this crate's generator) for the test
//! package `tests/msgs/freight_test_msgs` and for all shipped interfaces: it
//! compiles, round-trips through CDR and names its types as ROS 2 does.

#[allow(dead_code)]
mod test_pkg {
    include!(concat!(env!("OUT_DIR"), "/freight_test_msgs.rs"));
}

#[allow(dead_code)]
mod shipped {
    include!(concat!(env!("OUT_DIR"), "/shipped_interfaces.rs"));
}

use freight_msg::{Buffer, Message};
use test_pkg::freight_test_msgs::msg::{Everything, Inner, Nothing};

fn inner(value: i32, label: &str) -> Inner {
    Inner { value, label: label.into() }
}

#[test]
fn everything_round_trips_through_cdr() {
    let mut msg = Everything {
        header: test_pkg::std_msgs::msg::Header {
            stamp: test_pkg::builtin_interfaces::msg::Time { sec: 12, nanosec: 34 },
            frame_id: "camera".into(),
        },
        stamp: test_pkg::builtin_interfaces::msg::Time { sec: -1, nanosec: 5 },
        point: test_pkg::geometry_msgs::msg::Point { x: 1.0, y: -2.0, z: 3.5 },
        inner: inner(7, "seven"),
        nothing: Nothing {},
        inners: vec![inner(1, "a"), inner(2, "b")],
        fixed_inners: [inner(3, "c"), inner(4, "d")],
        few_inners: vec![inner(5, "e")],
        data: Buffer::from(vec![1u8, 2, 3]),
        floats: Buffer::from(vec![0.5f32, 1.5]),
        bytes: Buffer::from(vec![9u8]),
        chars: Buffer::from(b"hi".to_vec()),
        flags: vec![true, false, true],
        names: vec!["x".into(), "y".into()],
        short_names: vec!["ab".into()],
        fixed: [1.0, 2.0, 3.0],
        bounded: vec![-1, 2],
        with_default: 42,
        pair_default: [1.5, -2.0],
        r#type: "keyword".into(),
        r#loop: 8,
        ..Default::default()
    };
    msg.covariance[35] = 6.0;
    msg.covariance[0] = 1.0;
    msg.pose.covariance[7] = 2.0;
    msg.pose.pose.orientation.w = 1.0;
    let bytes = msg.to_cdr().unwrap();
    let back = Everything::from_cdr(&bytes).unwrap();
    assert_eq!(back, msg);
    assert_eq!(back.covariance[35], 6.0);
    assert_eq!(back.r#type, "keyword");
    assert_eq!(msg.buffer_count(), 4);
}

/// `string<=N` and `T[<=N]` fields: what is within the bound is sent,
/// what exceeds it is refused naming the field, at any depth, and received
/// as it came (a freight reader is as lenient as the bytes allow).
#[test]
fn bounds_are_checked_when_a_message_is_encoded() {
    let within = Everything {
        inner: inner(1, "eight ch"),
        few_inners: vec![inner(1, "a"), inner(2, "b"), inner(3, "c")],
        short_names: vec!["four".into(), "é".into()],
        bounded: vec![1, 2, 3, 4],
        ..Default::default()
    };
    let bytes = within.to_cdr().expect("within every bound");
    // Named by the path from the message, as a run-time layout names it
    // (C++, Python): `inner.label`, not the nested type's `label`.
    let cases: [(Everything, &str); 7] = [
        (
            Everything { inner: inner(1, "nine char"), ..Default::default() },
            "field `inner.label`: a string<=8 holds at most 8 bytes, not 9",
        ),
        (
            Everything { fixed_inners: [inner(1, "ok"), inner(2, "nine char")], ..Default::default() },
            "field `fixed_inners[1].label`: a string<=8 holds at most 8 bytes, not 9",
        ),
        (
            Everything { few_inners: vec![inner(1, "ok"), inner(2, "nine char")], ..Default::default() },
            "field `few_inners[1].label`: a string<=8",
        ),
        (
            Everything { few_inners: vec![inner(0, ""); 4], ..Default::default() },
            "field `few_inners`: a sequence [<=3] holds at most 3 elements, not 4",
        ),
        (
            Everything { short_names: vec!["a".into(); 3], ..Default::default() },
            "field `short_names`: a sequence [<=2]",
        ),
        (
            Everything { short_names: vec!["ééé".into()], ..Default::default() },
            "field `short_names[0]`: a string<=4 holds at most 4 bytes, not 6",
        ),
        (
            Everything { bounded: vec![0; 5], ..Default::default() },
            "field `bounded`: a sequence [<=4] holds at most 4 elements, not 5",
        ),
    ];
    for (msg, said) in cases {
        let e = msg.to_cdr().expect_err(said);
        assert!(e.to_string().starts_with(said), "{e}");
    }

    // Over its bound, as a lenient writer sends it (Inner's fields without
    // the bound): read as it is.
    freight_msg::message! {
        struct LooseInner = "freight_test_msgs/msg/Inner" {
            value: i32,
            label: String,
        }
    }
    let sent = LooseInner { value: 3, label: "nine char".into() }.to_cdr().unwrap();
    assert_eq!(Inner::from_cdr(&sent).expect("read as it came"), inner(3, "nine char"));
    assert!(Everything::from_cdr(&bytes).is_ok());
}

#[test]
fn names_and_constants() {
    assert_eq!(Everything::TYPE_NAME, "freight_test_msgs/msg/Everything");
    assert_eq!(Everything::dds_type_name(), "freight_test_msgs::msg::dds_::Everything_");
    assert_eq!(Inner::dds_type_name(), "freight_test_msgs::msg::dds_::Inner_");
    assert_eq!(Everything::NEG, -3i8);
    assert_eq!(Everything::BIG, u64::MAX);
    assert_eq!(Everything::HALF, 0.5f32);
    assert_eq!(Everything::TENTH, 0.1f64);
    const { assert!(Everything::YES) };
    assert_eq!(Everything::GREETING, "hello # not a comment");
    assert_eq!(Everything::LETTER, b'A');
}

#[test]
fn empty_message_is_one_byte() {
    // CDR header (4 bytes) + the hidden `structure_needs_at_least_one_member`.
    assert_eq!(Nothing {}.to_cdr().unwrap().len(), 5);
    assert_eq!(Nothing::from_cdr(&Nothing {}.to_cdr().unwrap()).unwrap(), Nothing {});
}

#[test]
fn msg_defaults_are_the_default_values() {
    // `int32 with_default 42`, `float64[2] pair_default [1.5, -2]`, and
    // geometry_msgs' `float64 w 1`: an identity quaternion, as in rclpy.
    let e = Everything::default();
    assert_eq!((e.with_default, e.pair_default), (42, [1.5, -2.0]));
    assert_eq!(e.fixed, [0.0; 3], "fields without a default keep zero");
    let q = shipped::geometry_msgs::msg::Quaternion::default();
    assert_eq!((q.x, q.y, q.z, q.w), (0.0, 0.0, 0.0, 1.0));
    assert_eq!(shipped::geometry_msgs::msg::Pose::default().orientation.w, 1.0);
}

#[test]
fn generated_types_match_the_built_in_ones() {
    // Same ROS name, same layout, same Rust spelling → same type hash and bytes.
    use freight_msg::msgs::{builtin_interfaces as b, sensor_msgs as s, std_msgs as m};
    assert_eq!(shipped::std_msgs::msg::Header::DEFINITION, m::Header::DEFINITION);
    assert_eq!(shipped::std_msgs::msg::Header::TYPE_HASH, m::Header::TYPE_HASH);
    assert_eq!(shipped::builtin_interfaces::msg::Time::TYPE_HASH, b::Time::TYPE_HASH);
    assert_eq!(shipped::sensor_msgs::msg::Image::TYPE_HASH, s::Image::TYPE_HASH);
    assert_eq!(shipped::sensor_msgs::msg::PointField::TYPE_HASH, s::PointField::TYPE_HASH);
    assert_eq!(shipped::sensor_msgs::msg::PointCloud2::TYPE_HASH, s::PointCloud2::TYPE_HASH);
    assert_eq!(shipped::std_msgs::msg::UInt8MultiArray::TYPE_HASH, m::UInt8MultiArray::TYPE_HASH);
    assert_eq!(shipped::sensor_msgs::msg::PointField::FLOAT64, s::PointField::FLOAT64);

    let built_in = s::Image {
        header: m::Header { stamp: b::Time { sec: 1, nanosec: 2 }, frame_id: "cam".into() },
        height: 1,
        width: 2,
        encoding: "mono8".into(),
        step: 2,
        data: Buffer::from(vec![7u8, 8]),
        ..Default::default()
    };
    let generated = shipped::sensor_msgs::msg::Image::from_cdr(&built_in.to_cdr().unwrap()).unwrap();
    assert_eq!(generated.encoding, "mono8");
    assert_eq!(generated.to_cdr().unwrap(), built_in.to_cdr().unwrap());
}

#[test]
fn shipped_interfaces_round_trip() {
    use shipped::geometry_msgs::msg as g;
    use shipped::sensor_msgs::msg as s;
    let mut pose = g::PoseWithCovariance::default();
    pose.covariance[35] = 1.0;
    assert_eq!(g::PoseWithCovariance::from_cdr(&pose.to_cdr().unwrap()).unwrap(), pose);
    let scan = s::LaserScan { ranges: Buffer::from(vec![1.0f32, 2.0]), ..Default::default() };
    assert_eq!(s::LaserScan::from_cdr(&scan.to_cdr().unwrap()).unwrap(), scan);
    let js = s::JointState { name: vec!["j".into()], position: Buffer::from(vec![0.5]), ..Default::default() };
    assert_eq!(s::JointState::from_cdr(&js.to_cdr().unwrap()).unwrap(), js);
    assert_eq!(s::NavSatStatus::STATUS_NO_FIX, -1);
    assert_eq!(shipped::std_msgs::msg::String::dds_type_name(), "std_msgs::msg::dds_::String_");
    let s = shipped::std_msgs::msg::String { data: "hi".into() };
    assert_eq!(shipped::std_msgs::msg::String::from_cdr(&s.to_cdr().unwrap()).unwrap(), s);
}

#[test]
fn a_service_is_generated_with_its_request_and_response() {
    use freight_msg::ServiceType;
    use test_pkg::freight_test_msgs::srv::{Detect, Detect_Request, Detect_Response};
    assert_eq!(Detect::TYPE_NAME, "freight_test_msgs/srv/Detect");
    assert_eq!(<Detect as ServiceType>::Request::TYPE_NAME, "freight_test_msgs/srv/Detect_Request");
    assert_eq!(Detect_Response::dds_type_name(), "freight_test_msgs::srv::dds_::Detect_Response_");
    let request = Detect_Request::default();
    assert_eq!(request.min_score, 0.5, "the .srv default applies");
    assert_eq!(request.image.encoding, "");
    let response = Detect_Response { count: 2, masks: Buffer::from(vec![0u8, 1, 2]) };
    assert_eq!(Detect_Response::NONE, 0);
    assert_eq!(response.buffer_count(), 1);
    assert_eq!(Detect_Response::from_cdr(&response.to_cdr().unwrap()).unwrap(), response);
}
