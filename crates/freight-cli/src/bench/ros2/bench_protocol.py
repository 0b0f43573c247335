"""The protocol of `freight bench ros2` that both Python stacks run: stock_rclpy.py
(stock rclpy) and freight_py.py (freight's Python API) differ only in how they make a
message, and spin. Standard library only: the stock process imports nothing of freight.
The protocol is described in stock_rclpy.py.
"""

import argparse
import json
import sys
import time

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
    """The payload length an Image's or a PointCloud2's small fields announce."""
    step = getattr(msg, "step", None)
    return (step if step is not None else msg.row_step) * msg.height


def stamp(msg):
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.monotonic_ns(), 1_000_000_000)


def stamp_ns(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def publisher(args, node, spin_once, msg_type, header_type, message):
    """The publisher's side; `message(pub, k)` is message k of publisher `pub`, every
    payload byte written."""
    pub = node.create_publisher(msg_type, args.topic, DEPTH)
    acked = []
    node.create_subscription(header_type, args.topic + "_ack", lambda m: acked.append(m.frame_id), DEPTH)
    print("READY", flush=True)

    def wait_ack(name, limit):
        end = time.monotonic() + limit
        while name not in acked:
            left = end - time.monotonic()
            if left <= 0:
                return False
            spin_once(node, timeout_sec=left)
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
        msg = message(pub, k)
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


def subscriber(args, node, spin_once, msg_type, header_type):
    """The subscriber's side: checks, measures and acks every message."""
    ack_pub = node.create_publisher(header_type, args.topic + "_ack", DEPTH)
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
        ack_pub.publish(header_type(frame_id=name))
        state["done"] = name == "stop"

    node.create_subscription(msg_type, args.topic, on_data, DEPTH)
    print("READY", flush=True)
    while not state["done"]:
        spin_once(node, timeout_sec=1.0)
        if state["error"]:
            fail(state["error"])
        if time.monotonic() - state["last"] > IDLE_LIMIT:
            fail(f"timed out: no message for {IDLE_LIMIT:.0f} s")
    print("SAMPLES " + json.dumps({"latency_ns": state["samples"]}), flush=True)
