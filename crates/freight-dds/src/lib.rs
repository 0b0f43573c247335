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
//! * [`EndpointQos`]: ROS 2 QoS in DDS terms.
//! * [`DdsConfig`] and [`EffectiveConfig`]: the domain's configuration — freight's
//!   settings for this host (ROS 2's discovery variables, datagrams sized for the
//!   interface in use, buffers and repair for large samples), each with its reason, and
//!   the user's `CYCLONEDDS_URI` over them.
#![deny(missing_docs)]

mod config;
mod discovery;
mod error;
mod interfaces;
mod participant;
mod qos;
mod reader;
mod ros_env;
mod writer;

pub use config::{DdsConfig, EffectiveConfig, Setting, UserConfig, UserSource, RECEIVE_BUFFER_REQUEST};
pub use discovery::{Discovered, DiscoveredEndpoint, DiscoveredParticipant};
pub use error::DdsError;
pub use interfaces::{cyclone_default_interface, host_interfaces, Interface};
pub use participant::Participant;
pub use qos::EndpointQos;
pub use reader::{Reader, ReceivedCdr};
pub use ros_env::{DiscoveryOptions, DiscoveryRange};
pub use writer::Writer;
