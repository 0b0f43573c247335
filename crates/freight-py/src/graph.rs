//! The ROS graph as a node sees it, for the rclpy-named graph methods of
//! `freight.Node` (`get_topic_names_and_types`, `get_node_names_and_namespaces`,
//! `get_publishers_info_by_topic`, ...), which `python/freight/node.py` builds on
//! these functions.

use std::time::Duration;

use freight::graph::{EndpointKind, GraphError};
use freight::{Durability, Reliability};
use pyo3::prelude::*;

use crate::endpoints::Node;
use crate::errors::{error, Kind};

fn from_graph(e: GraphError) -> PyErr {
    let kind = match e {
        GraphError::Network(_) => Kind::Network,
        _ => Kind::SharedMemory,
    };
    error(kind, e.to_string())
}

/// `[(topic, type)]`, sorted: this host's freight topics and every topic DDS
/// discovery knows.
#[pyfunction]
pub(crate) fn topic_names_and_types(py: Python<'_>, node: &Node) -> PyResult<Vec<(String, String)>> {
    let topics = py.detach(|| node.inner().topic_names_and_types()).map_err(from_graph)?;
    Ok(topics.into_iter().map(|t| (t.name, t.type_name)).collect())
}

/// `[(service, type)]`, sorted: this host's freight services and every
/// service DDS discovery knows.
#[pyfunction]
pub(crate) fn service_names_and_types(py: Python<'_>, node: &Node) -> PyResult<Vec<(String, String)>> {
    let services = py.detach(|| node.inner().service_names_and_types()).map_err(from_graph)?;
    Ok(services.into_iter().map(|s| (s.name, s.type_name)).collect())
}

/// `[(name, namespace)]`, sorted.
#[pyfunction]
pub(crate) fn node_names_and_namespaces(py: Python<'_>, node: &Node) -> PyResult<Vec<(String, String)>> {
    py.detach(|| node.inner().node_names_and_namespaces()).map_err(from_graph)
}

/// Joins the domain if not yet and listens to discovery for `seconds`, without
/// holding the GIL.
#[pyfunction]
pub(crate) fn wait_for_discovery(py: Python<'_>, node: &Node, seconds: f64) -> PyResult<()> {
    let time = Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::ZERO);
    py.detach(|| node.inner().wait_for_discovery(time)).map_err(from_graph)
}

/// One endpoint of a topic, as `freight.TopicEndpointInfo` takes it:
/// `(kind, node fully qualified name, type, reliability, durability, host, pid,
/// over_network, freight, backend, spill)`.
type EndpointTuple =
    (&'static str, String, String, &'static str, &'static str, String, u32, bool, bool, Option<String>, bool);

/// The endpoints of `topic` (relative names resolve in the node's namespace); empty
/// when it does not exist.
#[pyfunction]
pub(crate) fn topic_endpoints(py: Python<'_>, node: &Node, topic: &str) -> PyResult<Vec<EndpointTuple>> {
    let topic = node.inner().resolve_topic_name(topic).map_err(|e| error(Kind::InvalidName, e.to_string()))?;
    let graph = py.detach(|| node.inner().topic_graph(&topic)).map_err(from_graph)?;
    let Some(graph) = graph else { return Ok(Vec::new()) };
    let type_name = graph.topic.type_name;
    Ok(graph
        .endpoints
        .into_iter()
        .map(|e| {
            (
                if e.kind == EndpointKind::Publisher { "PUBLISHER" } else { "SUBSCRIPTION" },
                e.node,
                type_name.clone(),
                if e.reliability == Reliability::Reliable { "reliable" } else { "best_effort" },
                if e.durability == Durability::TransientLocal { "transient_local" } else { "volatile" },
                e.host,
                e.pid,
                e.over_network,
                e.freight,
                e.backend.map(|b| b.name().to_string()),
                e.spill,
            )
        })
        .collect())
}
