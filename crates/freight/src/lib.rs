//! freight: zero-copy publish/subscribe for large ROS 2 messages.
//!
//! * **In one process** subscriptions share the publisher's buffer by pointer,
//!   for any number of them.
//! * **Between processes** messages live in shared memory (iceoryx2); only the
//!   sample's offset moves. Sizes may change from message to message (a 72 MB
//!   image after a run of 1 MB ones just works); there is no daemon.
//! * **Memory backends** are negotiated per subscriber: each says which
//!   backends it accepts, the publisher sends descriptors of its memory to those
//!   that accept it and one host copy for the others — never an empty buffer.
//!
//! The API follows rclcpp's names; memory handling follows iceoryx2 (typestate
//! loans).
//!
//! ```no_run
//! use std::time::Duration;
//! use freight::{Context, QoS};
//! use freight::msgs::sensor_msgs::Image;
//!
//! let ctx = Context::new()?;
//! let node = ctx.create_node("camera")?;
//! let publisher = node.create_publisher::<Image>("image", QoS::sensor_data())?;
//! let subscription = node.create_subscription::<Image>("image", QoS::sensor_data())?;
//!
//! let mut img = publisher.loan(640 * 480 * 3)?.write_from_fn(|i| (i % 251) as u8);
//! img.width = 640;
//! img.height = 480;
//! img.encoding = "rgb8".into();
//! img.step = 640 * 3;
//! publisher.publish(img)?;
//!
//! let received = subscription.take(Duration::from_secs(1))?.expect("a frame");
//! assert_eq!(received.data.len(), 640 * 480 * 3);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod clock;
mod context;
mod delivery;
mod endpoint;
mod error;
mod executor;
mod fd_limit;
mod frame;
pub mod generic;
pub mod graph;
mod iox_service;
mod limits;
mod loan;
mod local_plane;
pub mod names;
mod negotiation;
mod network;
mod node;
mod process;
mod publisher;
pub mod qos;
mod ros_discovery;
mod sample;
mod service;
mod subscription;
mod sync;
mod topic;
mod waitset;

pub use context::{Context, ContextBuilder};
pub use endpoint::{DeviceTag, Devices, WaitMode};
pub use error::{
    BackendUnavailable, CallError, ContextError, CreateError, LoanError, PublishError, ServeError, ShmError, TakeError,
    WaitError,
};
pub use executor::{Executor, StopHandle};
pub use frame::{inspect_frame, BufferSummary, FrameError, FrameSummary};
pub use freight_backend as backend;
pub use freight_dds::DdsConfig;
pub use freight_msg::{message, msgs, BackendKind, BackendSet, Buffer, Message, ServiceType};
pub use freight_tune::TuneError;
pub use limits::Limits;
pub use loan::{Loan, LoanUninit};
pub use local_plane::{local_plane, LocalPlane};
pub use negotiation::negotiate;
pub use node::Node;
pub use publisher::{Publisher, PublisherOptions};
pub use qos::{Durability, History, LargeData, QoS, Reliability};
// For the fuzz targets (fuzz/), which parse what other participants send.
#[doc(hidden)]
pub use network::PeerTag;
#[doc(hidden)]
pub use ros_discovery::inspect_ros_discovery_info;
pub use sample::{MessageInfo, Sample, Transport};
pub use service::{Client, Envelope, PendingCall, RequestId, Service, ServiceOptions, ServiceServer, TakenRequest};
pub use subscription::{NetworkLosses, Subscription, SubscriptionOptions};
pub use waitset::{WaitOutcome, WaitSet};
