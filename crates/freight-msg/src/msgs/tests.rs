use super::builtin_interfaces::Time;
use super::sensor_msgs::{Image, PointCloud2, PointField};
use super::std_msgs::{Header, MultiArrayDimension, MultiArrayLayout, UInt64MultiArray, UInt8MultiArray};
use super::tensor_msgs::Tensor;
use crate::cdr::DecodeErrorKind;
use crate::{Buffer, Message};

fn header() -> Header {
    Header { stamp: Time { sec: 1, nanosec: 2 }, frame_id: "cam".into() }
}

fn round_trip<M: Message>(m: &M) {
    let bytes = m.to_cdr().expect("encodes");
    assert_eq!(&M::from_cdr(&bytes).expect("decodes"), m);
}

#[test]
fn every_builtin_round_trips_through_plain_cdr() {
    round_trip(&Image {
        header: header(),
        height: 1,
        width: 3,
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: 9,
        data: Buffer::from(vec![7u8; 9]),
    });
    round_trip(&PointCloud2 {
        header: header(),
        height: 1,
        width: 2,
        fields: vec![PointField { name: "x".into(), offset: 0, datatype: PointField::FLOAT32, count: 1 }],
        is_bigendian: false,
        point_step: 4,
        row_step: 8,
        data: Buffer::from(vec![1u8, 2, 3, 4, 5, 6, 7, 8]),
        is_dense: true,
    });
    let layout =
        MultiArrayLayout { dim: vec![MultiArrayDimension { label: "ü".into(), size: 3, stride: 3 }], data_offset: 0 };
    round_trip(&UInt8MultiArray { layout: layout.clone(), data: Buffer::from(vec![1u8, 2, 3]) });
    round_trip(&UInt64MultiArray { layout, data: Buffer::from(vec![u64::MAX, 0, 42]) });
    round_trip(&Tensor {
        dtype_code: Tensor::DTYPE_FLOAT,
        dtype_bits: 32,
        dtype_lanes: 1,
        shape: vec![2, 2],
        strides: vec![],
        byte_offset: 0,
        data: Buffer::from(vec![0u8; 16]),
    });
    round_trip(&Image::default());
}

#[test]
fn image_bytes_follow_ros2_cdr_layout() {
    let img = Image {
        header: Header { stamp: Time { sec: 1, nanosec: 2 }, frame_id: "a".into() },
        height: 1,
        width: 1,
        encoding: "m".into(),
        is_bigendian: 0,
        step: 1,
        data: Buffer::from(vec![9u8]),
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = vec![
        0, 1, 0, 0,            // CDR_LE
        1, 0, 0, 0, 2, 0, 0, 0, // stamp
        2, 0, 0, 0, b'a', 0,    // frame_id with NUL
        0, 0,                   // pad to 4
        1, 0, 0, 0, 1, 0, 0, 0, // height, width
        2, 0, 0, 0, b'm', 0,    // encoding
        0,                      // is_bigendian
        0,                      // pad to 4
        1, 0, 0, 0,             // step
        1, 0, 0, 0, 9,          // data
    ];
    assert_eq!(img.to_cdr().unwrap(), expected);
}

#[test]
fn uint64_buffer_is_aligned_to_eight_bytes_on_the_wire() {
    let m = UInt64MultiArray { layout: MultiArrayLayout::default(), data: Buffer::from(vec![5u64]) };
    let b = m.to_cdr().unwrap();
    // header 4 | dim len 4 | data_offset 4 | data len 4 | pad 4 | u64 8
    assert_eq!(b.len(), 28);
    assert_eq!(&b[20..28], &5u64.to_le_bytes());
}

#[test]
fn truncated_image_is_a_typed_error_not_a_panic() {
    let bytes = Image { data: Buffer::from(vec![1u8; 100]), ..Default::default() }.to_cdr().unwrap();
    for cut in 0..bytes.len() {
        assert!(Image::from_cdr(&bytes[..cut]).is_err(), "prefix of {cut} bytes decoded");
    }
}

#[test]
fn oversized_sequence_length_is_refused() {
    let mut bytes = PointCloud2::default().to_cdr().unwrap();
    // fields sequence length sits after header (stamp 8, frame_id 5 -> pad) and height/width.
    let at = 4 + 8 + 8 + 8;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = PointCloud2::from_cdr(&bytes).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::LengthTooLarge { .. }), "{e}");
}

#[test]
fn type_identity_names_and_hashes() {
    assert_eq!(Image::dds_type_name(), "sensor_msgs::msg::dds_::Image_");
    assert_ne!(Image::TYPE_HASH, PointCloud2::TYPE_HASH);
    assert_eq!(Image::default().buffer_count(), 1);
}

#[test]
fn every_package_of_interfaces_is_generated_with_fixed_arrays_and_constants() {
    use super::geometry_msgs::{PoseWithCovariance, Twist, Vector3};
    use super::sensor_msgs::{Imu, JointState, NavSatStatus};

    let mut imu = Imu::default();
    imu.orientation_covariance[0] = -1.0; // `float64[9]`: `[f64; 9]`
    imu.linear_acceleration.z = 9.81;
    round_trip(&imu);
    let mut pose = PoseWithCovariance::default();
    pose.covariance[35] = 0.5; // `float64[36]`: a `FixedArray` (no `Default` for `[f64; 36]`)
    round_trip(&pose);
    round_trip(&JointState { name: vec!["elbow".into()], position: Buffer::from(vec![1.5f64]), ..Default::default() });
    round_trip(&Twist { linear: Vector3 { x: 1.0, y: 0.0, z: 0.0 }, ..Default::default() });
    assert_eq!((PointField::FLOAT32, NavSatStatus::STATUS_NO_FIX), (7, -1));
    assert_eq!(Tensor::DTYPE_BFLOAT, 4);
    assert_eq!(Tensor::TYPE_NAME, "tensor_msgs/msg/ExperimentalTensor");
}
