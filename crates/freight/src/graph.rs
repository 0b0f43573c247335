//! The ROS graph as this host sees it: topics, their types, their endpoints,
//! and which memory each publisher/subscription pair exchanges buffers in.
//!
//! Everything is read from iceoryx2's own records: a topic is a service, its
//! type an attribute, an endpoint a port whose name carries its advertisement
//! ([`crate::endpoint`]), a node an iceoryx2 node. Nothing else is registered.

use std::collections::HashMap;

use freight_msg::{BackendKind, BackendSet};
use iceoryx2::node::NodeView;
use iceoryx2::prelude::*;
use iceoryx2::service::static_config::messaging_pattern::MessagingPattern as StaticPattern;

use crate::context::Node;
use crate::endpoint::{PublisherAd, SubscriberAd, WaitMode};
use crate::negotiation::negotiate;
use crate::qos::{Durability, Reliability};
use crate::sample::Transport;
use crate::topic::Ipc;

/// Reading the graph failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The shared-memory records could not be read.
    #[error("reading the graph from shared memory: {0}; check that /dev/shm is readable")]
    SharedMemory(String),
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
        let prefix = format!("freight/{}/", self.inner.ctx.inner.domain_id);
        let type_key = crate::topic::type_key();
        let mut topics = Vec::new();
        Ipc::list(self.inner.iox.config(), |details| {
            let s = &details.static_details;
            if let (StaticPattern::PublishSubscribe(_), Some(topic)) =
                (s.messaging_pattern(), s.name().as_str().strip_prefix(&prefix))
            {
                let type_name = s.attributes().key_value(&type_key, 0).map(|v| v.to_string()).unwrap_or_default();
                topics.push(TopicInfo { name: format!("/{topic}"), type_name });
            }
            CallbackProgression::Continue
        })
        .map_err(|e| GraphError::SharedMemory(format!("{e:?}")))?;
        topics.sort();
        Ok(topics)
    }

    /// The endpoints of `topic` on this host and how each pair exchanges
    /// buffers; `None` when the topic does not exist.
    pub fn topic_graph(&self, topic: &str) -> Result<Option<TopicGraph>, GraphError> {
        let Some(info) = self.topic_names_and_types()?.into_iter().find(|t| t.name == topic) else {
            return Ok(None);
        };
        let name = ServiceName::new(&format!("freight/{}{topic}", self.inner.ctx.inner.domain_id))
            .map_err(|e| GraphError::SharedMemory(format!("{e:?}")))?;
        let service = match self.inner.iox.service_builder(&name).publish_subscribe::<[u8]>().open() {
            Ok(s) => s,
            // It went away between listing and opening.
            Err(_) => return Ok(None),
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
                });
            }
            CallbackProgression::Continue
        });
        let publishers = endpoints.len();
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
                });
            }
            CallbackProgression::Continue
        });
        let pairings = pairings(&endpoints, publishers);
        Ok(Some(TopicGraph { topic: info, endpoints, pairings }))
    }
}

/// Applies the publisher's route choice and [`negotiate`] to every pair.
fn pairings(endpoints: &[Endpoint], publishers: usize) -> Vec<Pairing> {
    let (pubs, subs) = endpoints.split_at(publishers);
    let mut out = Vec::with_capacity(pubs.len() * subs.len());
    for (pi, p) in pubs.iter().enumerate() {
        // The publisher sends through shared memory as soon as one subscription
        // is in another process (or the topic is transient local).
        let shm_route = p.durability == Durability::TransientLocal || subs.iter().any(|s| s.pid != p.pid);
        let (transport, host) =
            if shm_route { (Transport::Shm, BackendKind::Shm) } else { (Transport::Intra, BackendKind::Cpu) };
        // `cpu` / `shm` publishers put buffers in the frame, wherever it goes.
        let offered = match p.backend {
            Some(BackendKind::Cpu | BackendKind::Shm) | None => host,
            Some(device) => device,
        };
        for (si, s) in subs.iter().enumerate() {
            let accepts = s.accepts.unwrap_or(BackendSet::CPU_ONLY);
            out.push(Pairing {
                publisher: pi,
                subscription: publishers + si,
                transport,
                backend: negotiate(offered, host, accepts),
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
        }
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
        let local = vec![publisher(1, BackendKind::Shm), subscription(1, &[BackendKind::Shm])];
        assert_eq!(pairings(&local, 1)[0].transport, Transport::Intra);
        assert_eq!(pairings(&local, 1)[0].backend, BackendKind::Cpu);
    }
}
