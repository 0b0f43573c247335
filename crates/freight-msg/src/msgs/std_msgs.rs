//! `std_msgs`: headers and multi-dimensional arrays.

use super::builtin_interfaces::Time;
use crate::{message, Buffer};

message! {
    /// Time stamp and coordinate frame of a message's data.
    pub struct Header = "std_msgs/msg/Header" {
        /// When the data was acquired.
        pub stamp: Time,
        /// The coordinate frame the data is in.
        pub frame_id: String,
    }
}

message! {
    /// One dimension of a multi-array layout.
    pub struct MultiArrayDimension = "std_msgs/msg/MultiArrayDimension" {
        /// Name of the dimension.
        pub label: String,
        /// Number of elements along it.
        pub size: u32,
        /// Stride in elements.
        pub stride: u32,
    }
}

message! {
    /// The layout of a multi-array's data.
    pub struct MultiArrayLayout = "std_msgs/msg/MultiArrayLayout" {
        /// Dimensions, outermost first.
        pub dim: Vec<MultiArrayDimension>,
        /// Padding elements at the front of the data.
        pub data_offset: u32,
    }
}

message! {
    /// A multi-dimensional array of bytes.
    pub struct UInt8MultiArray = "std_msgs/msg/UInt8MultiArray" {
        /// Layout of `data`.
        pub layout: MultiArrayLayout,
        /// The elements.
        pub data: Buffer<u8>,
    }
}

message! {
    /// A multi-dimensional array of 64-bit unsigned integers.
    pub struct UInt64MultiArray = "std_msgs/msg/UInt64MultiArray" {
        /// Layout of `data`.
        pub layout: MultiArrayLayout,
        /// The elements.
        pub data: Buffer<u64>,
    }
}
