//! The generated C++ messages (`include/freight/msgs/`) and freight's Rust
//! types agree on the wire, byte for byte, both ways: Rust writes messages of
//! every kind of field, a C++ program (tests/cpp/messages.cpp) decodes and
//! writes each again, and builds messages of its own that Rust decodes.

mod common;

use std::process::Command;

use freight::msgs::builtin_interfaces::Time;
use freight::msgs::sensor_msgs::{
    CameraInfo, Image, JointState, LaserScan, NavSatFix, NavSatStatus, PointCloud2, PointField, RegionOfInterest,
};
use freight::msgs::std_msgs::{Float32MultiArray, Header, MultiArrayDimension, MultiArrayLayout, UInt8MultiArray};
use freight::msgs::std_srvs::{Empty_Request, Trigger_Response};
use freight::{Buffer, Message};

fn header(frame: &str) -> Header {
    Header { stamp: Time { sec: 1_700_000_000, nanosec: 123_456_789 }, frame_id: frame.into() }
}

/// Messages with strings, nested and repeated messages, fixed arrays, every
/// buffer element size, bools, negative numbers, NaN, and empty parts.
fn rust_messages() -> Vec<(&'static str, Vec<u8>)> {
    let image = Image {
        header: header("camera_optical"),
        height: 2,
        width: 3,
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: 9,
        data: Buffer::from((0..18u8).collect::<Vec<_>>()),
    };
    let camera = CameraInfo {
        header: header(""),
        height: 480,
        width: 640,
        distortion_model: "plumb_bob".into(),
        d: Buffer::from(vec![-0.25, 0.1, 0.0, 0.001, f64::NAN]),
        k: [500.0, 0.0, 320.0, 0.0, 500.0, 240.0, 0.0, 0.0, 1.0],
        r: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p: [500.0, 0.0, 320.0, 0.0, 0.0, 500.0, 240.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        binning_x: 1,
        binning_y: 2,
        roi: RegionOfInterest { x_offset: 1, y_offset: 2, height: 3, width: 4, do_rectify: true },
    };
    let cloud = PointCloud2 {
        header: header("lidar"),
        height: 1,
        width: 2,
        fields: vec![
            PointField { name: "x".into(), offset: 0, datatype: PointField::FLOAT32, count: 1 },
            PointField { name: "ring".into(), offset: 4, datatype: PointField::UINT16, count: 1 },
        ],
        is_bigendian: false,
        point_step: 6,
        row_step: 12,
        data: Buffer::from(vec![9u8; 12]),
        is_dense: true,
    };
    let joints = JointState {
        header: header("base"),
        name: vec!["shoulder".into(), "elbow".into(), String::new()],
        position: Buffer::from(vec![0.5, -1.25, 3.0]),
        velocity: Buffer::from(Vec::<f64>::new()),
        effort: Buffer::from(vec![1e-300]),
    };
    let scan = LaserScan {
        header: header("laser"),
        angle_min: -1.5,
        angle_max: 1.5,
        angle_increment: 0.01,
        time_increment: 0.0,
        scan_time: 0.1,
        range_min: 0.05,
        range_max: f32::INFINITY,
        ranges: Buffer::from(vec![1.0f32, 2.5, f32::NEG_INFINITY]),
        intensities: Buffer::from(Vec::<f32>::new()),
    };
    let fix = NavSatFix {
        header: header("gps"),
        status: NavSatStatus { status: -1, service: 1 },
        latitude: 48.1,
        longitude: 11.5,
        altitude: -3.0,
        position_covariance: [0.25; 9],
        position_covariance_type: 2,
    };
    let floats = Float32MultiArray {
        layout: MultiArrayLayout {
            dim: vec![MultiArrayDimension { label: "rows".into(), size: 2, stride: 4 }],
            data_offset: 1,
        },
        data: Buffer::from(vec![0.5f32, 1.5, 2.5, 3.5]),
    };
    let trigger = Trigger_Response { success: true, message: "done".into() };
    let cdr = |m: &dyn Fn() -> Vec<u8>| m();
    vec![
        ("sensor_msgs__Image", cdr(&|| image.to_cdr().unwrap())),
        ("sensor_msgs__CameraInfo", cdr(&|| camera.to_cdr().unwrap())),
        ("sensor_msgs__PointCloud2", cdr(&|| cloud.to_cdr().unwrap())),
        ("sensor_msgs__JointState", cdr(&|| joints.to_cdr().unwrap())),
        ("sensor_msgs__LaserScan", cdr(&|| scan.to_cdr().unwrap())),
        ("sensor_msgs__NavSatFix", cdr(&|| fix.to_cdr().unwrap())),
        ("std_msgs__Float32MultiArray", cdr(&|| floats.to_cdr().unwrap())),
        ("std_srvs__Trigger_Response", cdr(&|| trigger.to_cdr().unwrap())),
        ("std_srvs__Empty_Request", cdr(&|| Empty_Request {}.to_cdr().unwrap())),
    ]
}

#[test]
fn generated_cpp_messages_and_rust_messages_agree_on_the_wire() {
    let work = std::env::temp_dir().join(format!("freight-c-messages-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let messages = rust_messages();
    for (name, bytes) in &messages {
        std::fs::write(work.join(format!("{name}.cdr")), bytes).unwrap();
    }
    let exe = common::compile("c++", &["-std=c++17"], "cpp/messages.cpp");
    let ran = Command::new(&exe).arg(&work).output().unwrap();
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "messages failed:\n{out}{}", String::from_utf8_lossy(&ran.stderr));

    for (name, bytes) in &messages {
        let again = std::fs::read(work.join(format!("{name}.cdr.cpp"))).unwrap();
        assert_eq!(&again, bytes, "{name}: C++ wrote other bytes than it read");
    }
    let bytes = std::fs::read(work.join("cpp__std_msgs__UInt8MultiArray.cdr")).unwrap();
    let m = UInt8MultiArray::from_cdr(&bytes).unwrap();
    assert_eq!(m.data.as_slice(), Some(&[7u8; 1000][..]));
    assert_eq!(m.layout.dim, vec![MultiArrayDimension { label: "bytes".into(), size: 1000, stride: 1 }]);
    let bytes = std::fs::read(work.join("cpp__sensor_msgs__PointCloud2.cdr")).unwrap();
    let cloud = PointCloud2::from_cdr(&bytes).unwrap();
    assert_eq!(cloud.header.stamp, Time { sec: -5, nanosec: 999_999_999 });
    assert_eq!(cloud.header.frame_id, "lidar");
    assert_eq!(cloud.fields[1].name, "intensity");
    assert_eq!(cloud.fields[1].datatype, PointField::UINT8);
    assert_eq!(cloud.data.as_slice(), Some((1..=15u8).collect::<Vec<_>>().as_slice()));
    assert!(cloud.is_dense && !cloud.is_bigendian);

    assert!(out.contains("truncated: CDR at byte"), "{out}");
    assert!(out.contains("hostile: CDR at byte") && out.contains("exceeds"), "{out}");
    assert!(out.contains("constants 7 sensor_msgs/msg/Image std_srvs/srv/SetBool"), "{out}");
    let _ = std::fs::remove_dir_all(&work);
    common::remove(&exe);
}
