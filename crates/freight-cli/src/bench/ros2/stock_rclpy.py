"""The stock ROS 2 side of `freight bench ros2`: rclpy on its defaults, nothing of freight.

    python stock_rclpy.py {pub,sub} TOPIC (image WIDTH HEIGHT | cloud POINTS)
                          [--warmup N] [--count N] [--duration SECS]
    python stock_rclpy.py probe

It runs in a stock ROS 2 interpreter (rclpy on rmw_fastrtps_cpp from PyPI) as a ROS 2
user would write the node: `create_publisher(Type, topic, 10)` (rclpy's default profile:
reliable, volatile, keep last 10), a callback subscription spun by `rclpy.spin_once`,
no DDS configuration, no environment of its own. `freight bench ros2` embeds this file
in the binary, writes it to a temporary directory and starts two of them, each pinned to
its own CPU, in a private network namespace. freight's Python twin is freight_py.py:
the same protocol through freight's rclpy-shaped API.

Protocol (the same in every stack of the benchmark):

* data on TOPIC (sensor_msgs/Image bgra8, or sensor_msgs/PointCloud2 of x, y, z
  float32 and r, g, b uint8: 15 bytes a point), acks on TOPIC_ack (std_msgs/Header
  whose frame_id repeats the data's);
* the publisher first sends small `hello` messages (no data) every 0.2 s until one is
  acked: then both directions are matched at both ends;
* message k: the publisher writes every byte of the payload with (k % 255) + 1 (a camera
  writes its whole frame), names it `w<k>` (warm-up) or `m<k>` (measured) in
  header.frame_id, stamps header.stamp with CLOCK_MONOTONIC (`time.monotonic_ns()`) as
  the last thing before `publish`, and waits for the ack before it sends k + 1: one
  message in flight;
* the subscriber, in its callback, checks the payload's length and 64 bytes spread over
  it (first and last included), then reads CLOCK_MONOTONIC: one-way latency = that minus
  the stamp (measured messages only); then it acks;
* after --count measured round trips or --duration seconds (whichever first) the
  publisher sends `stop` (no data); the subscriber acks it and prints
  `SAMPLES {"latency_ns": [...]}`, the publisher `RESULT {"round_trips": n,
  "elapsed_ns": t}` (t: wall time of the measured round trips).

Every wait is bounded; a failure prints `ERROR <what>` and exits with status 2.
"""

import array
import sys

import numpy as np
import rclpy
from bench_protocol import fail, fill_value, parse, publisher, subscriber
from rclpy.node import Node
from sensor_msgs.msg import Image, PointCloud2, PointField
from std_msgs.msg import Header


def make_message(kind, dims):
    """The data message, its `data` a zeroed array.array that the publisher rewrites in
    place (rclpy takes an array('B') as it is; anything else is checked byte by byte)."""
    if kind == "image":
        width, height = dims
        msg = Image(width=width, height=height, encoding="bgra8", step=4 * width)
        nbytes = msg.step * height
    else:
        (points,) = dims
        msg = PointCloud2(height=1, width=points, point_step=15, row_step=15 * points, is_dense=True)
        msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]
        msg.fields += [PointField(name=n, offset=12 + i, datatype=PointField.UINT8, count=1) for i, n in enumerate("rgb")]
        nbytes = msg.row_step
    msg.data = array.array("B", bytes(nbytes))
    return msg


def stock_messages(kind, dims):
    """Message k: one message, its array.array rewritten in place with k's value (what
    rclpy then copies into Fast DDS)."""
    msg = make_message(kind, dims)
    frame = np.frombuffer(msg.data, dtype=np.uint8)  # a writable view of the array.array

    def message(_pub, k):
        frame.fill(fill_value(k))
        return msg

    return message


def probe():
    """`PROBE <middleware>, Fast DDS <version>`: what this interpreter runs by default."""
    from importlib import metadata

    from rclpy.utilities import get_rmw_implementation_identifier

    version = "unknown"
    for package in ("ros-fastdds", "ros-fastrtps"):  # Fast DDS 3 and 2
        try:
            version = metadata.version(package)
            break
        except metadata.PackageNotFoundError:
            pass
    print(f"PROBE {get_rmw_implementation_identifier()}, Fast DDS {version}", flush=True)


def main():
    if sys.argv[1:] == ["probe"]:
        probe()
        return
    args = parse()
    rclpy.init()
    node = Node(f"bench_ros2_{args.role}")
    msg_type = Image if args.kind == "image" else PointCloud2
    if args.role == "pub":
        publisher(args, node, rclpy.spin_once, msg_type, Header, stock_messages(args.kind, args.dims))
    else:
        subscriber(args, node, rclpy.spin_once, msg_type, Header)
    # This process must be the stock stack only.
    if any(m == "freight" or m.startswith("freight.") for m in sys.modules):
        fail("freight was imported into the stock process")
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
