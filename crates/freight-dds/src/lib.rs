//! freight's network plane on Cyclone DDS: the handful of DDS operations freight
//! needs, behind a safe API.
//!
//! Samples cross this layer as serialized ROS 2 CDR (encapsulation header
//! included): freight serializes a message once and hands the bytes to one
//! writer, however many readers are matched. Topics use an opaque sertype, so
//! Cyclone neither knows nor checks the layout; topic name and type name are the
//! ROS 2 ones (`rt/camera/image`, `sensor_msgs::msg::dds_::Image_`), and peers
//! match on them as DDS peers without type information do.
//!
//! * [`Participant`]: one per freight context and domain; creates writers and
//!   readers and keeps discovery ([`Participant::discovered`]).
//! * [`Writer`], [`Reader`]: raw CDR in and out; matched peers with their
//!   USER_DATA, which is how freight peers recognize each other.
//! * [`EndpointQos`]: ROS 2 QoS in DDS terms; [`DdsConfig`]: where the domain's
//!   configuration comes from.
#![deny(missing_docs)]

mod config;
mod discovery;
mod error;
mod participant;
mod qos;
mod reader;
mod writer;

pub use config::DdsConfig;
pub use discovery::{Discovered, DiscoveredEndpoint, DiscoveredParticipant};
pub use error::DdsError;
pub use participant::Participant;
pub use qos::EndpointQos;
pub use reader::{Reader, ReceivedCdr};
pub use writer::Writer;
