//! The ROS graph as this host sees it: topics, their types, their endpoints,
//! and which memory each publisher/subscription pair exchanges buffers in.
//!
//! This host's endpoints are read from iceoryx2's own records: a topic is a
//! service, its type an attribute, an endpoint a port whose name carries its
//! advertisement (`endpoint.rs`), a node an iceoryx2 node. Endpoints
//! elsewhere (another host, a stock ROS 2 node) come from DDS discovery; freight
//! ones among them describe themselves in their USER_DATA
//! (`PeerTag`, `network.rs`). Nothing else is registered.

use std::collections::HashMap;
use std::time::Duration;

use freight_dds::Discovered;

use freight_msg::{BackendKind, BackendSet};
use iceoryx2::node::NodeView;
use iceoryx2::prelude::*;
use iceoryx2::service::static_config::messaging_pattern::MessagingPattern as StaticPattern;

use crate::endpoint::{DeviceTag, Devices, PublisherAd, SubscriberAd, WaitMode};
use crate::error::ShmError;
use crate::negotiation::{is_device_pool, negotiate};
use crate::network::{served_locally, PeerTag};
use crate::node::Node;
use crate::qos::{Durability, Reliability};
use crate::sample::Transport;
use crate::topic::Ipc;

/// Reading the graph failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The shared-memory records could not be read.
    #[error("reading the graph from shared memory: {0}; check that /dev/shm is readable")]
    SharedMemory(#[from] ShmError),
    /// DDS discovery could not be read.
    #[error("reading DDS discovery: {0}")]
    Network(freight_dds::DdsError),
}

/// A topic and its message type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TopicInfo {
    /// Fully qualified topic name.
    pub name: String,
    /// ROS type name (`sensor_msgs/msg/Image`).
    pub type_name: String,
}

/// Publisher or subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointKind {
    /// A publisher.
    Publisher,
    /// A subscription.
    Subscription,
}

/// One endpoint of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Publisher or subscription.
    pub kind: EndpointKind,
    /// The node's fully qualified name (`?` if its node record is gone).
    pub node: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// Publishers: the memory their buffers live in.
    pub backend: Option<BackendKind>,
    /// Subscriptions: the backends they accept.
    pub accepts: Option<BackendSet>,
    /// Subscriptions: how they wait.
    pub wait: Option<WaitMode>,
    /// The device of each device-pool backend (`cuda`, `fake-device`) it
    /// offers (a publisher) or accepts (a subscription). Unknown (empty) for
    /// endpoints reached over DDS.
    pub devices: Devices,
    /// Reached over DDS: on another host, or not a freight endpoint.
    pub over_network: bool,
    /// A freight endpoint (else a stock DDS / ROS 2 one, whose node name and
    /// backends are unknown: `?` and `None`).
    pub freight: bool,
    /// A freight publisher's second DDS writer, on this host or another, for
    /// the frames its `/dev/shm` has no room for: made when the publisher
    /// foresaw that its QoS asks more than `/dev/shm` holds.
    pub spill: bool,
}

/// How one publisher and one subscription exchange buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pairing {
    /// Index of the publisher in [`TopicGraph::endpoints`].
    pub publisher: usize,
    /// Index of the subscription in [`TopicGraph::endpoints`].
    pub subscription: usize,
    /// How frames travel between them.
    pub transport: Transport,
    /// The memory the subscription receives buffers in.
    pub backend: BackendKind,
    /// The copies on the way from the publisher's memory to `backend`.
    pub copies: Copies,
    /// The device whose memory the subscription receives as is (`cuda`,
    /// `fake-device` zero copy).
    pub device: Option<DeviceTag>,
    /// The subscription accepts the publisher's device memory but is on
    /// another device, so it receives host bytes.
    pub other_device: bool,
}

/// The copies a buffer goes through between a publisher and a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copies {
    /// None: the subscription views the publisher's memory.
    ZeroCopy,
    /// The publisher copies its device memory to the host once per message,
    /// for every subscription that cannot take the device memory; this one
    /// views that copy.
    HostCopy,
    /// The device-to-host copy, then a private copy by the subscription,
    /// which does not take the shared memory the host copy is in.
    HostCopyThenPrivate,
    /// The subscription copies the shared memory into a buffer of its own.
    PrivateCopy,
    /// Serialized once per message as CDR over DDS, for every network reader.
    Serialized,
}

impl Pairing {
    /// What the pair's buffers go through, in a few words:
    /// `zero-copy, GPU-3f2a0102…`, `device→host copy once per message`,
    /// `zero-copy, mapped shm`.
    ///
    /// ```
    /// use freight::graph::{Copies, Pairing};
    /// use freight::{BackendKind, Transport};
    /// let p = Pairing {
    ///     publisher: 0,
    ///     subscription: 1,
    ///     transport: Transport::Shm,
    ///     backend: BackendKind::Cpu,
    ///     copies: Copies::HostCopy,
    ///     device: None,
    ///     other_device: true,
    /// };
    /// assert_eq!(p.explain(), "device\u{2192}host copy once per message; on another device");
    /// ```
    pub fn explain(&self) -> String {
        let mut s = match self.copies {
            Copies::ZeroCopy => "zero-copy".to_string(),
            Copies::HostCopy => "device\u{2192}host copy once per message".to_string(),
            Copies::HostCopyThenPrivate => "device\u{2192}host copy once per message, then a private copy".to_string(),
            Copies::PrivateCopy => "private copy".to_string(),
            Copies::Serialized => "serialized once per message".to_string(),
        };
        if let Some(d) = self.device {
            s += &format!(", {}", d.short());
        }
        if self.backend == BackendKind::CudaHost {
            s += ", mapped shm";
        }
        if self.other_device {
            s += "; on another device";
        }
        s
    }
}

/// A topic with its endpoints and their pairings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicGraph {
    /// The topic.
    pub topic: TopicInfo,
    /// Publishers and subscriptions, publishers first.
    pub endpoints: Vec<Endpoint>,
    /// Every publisher × subscription pair.
    pub pairings: Vec<Pairing>,
}

impl Node {
    /// Topics of this node's domain on this host, with their types, sorted.
    ///
    /// ```no_run
    /// let node = freight::Context::new()?.create_node("inspector")?;
    /// for t in node.topic_names_and_types()? {
    ///     println!("{} [{}]", t.name, t.type_name);
    /// }
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn topic_names_and_types(&self) -> Result<Vec<TopicInfo>, GraphError> {
        let mut topics: Vec<TopicInfo> = self
            .channels()?
            .into_iter()
            .filter_map(|c| Some(TopicInfo { name: format!("/{}", c.name.strip_prefix("rt/")?), ..c }))
            .collect();
        topics.sort();
        topics.dedup();
        Ok(topics)
    }

    /// Services of this node's domain on this host and those DDS discovery
    /// knows (stock ROS 2 nodes, freight on other hosts), with their types,
    /// sorted: rclpy's `get_service_names_and_types()`, one type per entry.
    /// As in ROS 2, a name is listed once a server or a client uses it.
    ///
    /// ```no_run
    /// let node = freight::Context::new()?.create_node("inspector")?;
    /// for s in node.service_names_and_types()? {
    ///     println!("{} [{}]", s.name, s.type_name); // "/enable [std_srvs/srv/SetBool]"
    /// }
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn service_names_and_types(&self) -> Result<Vec<TopicInfo>, GraphError> {
        // A service is known by its request topic, `rq/<name>Request`, of
        // type `<pkg>/srv/<Name>_Request`.
        let service_of = |topic: &str, request_type: &str| -> Option<TopicInfo> {
            let name = topic.strip_prefix("rq")?.strip_suffix("Request")?;
            let type_name = request_type.strip_suffix("_Request")?;
            name.starts_with('/').then(|| TopicInfo { name: name.into(), type_name: type_name.into() })
        };
        let mut services: Vec<TopicInfo> =
            self.channels()?.iter().filter_map(|c| service_of(&c.name, &c.type_name)).collect();
        services.sort();
        services.dedup();
        Ok(services)
    }

    /// Every topic of this domain, a service's request and reply topics
    /// included, by its DDS name (`rt/camera`, `rq/enableRequest`) with its
    /// ROS type name: this host's freight topics, then every topic DDS
    /// discovery knows. Unsorted, with repeats.
    fn channels(&self) -> Result<Vec<TopicInfo>, GraphError> {
        let prefix = format!("freight/{}", self.inner.ctx.inner.domain_id);
        let type_key = crate::topic::type_key();
        let mut channels = Vec::new();
        Ipc::list(self.inner.iox.config(), |details| {
            let s = &details.static_details;
            if let (StaticPattern::PublishSubscribe(_), Some(topic)) =
                (s.messaging_pattern(), s.name().as_str().strip_prefix(&prefix))
            {
                let type_name = s.attributes().key_value(&type_key, 0).map(|v| v.to_string()).unwrap_or_default();
                channels.push(TopicInfo { name: crate::network::dds_topic_name(topic), type_name });
            }
            CallbackProgression::Continue
        })
        .map_err(ShmError::doing("listing the services"))?;
        if let Some(d) = self.discovered()? {
            channels.extend(
                network_endpoints(&d)
                    .map(|e| TopicInfo { name: e.topic_name.clone(), type_name: ros_type_name(&e.type_name) }),
            );
        }
        Ok(channels)
    }

    /// Joins the DDS domain, if this context has not yet, and gives discovery
    /// `time` to hear from the domain's participants: the graph functions
    /// report what discovery knows at the moment they are called (`ros2 topic`
    /// waits for the same reason, its `--spin-time`).
    pub fn wait_for_discovery(&self, time: Duration) -> Result<(), GraphError> {
        self.discovered()?;
        std::thread::sleep(time);
        Ok(())
    }

    /// DDS discovery now; `None` in a local-only context.
    fn discovered(&self) -> Result<Option<Discovered>, GraphError> {
        let participant = self.inner.ctx.inner.participant().map_err(GraphError::Network)?;
        participant.map(|p| p.discovered().map_err(GraphError::Network)).transpose()
    }

    /// The nodes of this node's domain, as `(name, namespace)`, sorted: this
    /// context's, every node another ROS 2 participant announces (stock nodes,
    /// freight on other hosts and in other processes), and the freight nodes of this
    /// host's shared memory. Like rclpy's `get_node_names_and_namespaces()`.
    ///
    /// ```no_run
    /// let node = freight::Context::new()?.create_node("inspector")?;
    /// node.wait_for_discovery(std::time::Duration::from_secs(1))?;
    /// for (name, namespace) in node.node_names_and_namespaces()? {
    ///     println!("{namespace} {name}");
    /// }
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn node_names_and_namespaces(&self) -> Result<Vec<(String, String)>, GraphError> {
        // Joins the domain (if not yet), which starts reading announcements.
        self.discovered()?;
        let mut nodes = self.inner.ctx.inner.ros_graph.nodes();
        for fqn in node_names(self.inner.iox.config()).into_values() {
            if let Some((namespace, name)) = fqn.rsplit_once('/') {
                let namespace = if namespace.is_empty() { "/" } else { namespace };
                nodes.push((name.to_string(), namespace.to_string()));
            }
        }
        nodes.sort();
        nodes.dedup();
        Ok(nodes)
    }

    /// The endpoints of `topic` on this host and how each pair exchanges
    /// buffers; `None` when the topic does not exist.
    pub fn topic_graph(&self, topic: &str) -> Result<Option<TopicGraph>, GraphError> {
        let Some(info) = self.topic_names_and_types()?.into_iter().find(|t| t.name == topic) else {
            return Ok(None);
        };
        let mut endpoints = self.local_endpoints(topic)?;
        if let Some(d) = self.discovered()? {
            let graph = &self.inner.ctx.inner.ros_graph;
            endpoints.extend(remote_endpoints(&d, topic, |guid| graph.node_of(guid)));
        }
        if endpoints.is_empty() {
            // It went away after listing.
            return Ok(None);
        }
        // Publishers first, as `pairings` expects.
        endpoints.sort_by_key(|e| e.kind != EndpointKind::Publisher);
        let publishers = endpoints.iter().filter(|e| e.kind == EndpointKind::Publisher).count();
        let pairings = pairings(&endpoints, publishers);
        Ok(Some(TopicGraph { topic: info, endpoints, pairings }))
    }

    /// The endpoints of `topic` in this host's shared memory.
    fn local_endpoints(&self, topic: &str) -> Result<Vec<Endpoint>, GraphError> {
        let name = ServiceName::new(&format!("freight/{}{topic}", self.inner.ctx.inner.domain_id))
            .map_err(ShmError::doing("naming the topic's data service"))?;
        let service = match self.inner.iox.service_builder(&name).publish_subscribe::<[u8]>().open() {
            Ok(s) => s,
            // Not on this host (or gone since listing).
            Err(_) => return Ok(Vec::new()),
        };
        let nodes = node_names(self.inner.iox.config());
        let host = host_name();
        let node_of = |id: u128| nodes.get(&id).cloned().unwrap_or_else(|| "?".into());
        let mut endpoints = Vec::new();
        service.dynamic_config().list_publishers(|p| {
            if let Some(ad) = PublisherAd::decode(p.publisher_name.as_str()) {
                endpoints.push(Endpoint {
                    kind: EndpointKind::Publisher,
                    node: node_of(p.node_id.value()),
                    host: host.clone(),
                    pid: ad.pid,
                    reliability: ad.reliability,
                    durability: ad.durability,
                    backend: Some(ad.backend),
                    accepts: None,
                    wait: None,
                    devices: Devices::default().with(ad.backend, ad.device),
                    over_network: false,
                    freight: true,
                    spill: false,
                });
            }
            CallbackProgression::Continue
        });
        service.dynamic_config().list_subscribers(|s| {
            if let Some(ad) = SubscriberAd::decode(s.subscriber_name.as_str()) {
                endpoints.push(Endpoint {
                    kind: EndpointKind::Subscription,
                    node: node_of(s.node_id.value()),
                    host: host.clone(),
                    pid: ad.pid,
                    reliability: ad.reliability,
                    durability: ad.durability,
                    backend: None,
                    accepts: Some(ad.accepts),
                    wait: Some(ad.wait),
                    devices: ad.devices,
                    over_network: false,
                    freight: true,
                    spill: false,
                });
            }
            CallbackProgression::Continue
        });
        Ok(endpoints)
    }
}

/// DDS endpoints this host does not serve through shared memory.
fn network_endpoints(d: &Discovered) -> impl Iterator<Item = &freight_dds::DiscoveredEndpoint> {
    d.endpoints.iter().filter(|e| !served_locally(&e.user_data))
}

/// `sensor_msgs::msg::dds_::Image_` is `sensor_msgs/msg/Image`; other names stay.
fn ros_type_name(dds: &str) -> String {
    match dds.split_once("::dds_::") {
        Some((pkg, name)) => format!("{}/{}", pkg.replace("::", "/"), name.strip_suffix('_').unwrap_or(name)),
        None => dds.to_string(),
    }
}

/// The DDS endpoints of `topic` reached over the network; `ros_node` names
/// the node of a stock ROS 2 endpoint by its GUID.
fn remote_endpoints(d: &Discovered, topic: &str, ros_node: impl Fn(&[u8; 16]) -> Option<String>) -> Vec<Endpoint> {
    let dds_topic = crate::network::dds_topic_name(topic);
    network_endpoints(d)
        .filter(|e| e.topic_name == dds_topic)
        .map(|e| {
            let participant = d.participants.iter().find(|p| p.guid == e.participant_guid);
            let tag = PeerTag::decode(&e.user_data);
            Endpoint {
                kind: if e.is_writer { EndpointKind::Publisher } else { EndpointKind::Subscription },
                node: match &tag {
                    Some(t) => t.node.clone(),
                    None => ros_node(&e.guid).unwrap_or_else(|| "?".into()),
                },
                host: participant.and_then(|p| p.hostname.clone()).unwrap_or_else(|| "?".into()),
                pid: tag.as_ref().map(|t| t.pid).or(participant.and_then(|p| p.pid)).unwrap_or(0),
                reliability: if e.reliable { Reliability::Reliable } else { Reliability::BestEffort },
                durability: if e.transient_local { Durability::TransientLocal } else { Durability::Volatile },
                backend: tag.as_ref().and_then(|t| t.backend),
                accepts: tag.as_ref().and_then(|t| t.accepts),
                wait: None,
                devices: Devices::default(),
                over_network: true,
                freight: tag.is_some(),
                spill: tag.as_ref().is_some_and(|t| t.spill),
            }
        })
        .collect()
}

/// Applies the publisher's route choice and [`negotiate`] to every pair.
fn pairings(endpoints: &[Endpoint], publishers: usize) -> Vec<Pairing> {
    let (pubs, subs) = endpoints.split_at(publishers);
    let mut out = Vec::with_capacity(pubs.len() * subs.len());
    for (pi, p) in pubs.iter().enumerate() {
        // The publisher sends through shared memory as soon as one subscription
        // is in another process (or the topic is transient local, or its
        // frames are cuda-host memory).
        let shm_route = p.durability == Durability::TransientLocal
            || p.backend == Some(BackendKind::CudaHost)
            || subs.iter().any(|s| !s.over_network && s.pid != p.pid);
        let (transport, host) =
            if shm_route { (Transport::Shm, BackendKind::Shm) } else { (Transport::Intra, BackendKind::Cpu) };
        // `cpu` / `shm` publishers put buffers in the frame, wherever it goes.
        let offered = match p.backend {
            Some(BackendKind::Cpu | BackendKind::Shm) | None => host,
            Some(own) => own,
        };
        for (si, s) in subs.iter().enumerate() {
            let pairing = |transport, backend, copies| Pairing {
                publisher: pi,
                subscription: publishers + si,
                transport,
                backend,
                copies,
                device: None,
                other_device: false,
            };
            if p.over_network || s.over_network {
                // CDR over DDS, received into the subscriber's own memory.
                out.push(pairing(Transport::Network, BackendKind::Cpu, Copies::Serialized));
                continue;
            }
            let accepts = s.accepts.unwrap_or(BackendSet::CPU_ONLY);
            let same_device = s.devices.get(offered) == p.devices.get(offered);
            let backend = negotiate(offered, host, accepts, same_device);
            let copies = if backend == offered {
                Copies::ZeroCopy
            } else if is_device_pool(offered) {
                // The host copy is in the frame: viewed as is (or mapped), or
                // copied once more by a subscription that takes neither.
                if backend == BackendKind::Cpu && host == BackendKind::Shm {
                    Copies::HostCopyThenPrivate
                } else {
                    Copies::HostCopy
                }
            } else if backend == BackendKind::Cpu && host == BackendKind::Shm {
                Copies::PrivateCopy
            } else {
                // The same frame bytes, viewed (cpu in one process, shm or
                // mapped shm for a cuda-host frame).
                Copies::ZeroCopy
            };
            out.push(Pairing {
                device: if is_device_pool(backend) { p.devices.get(backend) } else { None },
                other_device: is_device_pool(offered) && accepts.contains(offered) && !same_device,
                ..pairing(transport, backend, copies)
            });
        }
    }
    out
}

fn node_names(config: &iceoryx2::config::Config) -> HashMap<u128, String> {
    let mut names = HashMap::new();
    let _ = iceoryx2::node::Node::<Ipc>::list(config, |state| {
        if let NodeState::Alive(view) = state {
            if let Some(details) = view.details() {
                names.insert(view.id().value(), details.name().as_str().to_string());
            }
        }
        CallbackProgression::Continue
    });
    names
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publisher(pid: u32, backend: BackendKind) -> Endpoint {
        Endpoint {
            kind: EndpointKind::Publisher,
            node: "/p".into(),
            host: "h".into(),
            pid,
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            backend: Some(backend),
            accepts: None,
            wait: None,
            devices: Devices::default(),
            over_network: false,
            freight: true,
            spill: false,
        }
    }

    fn tag(n: u8) -> Option<DeviceTag> {
        Some(DeviceTag([n; 8]))
    }

    fn on_device(e: Endpoint, kind: BackendKind, device: Option<DeviceTag>) -> Endpoint {
        Endpoint { devices: e.devices.with(kind, device), ..e }
    }

    type Row = (Transport, BackendKind, Copies, Option<DeviceTag>, bool);

    fn rows(eps: &[Endpoint]) -> Vec<Row> {
        pairings(eps, 1).iter().map(|p| (p.transport, p.backend, p.copies, p.device, p.other_device)).collect()
    }

    fn subscription(pid: u32, accepts: &[BackendKind]) -> Endpoint {
        Endpoint {
            kind: EndpointKind::Subscription,
            accepts: Some(BackendSet::of(accepts)),
            backend: None,
            wait: Some(WaitMode::Block),
            ..publisher(pid, BackendKind::Cpu)
        }
    }

    #[test]
    fn dds_type_names_read_as_ros_type_names() {
        assert_eq!(ros_type_name("sensor_msgs::msg::dds_::Image_"), "sensor_msgs/msg/Image");
        assert_eq!(ros_type_name("my_pkg::msg::dds_::A_b_"), "my_pkg/msg/A_b");
        assert_eq!(ros_type_name("PlainDdsType"), "PlainDdsType");
    }

    #[test]
    fn pairings_follow_the_route_and_the_negotiation_rule() {
        let eps = vec![
            publisher(1, BackendKind::FakeDevice),
            subscription(1, &[BackendKind::Shm, BackendKind::FakeDevice]),
            subscription(2, &[]),
            subscription(2, &[BackendKind::Shm]),
        ];
        let got: Vec<(Transport, BackendKind)> = pairings(&eps, 1).iter().map(|p| (p.transport, p.backend)).collect();
        assert_eq!(
            got,
            vec![
                (Transport::Shm, BackendKind::FakeDevice),
                (Transport::Shm, BackendKind::Cpu),
                (Transport::Shm, BackendKind::Shm)
            ]
        );
        let copies: Vec<Copies> = pairings(&eps, 1).iter().map(|p| p.copies).collect();
        assert_eq!(copies, vec![Copies::ZeroCopy, Copies::HostCopyThenPrivate, Copies::HostCopy]);
        let remote = Endpoint { over_network: true, ..subscription(9, &[BackendKind::Shm]) };
        let mixed = vec![publisher(1, BackendKind::Shm), subscription(1, &[BackendKind::Shm]), remote];
        let got: Vec<(Transport, BackendKind)> = pairings(&mixed, 1).iter().map(|p| (p.transport, p.backend)).collect();
        // The network subscriber gets CDR and does not pull the local pair onto shared memory.
        assert_eq!(got, vec![(Transport::Intra, BackendKind::Cpu), (Transport::Network, BackendKind::Cpu)]);
        let local = vec![publisher(1, BackendKind::Shm), subscription(1, &[BackendKind::Shm])];
        assert_eq!(pairings(&local, 1)[0].transport, Transport::Intra);
        assert_eq!(pairings(&local, 1)[0].backend, BackendKind::Cpu);
        assert_eq!(pairings(&local, 1)[0].copies, Copies::ZeroCopy);
    }

    #[test]
    fn device_memory_pairs_only_on_the_same_device() {
        use BackendKind::*;
        for pool in [Cuda, FakeDevice] {
            let eps = vec![
                on_device(publisher(1, pool), pool, tag(1)),
                on_device(subscription(2, &[pool, Shm]), pool, tag(1)),
                on_device(subscription(3, &[pool, Shm]), pool, tag(2)),
                subscription(4, &[]),
                on_device(subscription(5, &[pool, CudaHost, Shm]), pool, tag(2)),
            ];
            assert_eq!(
                rows(&eps),
                vec![
                    (Transport::Shm, pool, Copies::ZeroCopy, tag(1), false),
                    (Transport::Shm, Shm, Copies::HostCopy, None, true),
                    (Transport::Shm, Cpu, Copies::HostCopyThenPrivate, None, false),
                    (Transport::Shm, CudaHost, Copies::HostCopy, None, true),
                ],
                "{pool}"
            );
            let explained: Vec<String> = pairings(&eps, 1).iter().map(Pairing::explain).collect();
            assert_eq!(explained[0], "zero-copy, GPU-01010101\u{2026}");
            assert_eq!(explained[1], "device\u{2192}host copy once per message; on another device");
            assert_eq!(explained[3], "device\u{2192}host copy once per message, mapped shm; on another device");
        }
        // In one process the host copy is a heap frame: viewed, not copied again.
        let eps = vec![
            on_device(publisher(1, FakeDevice), FakeDevice, tag(1)),
            on_device(subscription(1, &[FakeDevice]), FakeDevice, tag(1)),
            subscription(1, &[]),
        ];
        assert_eq!(
            rows(&eps),
            vec![
                (Transport::Intra, FakeDevice, Copies::ZeroCopy, tag(1), false),
                (Transport::Intra, Cpu, Copies::HostCopy, None, false),
            ]
        );
    }

    #[test]
    fn cuda_host_frames_go_through_shared_memory_and_are_mapped_or_viewed() {
        use BackendKind::*;
        let eps =
            vec![publisher(1, CudaHost), subscription(1, &[CudaHost]), subscription(1, &[Shm]), subscription(2, &[])];
        assert_eq!(
            rows(&eps),
            vec![
                (Transport::Shm, CudaHost, Copies::ZeroCopy, None, false),
                (Transport::Shm, Shm, Copies::ZeroCopy, None, false),
                (Transport::Shm, Cpu, Copies::PrivateCopy, None, false),
            ]
        );
        assert_eq!(pairings(&eps, 1)[0].explain(), "zero-copy, mapped shm");
    }
}
