//! `tensor_msgs`: an n-dimensional tensor, with the fields of ROS 2's
//! `tensor_msgs/msg/ExperimentalTensor`.
//!
//! There is no device field: the backend of `data` says where the tensor lives.

use crate::{message, Buffer};

message! {
    /// A dense tensor described the DLPack way.
    pub struct Tensor = "tensor_msgs/msg/ExperimentalTensor" {
        /// DLPack type code (`Tensor::DTYPE_*`).
        pub dtype_code: u8,
        /// Bits per lane (8, 16, 32, 64).
        pub dtype_bits: u8,
        /// Lanes per element (1 unless vectorized).
        pub dtype_lanes: u16,
        /// Extent of each dimension.
        pub shape: Vec<i64>,
        /// Stride of each dimension in elements; empty means contiguous row-major.
        pub strides: Vec<i64>,
        /// Bytes from the start of `data` to the first element.
        pub byte_offset: u64,
        /// The elements.
        pub data: Buffer<u8>,
    }
}

impl Tensor {
    /// DLPack `kDLInt`.
    pub const DTYPE_INT: u8 = 0;
    /// DLPack `kDLUInt`.
    pub const DTYPE_UINT: u8 = 1;
    /// DLPack `kDLFloat`.
    pub const DTYPE_FLOAT: u8 = 2;
    /// DLPack `kDLBfloat`.
    pub const DTYPE_BFLOAT: u8 = 4;

    /// Bytes a contiguous tensor of this dtype and shape occupies, if it does not overflow.
    pub fn contiguous_len(&self) -> Option<usize> {
        let elem = (self.dtype_bits as usize * self.dtype_lanes as usize).div_ceil(8);
        self.shape.iter().try_fold(elem, |acc, d| usize::try_from(*d).ok().and_then(|d| acc.checked_mul(d)))
    }
}
