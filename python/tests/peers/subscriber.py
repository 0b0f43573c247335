"""A subscriber process: reports every message it receives as one line.

    subscriber.py {array,image} TOPIC --mode {take,spin,thread} [--hold N] [--depth N]
                  [--accepted-backends NAME ...]

Prints ``READY`` once its subscription exists (or ``ERR <exception class>
<message>`` and exits 3 when creating it fails), then for each message::

    GOT <k> <nbytes> <first bad byte or -> <backend> <shm file or -> <offset or -> <thread> <work>

``k`` is the message's ``layout.data_offset`` (arrays) or ``header.stamp.sec``
(images); the pattern check expects byte i to be (k + i) % 251. ``thread`` is
the name of the thread the message was handled on, ``work`` how many rounds of
busy work the main thread had done by then (``--mode thread`` only, else 0).

Modes: ``take`` loops on ``sub.take()`` without a timeout; ``spin`` runs
``freight.spin(node)``; ``thread`` spins an executor in a background thread
while the main thread computes. ``--hold N`` keeps the last N messages (and
so their shared memory) referenced. On Ctrl-C it prints ``INTERRUPTED
<mode>`` and exits 0. It exits when stdin closes.
"""

import argparse
import os
import pathlib
import sys
import threading

import freight
import numpy as np
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import UInt8MultiArray

# support.py lies beside the tests, one folder up.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import support  # noqa: E402

work_rounds = 0
held = []


def exit_on_stdin_eof():
    # The test closes stdin when it is done with this process, or dies.
    sys.stdin.read()
    os._exit(0)


def report(msg, hold):
    k = msg.layout.data_offset if isinstance(msg, UInt8MultiArray) else msg.header.stamp.sec
    data = msg.data
    bad = support.first_mismatch(data, k)
    address = support.array_address(data)
    path, offset = (support.shm_location(address) if data.size else None) or ("-", "-")
    backend = data.base.backend if isinstance(data.base, freight.ReceivedBuffer) else "-"
    print(
        f"GOT {k} {data.nbytes} {'-' if bad is None else bad} {backend} {path} {offset} "
        f"{threading.current_thread().name} {work_rounds}",
        flush=True,
    )
    if hold:
        held.append(msg)
        del held[:-hold]


def main():
    global work_rounds
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["array", "image"])
    parser.add_argument("topic")
    parser.add_argument("--mode", choices=["take", "spin", "thread"], default="take")
    parser.add_argument("--hold", type=int, default=0)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--accepted-backends", nargs="+")
    args = parser.parse_args()
    threading.Thread(target=exit_on_stdin_eof, daemon=True).start()

    ctx = freight.Context(local_only=True)
    node = freight.Node("py_subscriber", context=ctx)
    msg_type = UInt8MultiArray if args.kind == "array" else Image
    callback = None if args.mode == "take" else (lambda msg: report(msg, args.hold))
    try:
        sub = node.create_subscription(
            msg_type, args.topic, callback, args.depth, accepted_backends=args.accepted_backends
        )
    except freight.FreightError as e:
        print(f"ERR {type(e).__name__} {e}".replace("\n", " "), flush=True)
        sys.exit(3)
    print("READY", flush=True)

    try:
        if args.mode == "take":
            while True:
                report(sub.take(), args.hold)
        elif args.mode == "spin":
            freight.spin(node)
        else:
            executor = freight.SingleThreadedExecutor(context=ctx)
            executor.add_node(node)
            threading.Thread(target=executor.spin, name="executor", daemon=True).start()
            rng = np.random.default_rng(0)
            while True:  # the main thread's own work, holding the GIL often
                float(np.linalg.norm(rng.standard_normal((64, 64)) @ rng.standard_normal((64, 64))))
                work_rounds += 1
    except KeyboardInterrupt:
        print(f"INTERRUPTED {args.mode}", flush=True)
        sys.exit(0)


if __name__ == "__main__":
    main()
