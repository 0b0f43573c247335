//! freight's message model.
//!
//! A ROS 2 message in freight has two kinds of fields, as with ROS 2's
//! `rosidl::Buffer`:
//!
//! * **small fields** (numbers, strings, nested structs, short sequences) travel as
//!   CDR-encoded message data;
//! * **large fields** are [`Buffer`]s whose bytes live in a memory backend (heap,
//!   shared memory, device memory). Only a reference to them moves with the
//!   message when the receiver can reach that memory.
//!
//! Message types are declared with [`message!`], which is how the built-in types
//! in [`msgs`] are written too:
//!
//! ```
//! use freight_msg::{message, Buffer, Message};
//! use freight_msg::msgs::std_msgs::Header;
//!
//! message! {
//!     /// A depth map with its confidence, both large.
//!     pub struct DepthWithConfidence = "my_robot_msgs/msg/DepthWithConfidence" {
//!         pub header: Header,
//!         pub width: u32,
//!         pub height: u32,
//!         pub depth: Buffer<f32>,
//!         pub confidence: Buffer<u8>,
//!     }
//! }
//!
//! let msg = DepthWithConfidence {
//!     width: 2,
//!     height: 1,
//!     depth: Buffer::from(vec![1.5f32, 2.5]),
//!     confidence: Buffer::from(vec![255u8, 128]),
//!     ..Default::default()
//! };
//! assert_eq!(DepthWithConfidence::TYPE_NAME, "my_robot_msgs/msg/DepthWithConfidence");
//! assert_eq!(msg.buffer_count(), 2);
//! ```
#![deny(missing_docs)]

// The generated built-in messages (`msgs`) spell this crate `::freight_msg`, as
// generated code in any other crate does.
extern crate self as freight_msg;

pub mod bounds;
pub mod buffer;
pub mod cdr;
pub mod fields;
pub mod generic;
mod macros;
pub mod message;
pub mod msgs;
pub mod service;
pub mod yaml;

pub use buffer::{BackendKind, BackendSet, Buffer, BufferError, BufferStorage, DeviceView, Element, RawBuffer};
pub use cdr::{CdrReader, CdrWriter, DecodeError, EncodeError};
pub use fields::{FieldError, FieldProblem, FieldValue};
pub use message::{BufferDecoder, BufferEncoder, CdrField, ElementInfo, Message};
pub use service::ServiceType;
pub use yaml::{MessageWriter, YamlField, YamlOptions, YamlWriter};
