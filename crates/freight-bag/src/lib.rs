//! Bags for freight: rosbag2's directory layout with MCAP files, written so
//! that `ros2 bag` (Humble and later), `rosbags`, the `mcap` tools and
//! Foxglove read them, and read back whoever wrote them.
//!
//! A bag is a directory: `metadata.yaml` (format version 8, see [`metadata`])
//! and `NAME_0.mcap`, `NAME_1.mcap`, ... Each file has the MCAP profile `ros2`,
//! a `ros2msg` schema per type with every dependency's definition
//! ([`Schema`]), a `cdr` channel per topic with the publishers' QoS
//! ([`OfferedQos`]) and type hash, messages in indexed chunks, a summary with
//! statistics, and a `rosbag2` metadata record.
//!
//! - [`Writer`]: creates a bag, splits it by size or time, compresses chunks
//!   (zstd, lz4) if asked, and keeps `metadata.yaml` current at every split.
//! - [`Reader`]: a bag directory or one `.mcap` file; its messages as CDR,
//!   in the file's own memory where a chunk is uncompressed, and decoded
//!   with their large arrays viewing that memory ([`Message::decode`]).
//! - [`reindex`]: recovers the complete chunks of a file cut short by a crash.
//!
//! This crate moves bytes: it does not know freight's transport. The
//! `freight bag` commands subscribe and publish with it.

mod bytes;
mod direct;
mod error;
pub mod metadata;
mod qos;
mod reader;
mod reindex;
mod schema;
mod writer;

pub use bytes::Bytes;
pub use error::BagError;
pub use metadata::Metadata;
pub use qos::{Durability, OfferedQos, Reliability};
pub use reader::{Message, Messages, OwnedMessages, Reader};
pub use reindex::{reindex, ReindexedFile};
pub use schema::Schema;
pub use writer::{Compression, Record, TopicId, Writer, WriterOptions};
