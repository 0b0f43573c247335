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

import argparse
import array
import json
import sys
import time

import numpy as np
import rclpy
from rclpy.node import Node
from sensor_msgs.msg import Image, PointCloud2, PointField
from std_msgs.msg import Header

#: Seconds for the first ack (discovery and matching of both directions).
HELLO_LIMIT = 60.0
#: Seconds one ack may take once the stream runs.
ACK_LIMIT = 30.0
#: Seconds the subscriber waits for its next message.
IDLE_LIMIT = 90.0
#: Bytes of each message the subscriber checks.
CHECKS = 64
#: rclpy's default profile for an int: reliable, volatile, keep last 10.
DEPTH = 10


def fail(what):
    print(f"ERROR {what}", flush=True)
    sys.exit(2)


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["pub", "sub"])
    p.add_argument("topic")
    p.add_argument("kind", choices=["image", "cloud"])
    p.add_argument("dims", type=int, nargs="+")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--duration", type=float, default=5.0)
    return p.parse_args()


def fill_value(k):
    return k % 255 + 1


def first_bad(data, expected_len, value):
    """None when `data` has `expected_len` bytes and the checked ones hold `value`."""
    if len(data) != expected_len or expected_len == 0:
        return f"{len(data)} bytes, expected {expected_len}"
    for j in range(CHECKS):
        i = j * (expected_len - 1) // (CHECKS - 1)
        if data[i] != value:
            return f"byte {i} is {data[i]}, expected {value}"
    return None


def payload_len(msg):
    return msg.step * msg.height if isinstance(msg, Image) else msg.row_step * msg.height


def stamp(msg):
    t = time.monotonic_ns()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)


def stamp_ns(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


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


def publisher(args, node):
    msg_type = Image if args.kind == "image" else PointCloud2
    pub = node.create_publisher(msg_type, args.topic, DEPTH)
    acked = []
    node.create_subscription(Header, args.topic + "_ack", lambda m: acked.append(m.frame_id), DEPTH)
    print("READY", flush=True)

    def wait_ack(name, limit):
        end = time.monotonic() + limit
        while name not in acked:
            left = end - time.monotonic()
            if left <= 0:
                return False
            rclpy.spin_once(node, timeout_sec=left)
        acked.clear()
        return True

    control = msg_type()
    control.header.frame_id = "hello"
    end = time.monotonic() + HELLO_LIMIT
    while True:
        pub.publish(control)
        if wait_ack("hello", 0.2):
            break
        if time.monotonic() > end:
            fail(f"no subscriber acked within {HELLO_LIMIT:.0f} s")

    msg = make_message(args.kind, args.dims)
    frame = np.frombuffer(msg.data, dtype=np.uint8)  # a writable view of the array.array
    measured, start = 0, None
    for k in range(args.warmup + args.count):
        if k == args.warmup:
            start = time.monotonic_ns()
        elif start is not None and time.monotonic_ns() - start >= args.duration * 1e9:
            break
        frame.fill(fill_value(k))
        msg.header.frame_id = f"{'w' if start is None else 'm'}{k}"
        stamp(msg)
        pub.publish(msg)
        if not wait_ack(msg.header.frame_id, ACK_LIMIT):
            fail(f"timed out: no ack for message {k} within {ACK_LIMIT:.0f} s")
        measured += start is not None
    elapsed = time.monotonic_ns() - start if start is not None else 0
    control.header.frame_id = "stop"
    pub.publish(control)
    if not wait_ack("stop", ACK_LIMIT):
        fail(f"timed out: no ack for stop within {ACK_LIMIT:.0f} s")
    print("RESULT " + json.dumps({"round_trips": measured, "elapsed_ns": elapsed}), flush=True)


def subscriber(args, node):
    msg_type = Image if args.kind == "image" else PointCloud2
    ack_pub = node.create_publisher(Header, args.topic + "_ack", DEPTH)
    state = {"done": False, "error": None, "samples": [], "last": time.monotonic()}

    def on_data(msg):
        state["last"] = time.monotonic()
        name = msg.header.frame_id
        if name[:1] in ("w", "m"):
            k = int(name[1:])
            bad = first_bad(msg.data, payload_len(msg), fill_value(k))
            now = time.monotonic_ns()
            if bad:
                state["error"] = f"message {k}: {bad}"
                return
            if name[0] == "m":
                state["samples"].append(now - stamp_ns(msg))
        ack_pub.publish(Header(frame_id=name))
        state["done"] = name == "stop"

    node.create_subscription(msg_type, args.topic, on_data, DEPTH)
    print("READY", flush=True)
    while not state["done"]:
        rclpy.spin_once(node, timeout_sec=1.0)
        if state["error"]:
            fail(state["error"])
        if time.monotonic() - state["last"] > IDLE_LIMIT:
            fail(f"timed out: no message for {IDLE_LIMIT:.0f} s")
    print("SAMPLES " + json.dumps({"latency_ns": state["samples"]}), flush=True)


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
    if args.role == "pub":
        publisher(args, node)
    else:
        subscriber(args, node)
    # This process must be the stock stack only.
    if any(m == "freight" or m.startswith("freight.") for m in sys.modules):
        fail("freight was imported into the stock process")
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
