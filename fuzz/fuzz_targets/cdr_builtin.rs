//! Plain CDR of the built-in message types, as a stock ROS 2 node or the
//! network sends it.
//!
//! The first byte picks a message type (low bits) and a mode (top bit):
//!
//! * **decode** (top bit clear): the rest is fed to `Message::from_cdr`. What
//!   decodes must encode again, decode to the same value, encode to the same
//!   bytes, and take as many bytes as the input did (up to 3 bytes of
//!   trailing padding);
//! * **build** (top bit set): the rest is read as the fields of a value, which
//!   is encoded and must decode to itself: every value the encoder writes, the
//!   reader accepts.
//!
//! With `FREIGHT_FUZZ_SEED_DIR` set, the target writes valid encodings of
//! each type there and exits (see `scripts/fuzz-smoke.sh`).
#![no_main]

use freight_msg::msgs::builtin_interfaces::{Duration, Time};
use freight_msg::msgs::sensor_msgs::{Image, PointCloud2, PointField};
use freight_msg::msgs::std_msgs::{Header, MultiArrayDimension, MultiArrayLayout, UInt64MultiArray, UInt8MultiArray};
use freight_msg::msgs::tensor_msgs::Tensor;
use freight_msg::{Buffer, EncodeError, Message};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

#[path = "round_trip.rs"]
mod round_trip;
use round_trip::decoded;

const BUILD: u8 = 0x80;

/// Builds a value of a message type from fuzzer bytes.
trait Build: Message {
    fn build(u: &mut Unstructured<'_>) -> Result<Self>;
}

impl Build for Time {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Time { sec: u.arbitrary()?, nanosec: u.arbitrary()? })
    }
}

impl Build for Duration {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Duration { sec: u.arbitrary()?, nanosec: u.arbitrary()? })
    }
}

impl Build for Header {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Header { stamp: Time::build(u)?, frame_id: u.arbitrary()? })
    }
}

impl Build for MultiArrayDimension {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(MultiArrayDimension { label: u.arbitrary()?, size: u.arbitrary()?, stride: u.arbitrary()? })
    }
}

impl Build for MultiArrayLayout {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        let dim = vec_of(u, MultiArrayDimension::build)?;
        Ok(MultiArrayLayout { dim, data_offset: u.arbitrary()? })
    }
}

impl Build for UInt8MultiArray {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(UInt8MultiArray { layout: MultiArrayLayout::build(u)?, data: buffer(u)? })
    }
}

impl Build for UInt64MultiArray {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(UInt64MultiArray { layout: MultiArrayLayout::build(u)?, data: buffer(u)? })
    }
}

impl Build for Image {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Image {
            header: Header::build(u)?,
            height: u.arbitrary()?,
            width: u.arbitrary()?,
            encoding: u.arbitrary()?,
            is_bigendian: u.arbitrary()?,
            step: u.arbitrary()?,
            data: buffer(u)?,
        })
    }
}

impl Build for PointField {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(PointField { name: u.arbitrary()?, offset: u.arbitrary()?, datatype: u.arbitrary()?, count: u.arbitrary()? })
    }
}

impl Build for PointCloud2 {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(PointCloud2 {
            header: Header::build(u)?,
            height: u.arbitrary()?,
            width: u.arbitrary()?,
            fields: vec_of(u, PointField::build)?,
            is_bigendian: u.arbitrary()?,
            point_step: u.arbitrary()?,
            row_step: u.arbitrary()?,
            data: buffer(u)?,
            is_dense: u.arbitrary()?,
        })
    }
}

impl Build for Tensor {
    fn build(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Tensor {
            dtype_code: u.arbitrary()?,
            dtype_bits: u.arbitrary()?,
            dtype_lanes: u.arbitrary()?,
            shape: u.arbitrary()?,
            strides: u.arbitrary()?,
            byte_offset: u.arbitrary()?,
            data: buffer(u)?,
        })
    }
}

fn vec_of<T>(u: &mut Unstructured<'_>, f: fn(&mut Unstructured<'_>) -> Result<T>) -> Result<Vec<T>> {
    // As `Vec`'s own `Arbitrary`: a continuation byte before each element.
    let mut v = Vec::new();
    while u.arbitrary::<bool>()? {
        v.push(f(u)?);
    }
    Ok(v)
}

fn buffer<T>(u: &mut Unstructured<'_>) -> Result<Buffer<T>>
where
    T: freight_msg::Element + for<'a> libfuzzer_sys::arbitrary::Arbitrary<'a>,
{
    Ok(Buffer::from(u.arbitrary::<Vec<T>>()?))
}

/// Build mode: whatever the encoder writes, the decoder reads back. A built
/// message over a `.msg` bound (a tensor's shape of 33 dimensions) is refused.
fn built<M: Build>(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(msg) = M::build(&mut u) else { return };
    let name = M::TYPE_NAME;
    let bytes = match msg.to_cdr() {
        Ok(bytes) => bytes,
        Err(EncodeError::OverBound { .. }) => return,
        Err(e) => panic!("{name} does not encode: {e}"),
    };
    let again = M::from_cdr(&bytes).unwrap_or_else(|e| panic!("encoded {name} does not decode: {e}\n{msg:?}"));
    assert_eq!(again, msg, "{name} changed in a round trip");
    assert_eq!(again.to_cdr().unwrap(), bytes, "{name} encodes two ways");
}

fn run<M: Build>(mode: u8, data: &[u8]) {
    if mode & BUILD != 0 {
        built::<M>(data)
    } else {
        decoded::<M>(data)
    }
}

/// The types, by selector (low 7 bits of the first byte, modulo their number).
const TYPES: usize = 11;

fn dispatch(selector: u8, data: &[u8]) {
    match (selector & !BUILD) as usize % TYPES {
        0 => run::<Image>(selector, data),
        1 => run::<PointCloud2>(selector, data),
        2 => run::<UInt8MultiArray>(selector, data),
        3 => run::<UInt64MultiArray>(selector, data),
        4 => run::<Tensor>(selector, data),
        5 => run::<Header>(selector, data),
        6 => run::<MultiArrayLayout>(selector, data),
        7 => run::<MultiArrayDimension>(selector, data),
        8 => run::<PointField>(selector, data),
        9 => run::<Time>(selector, data),
        _ => run::<Duration>(selector, data),
    }
}

/// Valid encodings of every type, one file each (selector byte, then CDR).
fn write_seeds(dir: &std::path::Path) {
    let header = Header { stamp: Time { sec: 1_700_000_000, nanosec: 5 }, frame_id: "camera_optical".into() };
    let layout = MultiArrayLayout {
        dim: vec![
            MultiArrayDimension { label: "rows".into(), size: 2, stride: 6 },
            MultiArrayDimension { label: "cols".into(), size: 3, stride: 3 },
        ],
        data_offset: 0,
    };
    let field = |name: &str, offset| PointField { name: name.into(), offset, datatype: PointField::FLOAT32, count: 1 };
    let seeds: Vec<(usize, Vec<u8>)> = vec![
        (
            0,
            Image {
                header: header.clone(),
                height: 2,
                width: 3,
                encoding: "rgb8".into(),
                is_bigendian: 0,
                step: 9,
                data: Buffer::from((0..18u8).collect::<Vec<_>>()),
            }
            .to_cdr()
            .unwrap(),
        ),
        (
            1,
            PointCloud2 {
                header: header.clone(),
                height: 1,
                width: 2,
                fields: vec![field("x", 0), field("y", 4), field("z", 8)],
                is_bigendian: false,
                point_step: 12,
                row_step: 24,
                data: Buffer::from(vec![0x3fu8; 24]),
                is_dense: true,
            }
            .to_cdr()
            .unwrap(),
        ),
        (2, UInt8MultiArray { layout: layout.clone(), data: Buffer::from(vec![1u8, 2, 3, 4, 5, 6]) }.to_cdr().unwrap()),
        (3, UInt64MultiArray { layout: layout.clone(), data: Buffer::from(vec![u64::MAX, 0, 7]) }.to_cdr().unwrap()),
        (
            4,
            Tensor {
                dtype_code: Tensor::DTYPE_FLOAT,
                dtype_bits: 32,
                dtype_lanes: 1,
                shape: vec![2, 2],
                strides: vec![2, 1],
                byte_offset: 0,
                data: Buffer::from(vec![0u8; 16]),
            }
            .to_cdr()
            .unwrap(),
        ),
        (5, header.to_cdr().unwrap()),
        (6, layout.to_cdr().unwrap()),
        (7, layout.dim[0].to_cdr().unwrap()),
        (8, field("intensity", 12).to_cdr().unwrap()),
        (9, Time { sec: -1, nanosec: 999_999_999 }.to_cdr().unwrap()),
        (10, Duration { sec: 3, nanosec: 1 }.to_cdr().unwrap()),
        (0, Image::default().to_cdr().unwrap()),
    ];
    for (i, (selector, cdr)) in seeds.into_iter().enumerate() {
        let mut input = vec![selector as u8];
        input.extend_from_slice(&cdr);
        std::fs::write(dir.join(format!("seed-{i:02}")), input).expect("writing a seed");
    }
    // A few build-mode seeds: the selector alone, and with some field bytes.
    for selector in 0..TYPES as u8 {
        let mut input = vec![BUILD | selector];
        input.extend((0..48u8).map(|b| b.wrapping_mul(37)));
        std::fs::write(dir.join(format!("seed-build-{selector:02}")), input).expect("writing a seed");
    }
}

fuzz_target!(
    init: {
        if let Some(dir) = std::env::var_os("FREIGHT_FUZZ_SEED_DIR") {
            std::fs::create_dir_all(&dir).expect("creating the seed directory");
            write_seeds(std::path::Path::new(&dir));
            std::process::exit(0);
        }
    },
    |data: &[u8]| {
        if let Some((&selector, rest)) = data.split_first() {
            dispatch(selector, rest);
        }
    }
);
