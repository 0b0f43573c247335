//! `sensor_msgs`: camera images and point clouds.

use super::std_msgs::Header;
use crate::{message, Buffer};

message! {
    /// An uncompressed image, as `sensor_msgs/msg/Image`.
    pub struct Image = "sensor_msgs/msg/Image" {
        /// Acquisition time and camera frame.
        pub header: Header,
        /// Rows.
        pub height: u32,
        /// Columns.
        pub width: u32,
        /// Pixel encoding (`rgb8`, `bgra8`, `mono16`, ...).
        pub encoding: String,
        /// Whether the data is big-endian.
        pub is_bigendian: u8,
        /// Bytes per row.
        pub step: u32,
        /// `step * height` bytes of pixels.
        pub data: Buffer<u8>,
    }
}

message! {
    /// Describes one channel of a [`PointCloud2`] point.
    pub struct PointField = "sensor_msgs/msg/PointField" {
        /// Channel name (`x`, `intensity`, ...).
        pub name: String,
        /// Byte offset in the point.
        pub offset: u32,
        /// One of the `PointField::*` data type constants.
        pub datatype: u8,
        /// Elements in the channel.
        pub count: u32,
    }
}

impl PointField {
    /// `int8`
    pub const INT8: u8 = 1;
    /// `uint8`
    pub const UINT8: u8 = 2;
    /// `int16`
    pub const INT16: u8 = 3;
    /// `uint16`
    pub const UINT16: u8 = 4;
    /// `int32`
    pub const INT32: u8 = 5;
    /// `uint32`
    pub const UINT32: u8 = 6;
    /// `float32`
    pub const FLOAT32: u8 = 7;
    /// `float64`
    pub const FLOAT64: u8 = 8;
}

message! {
    /// A point cloud with arbitrary per-point channels, as `sensor_msgs/msg/PointCloud2`.
    pub struct PointCloud2 = "sensor_msgs/msg/PointCloud2" {
        /// Acquisition time and sensor frame.
        pub header: Header,
        /// Rows (1 for an unordered cloud).
        pub height: u32,
        /// Points per row.
        pub width: u32,
        /// The channels of a point.
        pub fields: Vec<PointField>,
        /// Whether the data is big-endian.
        pub is_bigendian: bool,
        /// Bytes per point.
        pub point_step: u32,
        /// Bytes per row.
        pub row_step: u32,
        /// `row_step * height` bytes of points.
        pub data: Buffer<u8>,
        /// Whether every point is finite.
        pub is_dense: bool,
    }
}
