//! Built-in ROS 2 message types, grouped by ROS 2 package.
//!
//! They are generated at build time by `freight-msg-gen` from the `.msg` files
//! in the workspace's `interfaces/` directory, the one definition each type has
//! (the Python classes and stubs are generated from the same files). ROS 2's
//! `builtin_interfaces`, `std_msgs`, `sensor_msgs`, `geometry_msgs` and `rosgraph_msgs` match
//! ROS 2 Humble field by field, and so do the services of `std_srvs` (Rust
//! only for now); `tensor_msgs` is freight's own.
//!
//! Unbounded sequences of numbers (`uint8[] data` and the like) are
//! [`Buffer`](crate::Buffer)s, so they can stay in shared or device memory;
//! everything else is as in ROS 2. A package's types are at
//! `msgs::<package>::<Name>` (ROS 2 spells it `<package>/msg/<Name>`):
//!
//! ```
//! use freight_msg::msgs::sensor_msgs::{Image, PointField};
//! use freight_msg::{Buffer, Message};
//!
//! let image = Image { height: 1, width: 2, encoding: "mono8".into(), step: 2, data: Buffer::from(vec![0u8, 255]), ..Default::default() };
//! assert_eq!(Image::TYPE_NAME, "sensor_msgs/msg/Image");
//! assert_eq!(PointField::FLOAT32, 7); // constants of the `.msg` file
//! # let _ = image;
//! ```

mod generated {
    include!(concat!(env!("OUT_DIR"), "/msgs.rs"));
}

#[doc(hidden)]
pub use generated::__freight_msg_gen;

/// `builtin_interfaces`: time stamps and durations.
pub mod builtin_interfaces {
    pub use super::generated::builtin_interfaces::msg::*;

    impl Time {
        /// The current wall-clock time.
        pub fn now() -> Self {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            Time { sec: d.as_secs() as i32, nanosec: d.subsec_nanos() }
        }
    }
}

/// `std_msgs`: headers, single values and multi-dimensional arrays.
pub mod std_msgs {
    pub use super::generated::std_msgs::msg::*;
}

/// `geometry_msgs`: points, poses, transforms, twists.
pub mod geometry_msgs {
    pub use super::generated::geometry_msgs::msg::*;
}

/// `std_srvs`: services with nothing or one switch to send (`Empty`,
/// `SetBool`, `Trigger`). A service `X` is `std_srvs::X` (a
/// [`ServiceType`](crate::ServiceType)), its request and response
/// `std_srvs::X_Request` and `std_srvs::X_Response`, as ROS 2 names them
/// (`std_srvs/srv/X_Request`).
///
/// ```
/// use freight_msg::msgs::std_srvs::{SetBool, SetBool_Request};
/// use freight_msg::ServiceType;
/// assert_eq!(SetBool::TYPE_NAME, "std_srvs/srv/SetBool");
/// assert!(!SetBool_Request::default().data);
/// ```
pub mod std_srvs {
    pub use super::generated::std_srvs::srv::*;
}

/// `sensor_msgs`: images, point clouds, IMU, laser scans, joint states.
pub mod sensor_msgs {
    pub use super::generated::sensor_msgs::msg::*;
}

/// `rosgraph_msgs`: `Clock`, the time a bag player or a simulator publishes on
/// `/clock` for nodes that run on `use_sim_time`.
pub mod rosgraph_msgs {
    pub use super::generated::rosgraph_msgs::msg::*;
}

/// `tensor_msgs`: an n-dimensional tensor described the DLPack way, with the
/// fields of ROS 2's `tensor_msgs/msg/ExperimentalTensor`.
///
/// There is no device field: the backend of `data` says where the tensor lives.
pub mod tensor_msgs {
    pub use super::generated::tensor_msgs::msg::*;

    /// The name freight's APIs use for [`ExperimentalTensor`].
    pub type Tensor = ExperimentalTensor;

    impl ExperimentalTensor {
        /// Bytes a contiguous tensor of this dtype and shape occupies, if it does not overflow.
        pub fn contiguous_len(&self) -> Option<usize> {
            let elem = (self.dtype_bits as usize * self.dtype_lanes as usize).div_ceil(8);
            self.shape.iter().try_fold(elem, |acc, d| usize::try_from(*d).ok().and_then(|d| acc.checked_mul(d)))
        }
    }
}

#[cfg(test)]
mod tests;
