//! The context (one per process and ROS domain, like `rclcpp::Context`) and nodes.

use std::sync::{Arc, OnceLock};

use freight_backend::{Backend, CpuBackend, FakeDeviceBackend, ShmBackend};
use freight_dds::{DdsConfig, DdsError, Participant};
use freight_msg::{BackendKind, BackendSet, Message};

use crate::error::{ContextError, CreateError};
use crate::names::{expand_topic, normalize_namespace, validate_node_name};
use crate::publisher::{Publisher, PublisherOptions};
use crate::qos::QoS;
use crate::ros_discovery::RosDiscovery;
use crate::subscription::{Subscription, SubscriptionOptions};
use crate::topic::Ipc;

/// Resource limits of a context. Every endpoint of a topic must be created with
/// the same limits (the first one creates the topic's shared-memory service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest subscription queue; also what `KeepAll` means. Default 16.
    pub max_depth: usize,
    /// Most messages a transient-local endpoint may ask for (its depth).
    /// Default 1, what latched ROS topics (`/map`, `/robot_description`,
    /// `/tf_static`) use. Every publisher on shared memory keeps this many of
    /// its latest messages for late joiners, whatever its own durability, so
    /// they stay resident: raise it only as far as your topics need.
    pub max_history: usize,
    /// Publishers per topic. Default 16.
    pub max_publishers: usize,
    /// Subscriptions per topic. Default 16.
    pub max_subscriptions: usize,
    /// Received samples one subscription may hold at once. Default 16.
    pub max_held_samples: usize,
    /// Largest message, all buffers included. Default 4 GiB.
    pub max_message_bytes: usize,
    /// Capacity of this process's fake-device pool. Default 256 MiB.
    pub fake_device_capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 16,
            max_history: 1,
            max_publishers: 16,
            max_subscriptions: 16,
            max_held_samples: 16,
            max_message_bytes: 4 << 30,
            fake_device_capacity: 256 << 20,
        }
    }
}

pub(crate) struct ContextInner {
    pub(crate) domain_id: u32,
    pub(crate) limits: Limits,
    cpu: Arc<dyn Backend>,
    shm: Arc<dyn Backend>,
    fake_device: OnceLock<Result<Arc<dyn Backend>, String>>,
    /// The network plane's configuration; `None`: local only.
    network: Option<DdsConfig>,
    /// The DDS participant, joined when the first endpoint needs it.
    participant: OnceLock<Result<Arc<Participant>, DdsError>>,
    /// Node names of stock ROS 2 endpoints, read when the graph is first asked for.
    ros_discovery: OnceLock<Option<RosDiscovery>>,
}

impl ContextInner {
    /// The backend of `kind`, if this process can use it.
    pub(crate) fn backend(&self, kind: BackendKind) -> Option<Arc<dyn Backend>> {
        match kind {
            BackendKind::Cpu => Some(self.cpu.clone()),
            BackendKind::Shm => Some(self.shm.clone()),
            BackendKind::FakeDevice => self
                .fake_device
                .get_or_init(|| {
                    FakeDeviceBackend::new(self.limits.fake_device_capacity)
                        .map(|b| Arc::new(b) as Arc<dyn Backend>)
                        .map_err(|e| e.to_string())
                })
                .as_ref()
                .ok()
                .cloned(),
            _ => None,
        }
    }

    /// The DDS participant of this context; `None` when it is local only.
    pub(crate) fn participant(&self) -> Result<Option<Arc<Participant>>, DdsError> {
        let Some(config) = &self.network else { return Ok(None) };
        self.participant.get_or_init(|| Participant::new(self.domain_id, config).map(Arc::new)).clone().map(Some)
    }

    /// The DDS participant for an endpoint on `topic`, with the error an
    /// endpoint reports.
    pub(crate) fn participant_for(&self, topic: &str) -> Result<Option<Arc<Participant>>, CreateError> {
        self.participant().map_err(|source| CreateError::Network { topic: topic.into(), source })
    }

    /// The `ros_discovery_info` reader, started on first use; `None` when
    /// local only or when it could not be created (node names then show `?`).
    pub(crate) fn ros_discovery(&self) -> Option<&RosDiscovery> {
        let participant = self.participant().ok().flatten()?;
        self.ros_discovery.get_or_init(|| RosDiscovery::new(&participant).ok()).as_ref()
    }

    /// Backends a subscription accepts unless told otherwise: every one this
    /// process can use. The fake device is a test backend and must be asked for.
    pub(crate) fn default_accepted(&self) -> BackendSet {
        BackendSet::of(&[BackendKind::Cpu, BackendKind::Shm])
    }
}

/// The entry point: one per process and ROS domain.
///
/// ```no_run
/// use freight::Context;
/// let ctx = Context::new()?; // domain from ROS_DOMAIN_ID, default 0
/// let node = ctx.create_node("camera")?;
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("domain_id", &self.inner.domain_id).finish()
    }
}

/// Builds a [`Context`] with explicit settings.
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    domain_id: Option<u32>,
    limits: Limits,
    network: Option<DdsConfig>,
}

impl Default for ContextBuilder {
    fn default() -> Self {
        ContextBuilder { domain_id: None, limits: Limits::default(), network: Some(DdsConfig::default()) }
    }
}

impl ContextBuilder {
    /// Uses this domain instead of `ROS_DOMAIN_ID`.
    pub fn domain_id(mut self, id: u32) -> Self {
        self.domain_id = Some(id);
        self
    }

    /// Uses these limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Configures the network plane (DDS). By default it reads
    /// `CYCLONEDDS_URI`, as Cyclone-based ROS 2 nodes do.
    ///
    /// ```no_run
    /// use freight::{Context, DdsConfig};
    /// let ctx = Context::builder().dds_config(DdsConfig::loopback()).create()?;
    /// # Ok::<_, freight::ContextError>(())
    /// ```
    pub fn dds_config(mut self, config: DdsConfig) -> Self {
        self.network = Some(config);
        self
    }

    /// No network plane: endpoints reach this host's freight peers only, and
    /// nothing is sent to or read from the network.
    pub fn local_only(mut self) -> Self {
        self.network = None;
        self
    }

    /// Creates the context.
    pub fn create(self) -> Result<Context, ContextError> {
        let domain_id = match self.domain_id {
            Some(d) => d,
            None => domain_from_env()?,
        };
        // iceoryx2 logs at info level and warns that it runs without a config
        // file, which is how freight means it; keep its console to errors.
        iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
        Ok(Context {
            inner: Arc::new(ContextInner {
                domain_id,
                limits: self.limits,
                cpu: Arc::new(CpuBackend),
                shm: Arc::new(ShmBackend::with_max_block_len(self.limits.max_message_bytes)),
                fake_device: OnceLock::new(),
                network: self.network,
                participant: OnceLock::new(),
                ros_discovery: OnceLock::new(),
            }),
        })
    }
}

fn domain_from_env() -> Result<u32, ContextError> {
    match std::env::var("ROS_DOMAIN_ID") {
        Err(_) => Ok(0),
        Ok(s) if s.trim().is_empty() => Ok(0),
        Ok(s) => s.trim().parse::<u32>().ok().filter(|d| *d <= 232).ok_or(ContextError::BadDomainId(s)),
    }
}

impl Context {
    /// A context with default limits on the domain from `ROS_DOMAIN_ID` (default 0).
    pub fn new() -> Result<Context, ContextError> {
        Self::builder().create()
    }

    /// A builder for explicit settings.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The ROS domain.
    pub fn domain_id(&self) -> u32 {
        self.inner.domain_id
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

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
            .map_err(|e| ContextError::SharedMemory(format!("node name {fqn:?}: {e:?}")))?;
        // Creating an iceoryx2 node also removes what dead nodes left behind.
        // iceoryx2 would install SIGINT/SIGTERM handlers of its own; signals
        // belong to the application (Python's KeyboardInterrupt, a Rust
        // program's default exit), so freight leaves them alone.
        let iox = iceoryx2::prelude::NodeBuilder::new()
            .name(&node_name)
            .signal_handling_mode(iceoryx2::prelude::SignalHandlingMode::Disabled)
            .create::<Ipc>()
            .map_err(|e| ContextError::SharedMemory(format!("{e:?}")))?;
        Ok(Node { inner: Arc::new(NodeInner { ctx: self.clone(), name: name.into(), namespace, iox }) })
    }
}

pub(crate) struct NodeInner {
    pub(crate) ctx: Context,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) iox: iceoryx2::node::Node<Ipc>,
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

    /// Expands a topic name relative to this node.
    pub fn resolve_topic_name(&self, topic: &str) -> Result<String, crate::names::NameError> {
        expand_topic(topic, &self.inner.namespace, &self.inner.name)
    }

    /// Creates a publisher of `M` on `topic`.
    ///
    /// ```no_run
    /// use freight::{Context, QoS};
    /// use freight::msgs::sensor_msgs::Image;
    /// let node = Context::new()?.create_node("camera")?;
    /// let publisher = node.create_publisher::<Image>("image_raw", QoS::sensor_data())?;
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_publisher<M: Message>(&self, topic: &str, qos: impl Into<QoS>) -> Result<Publisher<M>, CreateError> {
        self.create_publisher_with_options(topic, qos, PublisherOptions::default())
    }

    /// Creates a publisher with options (e.g. the backend its buffers live in).
    pub fn create_publisher_with_options<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
        options: PublisherOptions,
    ) -> Result<Publisher<M>, CreateError> {
        Publisher::create(self, &self.resolve_topic_name(topic)?, qos.into(), options)
    }

    /// Creates a subscription to `M` on `topic`, accepting every backend this
    /// process can use and waiting in the OS.
    pub fn create_subscription<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
    ) -> Result<Subscription<M>, CreateError> {
        self.create_subscription_with_options(topic, qos, SubscriptionOptions::default())
    }

    /// Creates a subscription with options (accepted backends, wait mode).
    pub fn create_subscription_with_options<M: Message>(
        &self,
        topic: &str,
        qos: impl Into<QoS>,
        options: SubscriptionOptions,
    ) -> Result<Subscription<M>, CreateError> {
        Subscription::create(self, &self.resolve_topic_name(topic)?, qos.into(), options)
    }
}
