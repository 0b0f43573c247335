//! `builtin_interfaces`: time stamps.

use crate::message;

message! {
    /// A point in time: seconds and nanoseconds since the epoch of its clock.
    pub struct Time = "builtin_interfaces/msg/Time" {
        /// Whole seconds.
        pub sec: i32,
        /// Nanoseconds, 0..1e9.
        pub nanosec: u32,
    }
}

message! {
    /// A span of time.
    pub struct Duration = "builtin_interfaces/msg/Duration" {
        /// Whole seconds.
        pub sec: i32,
        /// Nanoseconds, 0..1e9.
        pub nanosec: u32,
    }
}

impl Time {
    /// The current wall-clock time.
    pub fn now() -> Self {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Time { sec: d.as_secs() as i32, nanosec: d.subsec_nanos() }
    }
}
