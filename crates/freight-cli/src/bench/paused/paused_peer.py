"""A process of `freight bench paused`: one publisher or subscriber of 1 MiB
std_msgs/UInt8MultiArray messages, written as a ROS 2 user writes one, on stock rclpy
or on freight's rclpy-shaped API.

    python paused_peer.py {stock,freight} pub TOPIC --rate HZ --seconds S --bytes N
    python paused_peer.py {stock,freight} sub TOPIC

Both use rclpy's default profile (`create_publisher(T, topic, 10)`: reliable, volatile,
keep last 10). `stock` imports rclpy only (on its defaults: rmw_fastrtps_cpp); `freight`
imports freight only, on its local plane (`freight.init(local_only=True)`).

The subscriber prints `READY`, counts what its callback receives (spun by `spin_once`)
and, when its stdin closes, prints `RESULT {"received": n, "after_pause": m,
"error": null}`: `after_pause` counts the messages received after the first gap of more
than a second between two turns of its loop (the controller stopped and continued it).
An exception ends the loop and is the result's `error`: what a user's program would die of.

The publisher waits until two subscriptions are matched (`MATCHED`), then publishes at
HZ for S seconds, each message's payload written whole, and prints `RESULT
{"published": n, "errors": e, "first_error": "...", "slowest_ms": x}`: a publish that
raises counts as an error, and the loop goes on as a camera driver's would.
"""

import argparse
import array
import json
import sys
import threading
import time


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("stack", choices=["stock", "freight"])
    parser.add_argument("role", choices=["pub", "sub"])
    parser.add_argument("topic")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    return parser.parse_args()


def say(line):
    print(line, flush=True)


def main():
    args = parse()
    if args.stack == "stock":
        import rclpy
        from std_msgs.msg import UInt8MultiArray

        rclpy.init()
        node = rclpy.create_node(f"paused_{args.role}")
        spin_once = rclpy.spin_once
        shutdown = rclpy.shutdown
    else:
        import freight
        from freight.msgs.std_msgs import UInt8MultiArray

        freight.init(local_only=True)
        node = freight.create_node(f"paused_{args.role}")
        spin_once = freight.spin_once
        shutdown = freight.shutdown
    if args.role == "sub":
        subscribe(args, node, UInt8MultiArray, spin_once)
    else:
        publish(args, node, UInt8MultiArray)
    # A clean exit: Fast DDS removes its shared-memory segments from /dev/shm.
    node.destroy_node()
    shutdown()


def subscribe(args, node, msg_type, spin_once):
    counts = {"received": 0, "after_pause": 0}
    paused = False

    def on_message(msg):
        counts["received"] += 1
        if paused:
            counts["after_pause"] += 1

    node.create_subscription(msg_type, args.topic, on_message, 10)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    say("READY")
    error = None
    last = time.monotonic()
    try:
        while not done.is_set():
            spin_once(node, timeout_sec=0.05)
            now = time.monotonic()
            if now - last > 1.0:
                paused = True
            last = now
    except Exception as e:  # what would end the user's program
        error = f"{type(e).__name__}: {e}"
    say("RESULT " + json.dumps({**counts, "error": error}))


def publish(args, node, msg_type):
    import numpy as np

    pub = node.create_publisher(msg_type, args.topic, 10)
    deadline = time.monotonic() + 30.0
    while pub.get_subscription_count() < 2:
        if time.monotonic() > deadline:
            say("ERROR the two subscriptions did not match within 30 s")
            sys.exit(2)
        time.sleep(0.05)
    say("MATCHED")
    # freight: each payload is a loan of shared memory, written in place. Stock: one
    # array('B') rewritten in place (rclpy takes it as it is and copies it; anything else
    # it checks element by element).
    loans = hasattr(pub, "loan")
    payload = array.array("B", bytes(args.bytes))
    published = errors = 0
    first_error = None
    slowest = 0.0
    period = 1.0 / args.rate
    start = time.monotonic()
    k = 0
    while time.monotonic() - start < args.seconds:
        data = pub.loan(args.bytes, np.uint8) if loans else payload
        (data if loans else np.frombuffer(payload, np.uint8)).fill(k % 255 + 1)
        msg = msg_type(data=data)
        t0 = time.monotonic()
        try:
            pub.publish(msg)
            published += 1
        except Exception as e:
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {e}"
        slowest = max(slowest, time.monotonic() - t0)
        k += 1
        time.sleep(max(0.0, start + k * period - time.monotonic()))
    result = {"published": published, "errors": errors, "first_error": first_error, "slowest_ms": slowest * 1e3}
    say("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
