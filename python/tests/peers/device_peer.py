"""A publisher or subscriber of device memory, driven by lines on stdin.

    device_peer.py publish TOPIC --backend {fake-device,cuda,cuda-host,shm}
    device_peer.py subscribe TOPIC --accept fake-device,cuda,...

Both print ``READY`` once their endpoint exists. Every message is a
``UInt8MultiArray`` whose ``layout.data_offset`` is its number ``k`` and whose
byte i is (k + i) % 251 (``support.fill_pattern``).

The publisher answers ``WAIT n`` with ``SUBS <count>`` once ``n``
subscriptions match, and ``SEND k n`` by publishing message ``k`` of ``n``
bytes: for ``cuda`` and ``cuda-host`` from ``loan_tensor`` written by a torch
kernel on a side stream that first sleeps on the GPU (so that a reader not
ordered after that stream would see the bytes unwritten), published without
waiting for it; for the others from a numpy array (copied once). It answers
``SENT k`` or ``ERR k <class> <message>``.

``FLOOD n seconds`` publishes messages of ``n`` bytes (numbered from 1)
as fast as it can for that long, whatever the subscribers keep up with (keep
last: a full queue misses messages), and answers ``FLOODED <count>``.

The subscriber answers each message with ``GOT k <backend> <type of data> <ok
or BAD i>``, having read every byte: device memory through
``torch.from_dlpack`` on a stream of its own (``cuda``; ``cuda-host`` through
``freight.as_cuda``), or through ``to_numpy()`` (``fake-device``).
"""

import argparse
import pathlib
import sys
import time

import numpy as np

import freight
from freight.msgs.std_msgs import UInt8MultiArray

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import support  # noqa: E402


def torch_pattern(torch, k, n, device):
    return ((torch.arange(n, device=device, dtype=torch.int64) + k) % support.PERIOD).to(torch.uint8)


def publish(args, node):
    pub = node.create_publisher(UInt8MultiArray, args.topic, 10, backend=args.backend)
    gpu = args.backend in ("cuda", "cuda-host")
    if gpu:
        import torch

        stream = torch.cuda.Stream()
    print("READY", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "WAIT":
            support.report_subscriptions(pub, int(words[1]))
            continue
        if words[0] == "FLOOD":
            flood(pub, int(words[1]), float(words[2]))
            continue
        k, n = int(words[1]), int(words[2])
        try:
            if gpu:
                data = pub.loan_tensor((n,), torch.uint8)
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(50_000_000)  # tens of ms of GPU time before the write
                    data.copy_(torch_pattern(torch, k, n, data.device))
                msg = UInt8MultiArray(data=data)
                msg.layout.data_offset = k
                pub.publish(msg, stream=stream)  # no host wait: readers wait on the GPU
            else:
                data = np.empty(n, np.uint8)
                support.fill_pattern(data, k)
                msg = UInt8MultiArray(data=data)
                msg.layout.data_offset = k
                pub.publish(msg)
        except Exception as e:  # reported to the test, which decides
            print(f"ERR {k} {type(e).__name__} {e}".replace("\n", " "), flush=True)
            continue
        print(f"SENT {k}", flush=True)


def flood(pub, n, seconds):
    frames = []
    for k in range(1, 5):
        frames.append(np.empty(n, np.uint8))
        support.fill_pattern(frames[-1], k)
    sent, stop = 0, time.monotonic() + seconds
    while time.monotonic() < stop:
        msg = UInt8MultiArray(data=frames[sent % 4])
        msg.layout.data_offset = sent % 4 + 1
        pub.publish(msg)
        sent += 1
    print(f"FLOODED {sent}", flush=True)


def check(msg):
    """``(ok or BAD i)`` for message ``msg``, having read every byte of it."""
    k, data = msg.layout.data_offset, msg.data
    if isinstance(data, np.ndarray) and data.base.backend == "cuda-host" and "torch" in sys.modules:
        data = freight.as_cuda(data)
    if isinstance(data, freight.DeviceArray) and data.device.startswith("cuda"):
        import torch

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            got = torch.from_dlpack(data)  # orders `stream` after the publisher's writes
            bad = (got != torch_pattern(torch, k, got.numel(), got.device)).nonzero()
            first = int(bad[0]) if bad.numel() else None  # waits for `stream` only
        return "ok" if first is None else f"BAD {first}"
    host = data.to_numpy() if isinstance(data, freight.DeviceArray) else data
    first = support.first_mismatch(host, k)
    return "ok" if first is None else f"BAD {first}"


def subscribe(args, node):
    if args.torch:
        import torch  # noqa: F401 (imported: cuda-host data is checked on the GPU)
    sub = node.create_subscription(UInt8MultiArray, args.topic, None, 10, accepted_backends=args.accept.split(","))
    print("READY", flush=True)
    closed = support.stdin_closed()  # the test closes stdin to end the child
    while not closed.is_set():
        msg = sub.take(timeout_sec=0.2)
        if msg is None:
            continue
        data = msg.data
        backend = data.backend if isinstance(data, freight.DeviceArray) else data.base.backend
        print(f"GOT {msg.layout.data_offset} {backend} {type(data).__name__} {check(msg)}", flush=True)
        del msg, data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["publish", "subscribe"])
    parser.add_argument("topic")
    parser.add_argument("--backend", default="shm")
    parser.add_argument("--accept", default="cpu,shm")
    parser.add_argument("--torch", action="store_true", help="check cuda-host data on the GPU too")
    args = parser.parse_args()
    node = freight.Node("device_peer", context=freight.Context(local_only=True))
    (publish if args.role == "publish" else subscribe)(args, node)


if __name__ == "__main__":
    main()
