//! `freight._native`: the compiled half of the `freight` Python package.
//!
//! * [`endpoints`]: context, node, publisher, subscription, and the wait
//!   executors sleep in;
//! * [`messages`]: the built-in message classes, over [`fields`];
//! * [`user_types`]: message types of a user's own packages, read from
//!   their definitions;
//! * [`arrays`]: numpy views of received and loaned memory, device arrays of
//!   received device memory, all exported as DLPack by [`dlpack`];
//! * [`errors`]: Rust errors as the exception classes of `freight.errors`;
//! * [`graph`]: the ROS graph for `freight.Node`'s graph methods;
//! * [`bag`]: bags, for `freight.bag`.
//!
//! The rclpy-shaped API (`init`, `Node`, executors, QoS profiles) is Python,
//! in `python/freight/`; everything per message is here.

mod arrays;
mod bag;
mod dlpack;
mod endpoints;
mod errors;
mod fields;
mod graph;
mod messages;
mod services;
mod user_types;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<endpoints::Context>()?;
    m.add_class::<endpoints::Node>()?;
    m.add_class::<endpoints::Publisher>()?;
    m.add_class::<endpoints::Subscription>()?;
    m.add_class::<services::Server>()?;
    m.add_class::<services::Client>()?;
    m.add_class::<arrays::ReceivedBuffer>()?;
    m.add_class::<arrays::LoanedBuffer>()?;
    m.add_class::<arrays::DeviceArray>()?;
    m.add_class::<user_types::MessageType>()?;
    m.add_class::<bag::BagReader>()?;
    m.add_class::<bag::BagMessages>()?;
    m.add_class::<bag::BagMessage>()?;
    m.add_class::<bag::BagWriter>()?;
    m.add_function(wrap_pyfunction!(endpoints::wait, m)?)?;
    m.add_function(wrap_pyfunction!(graph::topic_names_and_types, m)?)?;
    m.add_function(wrap_pyfunction!(graph::service_names_and_types, m)?)?;
    m.add_function(wrap_pyfunction!(graph::node_names_and_namespaces, m)?)?;
    m.add_function(wrap_pyfunction!(graph::wait_for_discovery, m)?)?;
    m.add_function(wrap_pyfunction!(graph::topic_endpoints, m)?)?;
    messages::register(m)
}
