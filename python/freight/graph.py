"""The ROS graph as rclpy shows it: :class:`TopicEndpointInfo` and the graph
methods of :class:`freight.Node` (``get_topic_names_and_types``, ``get_service_names_and_types``,
``get_node_names_and_namespaces``, ``get_publishers_info_by_topic``, ...).

What a node sees: this host's freight endpoints (shared memory) and everything
DDS discovery knows in the domain — stock ROS 2 nodes, named through their
``ros_discovery_info`` announcements, and freight on other hosts. Discovery
takes a moment: call ``node.wait_for_discovery(seconds)`` first, as ``ros2``
waits ``--spin-time``.
"""

import enum

from freight import _native
from freight.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy


class TopicEndpointTypeEnum(enum.IntEnum):
    """As rclpy's: what kind of endpoint a :class:`TopicEndpointInfo` is."""

    INVALID = 0
    PUBLISHER = 1
    SUBSCRIPTION = 2


class TopicEndpointInfo:
    """One publisher or subscription of a topic, with rclpy's attribute names
    (``node_name``, ``node_namespace``, ``topic_type``, ``endpoint_type``,
    ``qos_profile``) and what freight knows besides: ``host``, ``pid``,
    ``over_network`` (reached over DDS: another host, or a stock node),
    ``is_freight``, ``backend`` (a freight publisher's buffer memory) and
    ``is_spill`` (a freight publisher's second DDS writer, for the frames its
    ``/dev/shm`` has no room for).
    A stock endpoint whose node did not announce itself has the node name
    ``_NODE_NAME_UNKNOWN_``, as in rclpy."""

    __slots__ = (
        "node_name",
        "node_namespace",
        "topic_type",
        "endpoint_type",
        "qos_profile",
        "host",
        "pid",
        "over_network",
        "is_freight",
        "backend",
        "is_spill",
    )

    def __init__(self, row):
        kind, node, topic_type, reliability, durability, host, pid, over_network, is_freight, backend, is_spill = row
        if node in ("", "?"):
            self.node_namespace, self.node_name = "_NODE_NAMESPACE_UNKNOWN_", "_NODE_NAME_UNKNOWN_"
        else:
            namespace, _, name = node.rpartition("/")
            self.node_namespace, self.node_name = namespace or "/", name
        self.topic_type = topic_type
        self.endpoint_type = TopicEndpointTypeEnum[kind]
        self.qos_profile = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy[reliability.upper()],
            durability=DurabilityPolicy[durability.upper()],
        )
        self.host = host
        self.pid = pid
        self.over_network = over_network
        self.is_freight = is_freight
        self.backend = backend
        self.is_spill = is_spill

    def __repr__(self):
        return (
            f"TopicEndpointInfo(node={self.node_namespace.rstrip('/')}/{self.node_name}, "
            f"type={self.topic_type}, {self.endpoint_type.name}, {self.qos_profile.reliability.name}, "
            f"{'freight' if self.is_freight else 'stock'}{', over DDS' if self.over_network else ''})"
        )


class GraphMixin:
    """The graph methods of :class:`freight.Node` (it holds ``self._native``)."""

    def wait_for_discovery(self, timeout_sec=1.0):
        """Joins the DDS domain (if this context has not yet) and listens to
        discovery for ``timeout_sec``: the graph methods report what discovery
        knows when they are called."""
        _native.wait_for_discovery(self._native, float(timeout_sec))

    def get_topic_names_and_types(self, no_demangle=False):
        """``[(topic, [type])]``, sorted, as rclpy returns it."""
        topics = {}
        for name, type_name in _native.topic_names_and_types(self._native):
            topics.setdefault(name, []).append(type_name)
        return sorted(topics.items())

    def get_service_names_and_types(self):
        """``[(service, [type])]``, sorted, as rclpy returns it: this host's
        freight services and every service DDS discovery knows."""
        services = {}
        for name, type_name in _native.service_names_and_types(self._native):
            services.setdefault(name, []).append(type_name)
        return sorted(services.items())

    def get_node_names_and_namespaces(self):
        """``[(name, namespace)]``: this context's nodes, every node other ROS 2
        participants announce, and this host's freight nodes."""
        return _native.node_names_and_namespaces(self._native)

    def get_node_names(self):
        return [name for name, _ in self.get_node_names_and_namespaces()]

    def _endpoints(self, topic_name, kind):
        rows = _native.topic_endpoints(self._native, topic_name)
        return [TopicEndpointInfo(r) for r in rows if r[0] == kind]

    def get_publishers_info_by_topic(self, topic_name, no_mangle=False):
        """The publishers of ``topic_name``, as :class:`TopicEndpointInfo`."""
        return self._endpoints(topic_name, "PUBLISHER")

    def get_subscriptions_info_by_topic(self, topic_name, no_mangle=False):
        """The subscriptions of ``topic_name``, as :class:`TopicEndpointInfo`."""
        return self._endpoints(topic_name, "SUBSCRIPTION")

    def count_publishers(self, topic_name):
        return len(self.get_publishers_info_by_topic(topic_name))

    def count_subscribers(self, topic_name):
        return len(self.get_subscriptions_info_by_topic(topic_name))
