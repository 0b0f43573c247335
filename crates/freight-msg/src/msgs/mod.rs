//! Built-in ROS 2 message types, grouped by ROS 2 package.
//!
//! Large arrays (`uint8[] data` and the like) are [`Buffer`](crate::Buffer)s, so
//! they can stay in shared or device memory; everything else is as in ROS 2.

pub mod builtin_interfaces;
pub mod sensor_msgs;
pub mod std_msgs;
pub mod tensor_msgs;

#[cfg(test)]
mod tests;
