"""Quality of service, with rclpy's names.

A profile is given wherever rclpy takes one; an ``int`` is a keep-last depth::

    node.create_subscription(Image, "image", on_image, 5)
    node.create_subscription(Image, "image", on_image, qos_profile_sensor_data)
    node.create_publisher(Image, "map", QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))

A full queue never slows a publisher unless both ends asked for it: only a
reliable keep-all publisher waits, up to ``max_blocking_time`` seconds, for room
in a reliable keep-all subscription's queue, then raises
:class:`freight.QueueFullError` (every other subscription still got the
message). With keep-last history (rclpy's default) or best effort, a slow or
stopped subscriber misses messages and nobody else waits for it, as with Fast
DDS. Over DDS the policies mean what they mean in ROS 2.
Deadline, lifespan and liveliness are not supported and are refused.
"""

import enum


class HistoryPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    KEEP_LAST = 1
    KEEP_ALL = 2


class ReliabilityPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    RELIABLE = 1
    BEST_EFFORT = 2


class DurabilityPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


class QoSProfile:
    """A QoS profile. ``depth`` (for keep-last history) or ``history`` must be given, as in rclpy."""

    __slots__ = ("history", "depth", "reliability", "durability", "max_blocking_time")

    def __init__(
        self,
        *,
        history=None,
        depth=None,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
        max_blocking_time=0.1,
    ):
        if history is None:
            if depth is None:
                raise TypeError("QoSProfile needs depth= (keep-last history) or history=")
            history = HistoryPolicy.KEEP_LAST
        self.history = HistoryPolicy(history)
        if self.history != HistoryPolicy.KEEP_ALL and depth is None:
            depth = 10
        if depth is not None and (not isinstance(depth, int) or depth < 0):
            raise ValueError(f"depth must be a non-negative int, not {depth!r}")
        if self.history != HistoryPolicy.KEEP_ALL and depth < 1:
            raise ValueError("a keep-last history needs depth >= 1")
        self.depth = depth or 0
        self.reliability = ReliabilityPolicy(reliability)
        self.durability = DurabilityPolicy(durability)
        self.max_blocking_time = float(max_blocking_time)

    def _native(self):
        """The tuple freight._native takes."""
        history = "keep_all" if self.history == HistoryPolicy.KEEP_ALL else "keep_last"
        reliability = "best_effort" if self.reliability == ReliabilityPolicy.BEST_EFFORT else "reliable"
        durability = "transient_local" if self.durability == DurabilityPolicy.TRANSIENT_LOCAL else "volatile"
        return (history, self.depth, reliability, durability, self.max_blocking_time)

    def __eq__(self, other):
        if not isinstance(other, QoSProfile):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"QoSProfile({fields})"


def as_profile(qos):
    """A profile from what the API accepts: a profile, or an int keep-last depth."""
    if isinstance(qos, QoSProfile):
        return qos
    if isinstance(qos, int) and not isinstance(qos, bool):
        return QoSProfile(depth=qos)
    raise TypeError(f"qos_profile must be a QoSProfile or an int depth, not {type(qos).__name__}")


#: Sensor streams: best effort, keep last 5 (rclpy's ``qos_profile_sensor_data``).
qos_profile_sensor_data = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
#: Reliable, volatile, keep last 10.
qos_profile_system_default = QoSProfile(depth=10)

__all__ = [
    "HistoryPolicy",
    "ReliabilityPolicy",
    "DurabilityPolicy",
    "QoSProfile",
    "qos_profile_sensor_data",
    "qos_profile_system_default",
]
