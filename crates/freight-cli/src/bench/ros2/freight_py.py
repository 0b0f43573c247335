"""freight's Python side of `freight bench ros2`: the stock script (stock_rclpy.py) through
freight's rclpy-shaped API, on freight's local plane only (`freight.init(local_only=True)`:
shared memory, no DDS).

    python freight_py.py {pub,sub} TOPIC (image WIDTH HEIGHT | cloud POINTS)
                         [--warmup N] [--count N] [--duration SECS]
    python freight_py.py probe

The protocol, the checks and the output are stock_rclpy.py's; what differs is what a
freight user does differently: the publisher loans each message's payload from shared
memory (`pub.loan`) and writes it there, instead of rewriting one array.array that
rclpy then copies, and the subscriber's `msg.data` is a read-only view of that memory.
"""

import argparse
import json
import sys
import time

import numpy as np

import freight
from freight.msgs.sensor_msgs import Image, PointCloud2, PointField
from freight.msgs.std_msgs import Header

#: Seconds for the first ack (discovery and matching of both directions).
HELLO_LIMIT = 60.0
#: Seconds one ack may take once the stream runs.
ACK_LIMIT = 30.0
#: Seconds the subscriber waits for its next message.
IDLE_LIMIT = 90.0
#: Bytes of each message the subscriber checks.
CHECKS = 64
#: As rclpy: an int is reliable, volatile, keep last 10.
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


#: sensor_msgs/PointField datatypes (freight's Python class has no constants).
FLOAT32, UINT8 = 7, 2


def cloud_fields():
    """x, y, z float32 and r, g, b uint8: 15 bytes a point."""
    return [PointField(name=n, offset=4 * i, datatype=FLOAT32, count=1) for i, n in enumerate("xyz")] + [
        PointField(name=n, offset=12 + i, datatype=UINT8, count=1) for i, n in enumerate("rgb")
    ]


def make_message(pub, kind, dims, value):
    """A data message whose payload is a fresh loan of `pub`'s shared memory, every byte
    written with `value`."""
    if kind == "image":
        width, height = dims
        frame = pub.loan((height, width, 4), np.uint8)
        frame.fill(value)
        return Image(width=width, height=height, encoding="bgra8", step=4 * width, data=frame)
    (points,) = dims
    cloud = pub.loan((points, 15), np.uint8)
    cloud.fill(value)
    return PointCloud2(
        height=1, width=points, fields=cloud_fields(), point_step=15, row_step=15 * points, is_dense=True, data=cloud
    )


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
            freight.spin_once(node, timeout_sec=left)
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

    measured, start = 0, None
    for k in range(args.warmup + args.count):
        if k == args.warmup:
            start = time.monotonic_ns()
        elif start is not None and time.monotonic_ns() - start >= args.duration * 1e9:
            break
        msg = make_message(pub, args.kind, args.dims, fill_value(k))
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
        freight.spin_once(node, timeout_sec=1.0)
        if state["error"]:
            fail(state["error"])
        if time.monotonic() - state["last"] > IDLE_LIMIT:
            fail(f"timed out: no message for {IDLE_LIMIT:.0f} s")
    print("SAMPLES " + json.dumps({"latency_ns": state["samples"]}), flush=True)


def probe():
    """`PROBE freight <version>`: what this interpreter runs."""
    from importlib import metadata

    print(f"PROBE freight {metadata.version('freight')} (Python), local plane only", flush=True)


def main():
    if sys.argv[1:] == ["probe"]:
        probe()
        return
    args = parse()
    freight.init(local_only=True)
    node = freight.Node(f"bench_ros2_{args.role}")
    if args.role == "pub":
        publisher(args, node)
    else:
        subscriber(args, node)
    node.destroy_node()
    freight.shutdown()


if __name__ == "__main__":
    main()
