//! Nodes: named participants of a context that own publishers and
//! subscriptions (each endpoint's constructor lives with the endpoint).

use std::sync::Arc;

use crate::context::Context;
use crate::error::{ContextError, ShmError};
use crate::names::{expand_topic, normalize_namespace, validate_node_name};
use crate::ros_discovery::Registration;
use crate::topic::{Ipc, OpenTopics};

impl Context {
    /// Creates a node in the root namespace.
    pub fn create_node(&self, name: &str) -> Result<Node, ContextError> {
        self.create_node_with_namespace(name, "/")
    }

    /// Creates a node in `namespace`.
    pub fn create_node_with_namespace(&self, name: &str, namespace: &str) -> Result<Node, ContextError> {
        validate_node_name(name)?;
        let namespace = normalize_namespace(namespace)?;
        let fqn = if namespace == "/" { format!("/{name}") } else { format!("{namespace}/{name}") };
        let node_name = iceoryx2::prelude::NodeName::new(&fqn)
            .map_err(ShmError::doing("the node's name as an iceoryx2 node name"))?;
        // Creating an iceoryx2 node also removes what dead nodes left behind.
        // iceoryx2 would install SIGINT/SIGTERM handlers of its own; signals
        // belong to the application (Python's KeyboardInterrupt, a Rust
        // program's default exit), so freight leaves them alone.
        let iox = iceoryx2::prelude::NodeBuilder::new()
            .config(&iceoryx2_config(&self.inner.limits))
            .name(&node_name)
            .signal_handling_mode(iceoryx2::prelude::SignalHandlingMode::Disabled)
            .create::<Ipc>()
            .map_err(ShmError::doing("creating the iceoryx2 node"))?;
        crate::process::add_own_node(iox.id().value());
        let in_graph = self.inner.ros_graph.add_node((namespace.clone(), name.to_string()));
        Ok(Node {
            inner: Arc::new(NodeInner {
                ctx: self.clone(),
                name: name.into(),
                namespace,
                iox,
                topics: OpenTopics::default(),
                _in_graph: in_graph,
            }),
        })
    }
}

/// iceoryx2's configuration for freight's nodes: the global one (a config
/// file, else the built-in defaults), sized to freight's limits.
///
/// A subscriber's `receive` walks every connection slot it has, on every
/// poll: one per publisher the service allows, and a buffer for publishers
/// that left while samples of theirs were still queued or held — 128 by
/// default. A topic has at most `max_publishers` publishers; a subscription
/// holds at most `max_held_samples` samples, and keeps at most `max_depth`
/// more when publishers say farewell (`delivery::farewell`), so more slots
/// are never used; with 128 an empty poll costs about four times what it
/// does with 16.
///
/// Two processes that open a new topic at once: one creates its services, the
/// other waits for the creation to finish, 1 s by default. Beside a build, two
/// subscriber processes of `freight bench paused` started together and the
/// second failed with `HangsInCreation` (not reproduced since; the creation
/// taking longer than the wait is the likely reason): it waits up to
/// [`CREATION_TIMEOUT`].
fn iceoryx2_config(limits: &crate::Limits) -> iceoryx2::config::Config {
    let mut config = crate::local_plane::iceoryx2_config().clone();
    config.defaults.publish_subscribe.subscriber_expired_connection_buffer =
        limits.max_publishers.max(limits.max_held_samples + limits.max_depth);
    config.global.creation_timeout = config.global.creation_timeout.max(CREATION_TIMEOUT);
    config
}

/// How long opening a service waits for another process to finish creating it.
const CREATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) struct NodeInner {
    pub(crate) ctx: Context,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) iox: iceoryx2::node::Node<Ipc>,
    /// The services of the topics its endpoints have open.
    pub(crate) topics: OpenTopics,
    /// Keeps the node in the ROS graph (`ros_discovery_info`) while it lives.
    _in_graph: Registration,
}

impl Drop for NodeInner {
    fn drop(&mut self) {
        crate::process::remove_own_node(self.iox.id().value());
    }
}

/// A node: a named participant that owns publishers and subscriptions.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<NodeInner>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({})", self.fully_qualified_name())
    }
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node's namespace (`/` for the root).
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// `namespace/name`.
    pub fn fully_qualified_name(&self) -> String {
        if self.inner.namespace == "/" {
            format!("/{}", self.inner.name)
        } else {
            format!("{}/{}", self.inner.namespace, self.inner.name)
        }
    }

    /// The context the node belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The node as the ROS graph keys it: namespace and name.
    pub(crate) fn graph_key(&self) -> (String, String) {
        (self.inner.namespace.clone(), self.inner.name.clone())
    }

    /// Expands a topic name relative to this node.
    pub fn resolve_topic_name(&self, topic: &str) -> Result<String, crate::names::NameError> {
        expand_topic(topic, &self.inner.namespace, &self.inner.name)
    }
}
