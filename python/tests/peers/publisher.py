"""A publisher process, driven by commands on stdin (one per line).

    publisher.py {array,image} TOPIC [--depth N] [--dds]

Prints ``READY`` once the publisher exists, then answers each command:

``WAIT n``
    waits until exactly ``n`` subscriptions match (a few seconds at most):
    ``SUBS <count>``.
``LOAN k n`` / ``LOAN k height width``
    publishes message ``k`` from a loan (zero copy): a ``UInt8MultiArray`` of
    ``n`` bytes with ``layout.data_offset = k``, or a bgra8 ``Image`` with
    ``header.stamp.sec = k``. Byte i of the data is (k + i) % 251. Answers
    ``SENT k <nbytes> <loan address> <shm file or -> <offset in file or ->``,
    the loan's place as this process's /proc/self/maps shows it.
``COPY k ...``
    the same message published from a plain numpy array (copied once):
    ``SENT k <nbytes> - - -``.

A command that raises answers ``ERR k <exception class> <message>``. The
process exits when stdin closes (the test ended or died).
"""

import argparse
import pathlib
import sys
import time

import freight
import numpy as np
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import UInt8MultiArray

# support.py lies beside the tests, one folder up.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import support  # noqa: E402


def message(kind, k, dims, data):
    if kind == "array":
        msg = UInt8MultiArray(data=data)
        msg.layout.data_offset = k
        return msg
    height, width = dims
    msg = Image(height=height, width=width, encoding="bgra8", step=width * 4, data=data)
    msg.header.stamp.sec = k
    msg.header.frame_id = "python"
    return msg


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["array", "image"])
    parser.add_argument("topic")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--dds", action="store_true", help="with the network plane (default: local only)")
    args = parser.parse_args()

    ctx = freight.Context(local_only=not args.dds)
    node = freight.Node("py_publisher", context=ctx)
    msg_type = UInt8MultiArray if args.kind == "array" else Image
    pub = node.create_publisher(msg_type, args.topic, args.depth)
    print("READY", flush=True)

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command, numbers = words[0], [int(w) for w in words[1:]]
        if command == "WAIT":
            deadline = time.monotonic() + support.TIMEOUT
            while pub.get_subscription_count() != numbers[0] and time.monotonic() < deadline:
                time.sleep(0.01)
            print(f"SUBS {pub.get_subscription_count()}", flush=True)
            continue
        k, dims = numbers[0], numbers[1:]
        nbytes = dims[0] if args.kind == "array" else dims[0] * dims[1] * 4
        try:
            if command == "LOAN":
                data = pub.loan(nbytes, np.uint8)
                address = support.array_address(data)
                where = support.shm_location(address) or ("-", "-")
            elif command == "COPY":
                data = np.empty(nbytes, np.uint8)
                address, where = "-", ("-", "-")
            else:
                raise ValueError(f"unknown command {command!r}")
            support.fill_pattern(data, k)
            pub.publish(message(args.kind, k, dims, data))
        except Exception as e:  # reported to the test, which decides
            print(f"ERR {k} {type(e).__name__} {e}".replace("\n", " "), flush=True)
            continue
        print(f"SENT {k} {nbytes} {address} {where[0]} {where[1]}", flush=True)


if __name__ == "__main__":
    main()
