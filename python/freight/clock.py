"""ROS time: ``node.get_clock().now()``, as in rclpy (system time)."""

import time

from freight.msgs.builtin_interfaces import Time as TimeMsg


class Time:
    """A point in ROS time, in nanoseconds since the epoch."""

    __slots__ = ("nanoseconds",)

    def __init__(self, *, seconds=0, nanoseconds=0):
        self.nanoseconds = int(seconds * 1_000_000_000) + int(nanoseconds)

    def seconds_nanoseconds(self):
        return divmod(self.nanoseconds, 1_000_000_000)

    def to_msg(self):
        """As a ``builtin_interfaces/msg/Time``, for a header stamp."""
        sec, nanosec = self.seconds_nanoseconds()
        return TimeMsg(sec=sec, nanosec=nanosec)

    @classmethod
    def from_msg(cls, msg):
        return cls(seconds=msg.sec, nanoseconds=msg.nanosec)

    def __sub__(self, other):
        return (self.nanoseconds - other.nanoseconds) / 1e9

    def __eq__(self, other):
        return isinstance(other, Time) and self.nanoseconds == other.nanoseconds

    def __lt__(self, other):
        return self.nanoseconds < other.nanoseconds

    def __repr__(self):
        return f"Time(nanoseconds={self.nanoseconds})"


class Clock:
    """The system clock (rclpy's ``ROSClock`` without simulated time)."""

    def now(self):
        return Time(nanoseconds=time.time_ns())
