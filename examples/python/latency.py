"""Round-trip latency between two processes, by payload size, with zero-copy loans.

Shows that a message's size hardly matters to freight on one host: a 32 MiB
message is not copied, only handed over in shared memory. This process
("ping") publishes a loaned buffer on one topic; a child process ("pong", this
same script started again) answers each one with a loaned buffer of the same
size on another topic. The time from loan to answer is one round trip; one
way takes about half. For the full benchmark, see ``python -m freight.bench``.

    python latency.py
    python latency.py --sizes 1KiB,1MiB --iterations 5000
"""

import argparse
import os
import statistics
import struct
import subprocess
import sys
import threading
import time

import numpy as np

import freight
from freight.msgs.std_msgs import UInt8MultiArray

PING_TOPIC = "latency/ping"
PONG_TOPIC = "latency/pong"
# Each message starts with its sequence number, so that an answer proves which ping it answers.
SEQ = struct.Struct("<Q")
# The first round trips of each size are not measured: the first loans of a
# new size allocate shared memory.
WARMUP = 20
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}


def parse_sizes(text):
    """``"1KiB,64KiB,1MiB"`` -> ``[1024, 65536, 1048576]``."""
    sizes = []
    for item in text.split(","):
        number = item.rstrip("BKiM")
        unit = item[len(number) :] or "B"
        if not number.isdigit() or unit not in UNITS or int(number) * UNITS[unit] < SEQ.size:
            raise argparse.ArgumentTypeError(f"{item!r}: write sizes like 8B, 64KiB or 32MiB (at least {SEQ.size}B)")
        sizes.append(int(number) * UNITS[unit])
    return sizes


def pong():
    """The child: answers every ping with a message of the same size, until the parent exits."""
    threading.Thread(target=exit_with_parent, daemon=True).start()
    freight.init(local_only=True)
    node = freight.Node("pong")
    pings = node.create_subscription(UInt8MultiArray, PING_TOPIC, None, 1)
    pongs = node.create_publisher(UInt8MultiArray, PONG_TOPIC, 1)
    while True:
        ping = pings.take()  # blocks until a ping comes
        answer = pongs.loan(ping.data.shape, np.uint8)
        # Only the sequence number is written: filling the payload would
        # measure memset, not the transport.
        answer[: SEQ.size] = ping.data[: SEQ.size]
        pongs.publish(UInt8MultiArray(data=answer))


def exit_with_parent():
    # The parent holds the other end of our stdin and never writes to it: the
    # read returns when the parent exits, however it ends (even killed).
    sys.stdin.read()
    os._exit(0)


def ping(sizes, iterations):
    """The parent: starts the pong process, measures, prints a table."""
    freight.init(local_only=True)
    node = freight.Node("ping")
    pings = node.create_publisher(UInt8MultiArray, PING_TOPIC, 1)
    pongs = node.create_subscription(UInt8MultiArray, PONG_TOPIC, None, 1)
    child = subprocess.Popen([sys.executable, __file__, "--role", "pong"], stdin=subprocess.PIPE)
    try:
        wait_for_pong(pings, pongs, child)
        print(f"round trip in µs, {iterations} per size (one way is about half)")
        print(f"{'bytes':>10} {'p50':>8} {'p99':>8}")
        seq = 0
        for size in sizes:
            times = []
            for i in range(WARMUP + iterations):
                seq += 1
                start = time.perf_counter_ns()
                data = pings.loan((size,), np.uint8)
                SEQ.pack_into(data, 0, seq)
                pings.publish(UInt8MultiArray(data=data))
                answer = pongs.take(timeout_sec=5.0)
                elapsed = time.perf_counter_ns() - start
                if answer is None or SEQ.unpack_from(answer.data)[0] != seq:
                    sys.exit(f"error: ping {seq} got no answer within 5 s (pong process status: {child.poll()})")
                if i >= WARMUP:
                    times.append(elapsed / 1e3)
            percentiles = statistics.quantiles(times, n=100)
            print(f"{size:>10,} {percentiles[49]:>8.1f} {percentiles[98]:>8.1f}")
    finally:
        child.stdin.close()  # the pong process exits when it sees this
        child.wait()


def wait_for_pong(pings, pongs, child):
    deadline = time.monotonic() + 10.0
    while pings.get_subscription_count() < 1 or pongs.get_publisher_count() < 1:
        if child.poll() is not None:
            sys.exit(f"error: the pong process exited with status {child.returncode} before it was ready")
        if time.monotonic() > deadline:
            sys.exit("error: the pong process did not connect within 10 s")
        time.sleep(0.01)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=parse_sizes, default="1KiB,64KiB,1MiB,8MiB,32MiB", help="payload sizes (default: %(default)s)"
    )
    parser.add_argument("--iterations", type=int, default=1000, help="round trips per size (default: %(default)s)")
    parser.add_argument("--role", choices=["ping", "pong"], default="ping", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.iterations < 100:
        parser.error(f"--iterations {args.iterations}: a p99 needs at least 100")
    try:
        if args.role == "pong":
            pong()
        else:
            ping(args.sizes, args.iterations)
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches both processes; each stops quietly


if __name__ == "__main__":
    main()
