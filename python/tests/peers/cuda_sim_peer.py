"""A `cuda` publisher or a subscriber, without torch, for the simulated CUDA
driver (``test_cuda_sim.py``), driven by lines on stdin.

    cuda_sim_peer.py publish TOPIC
    cuda_sim_peer.py subscribe TOPIC --accept cuda,...

Both print ``READY`` once their endpoint exists (and the driver that loaded is
the simulation). Messages are ``UInt8MultiArray`` whose
``layout.data_offset`` is their number ``k`` and whose byte i is
(k + i) % 251 (``support.fill_pattern``).

The publisher (``backend="cuda"``) answers ``WAIT n`` with ``SUBS <count>``
once ``n`` subscriptions match, and ``SEND k n how`` by publishing message
``k`` of ``n`` bytes, answering ``SENT k`` or ``ERR k <class> <message>``:

* ``how=loan``: ``loan_buffer((n,), "uint8", device="cuda")``, written through
  its device address with ``ctypes.memmove``. That works only on the
  simulated driver, whose device pointers are host addresses of this process
  (on a GPU a kernel writes it); published without a copy, ``stream=0``.
* ``how=copy``: a numpy array, which freight copies into the publisher's
  device memory (``cuMemcpyHtoD``).

The subscriber answers each message with ``GOT k <type of data> <backend>
<dlpack device> <device> <exact> <capsule>``: ``exact`` is ``ok`` or ``BAD i``
for the bytes read on the host (``to_numpy()`` for a ``DeviceArray``),
``capsule`` the type and name of what ``__dlpack__(stream=1, max_version=(1,
0))`` returned (``-`` for a numpy array).
"""

import argparse
import ctypes
import pathlib
import sys

import numpy as np

import freight
from freight.msgs.std_msgs import UInt8MultiArray

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import support  # noqa: E402

SIM_DEVICE_NAME = b"freight simulated CUDA device"


def check_simulated_driver():
    """Refuses to run on anything but the simulated driver: the publisher
    writes device memory through host pointers."""
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    name = ctypes.create_string_buffer(64)
    assert cuda.cuDeviceGetName(name, 64, 0) == 0
    assert name.value == SIM_DEVICE_NAME, f"the driver that loaded is {name.value!r}, not the simulation"


def publish(args, node):
    pub = node.create_publisher(UInt8MultiArray, args.topic, 10, backend="cuda")
    assert pub.backend == "cuda"
    print("READY", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "WAIT":
            support.report_subscriptions(pub, int(words[1]))
            continue
        k, n, how = int(words[1]), int(words[2]), words[3]
        try:
            data = np.empty(n, np.uint8)
            support.fill_pattern(data, k)
            if how == "loan":
                buf = pub.loan_buffer((n,), "uint8", device="cuda")
                assert (buf.device, buf.nbytes, buf.shape) == ("cuda:0", n, [n]), (buf.device, buf.nbytes, buf.shape)
                ctypes.memmove(buf.address, data.ctypes.data, n)  # the simulation's device pointer
                msg = UInt8MultiArray(data=buf)
                msg.layout.data_offset = k
                pub.publish(msg, stream=0)
                assert buf.published
            else:
                msg = UInt8MultiArray(data=data)
                msg.layout.data_offset = k
                pub.publish(msg)
        except Exception as e:  # reported to the test, which decides
            print(f"ERR {k} {type(e).__name__} {e}".replace("\n", " "), flush=True)
            continue
        print(f"SENT {k}", flush=True)


def capsule_name(capsule):
    """``<type>:<capsule name>``: ``PyCapsule:dltensor_versioned`` for DLPack 1.0."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return f"{type(capsule).__name__}:{get_name(capsule).decode()}"


def describe(msg):
    k, data = msg.layout.data_offset, msg.data
    if isinstance(data, freight.DeviceArray):
        dev = data.__dlpack_device__()
        host = data.to_numpy()
        # Read-only memory needs DLPack 1.0 (its read-only flag); stream 1 is
        # the legacy default stream, ordered after the publisher's writes.
        capsule = capsule_name(data.__dlpack__(stream=1, max_version=(1, 0)))
        backend = data.backend
        where = data.device
        if data.device_ptr is None or data.host_mapped or host.nbytes != data.nbytes:
            return f"GOT {k} DeviceArray {backend} BADVIEW"
    else:
        dev = data.__dlpack_device__()
        host, capsule, backend, where = data, "-", data.base.backend, "host"
    first = support.first_mismatch(host, k)
    exact = "ok" if first is None else f"BAD {first}"
    return f"GOT {k} {type(data).__name__} {backend} {dev[0]},{dev[1]} {where} {exact.replace(' ', ':')} {capsule}"


def subscribe(args, node):
    sub = node.create_subscription(UInt8MultiArray, args.topic, None, 10, accepted_backends=args.accept.split(","))
    print("READY", flush=True)
    closed = support.stdin_closed()
    while not closed.is_set():
        msg = sub.take(timeout_sec=0.2)
        if msg is None:
            continue
        print(describe(msg), flush=True)
        del msg


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["publish", "subscribe"])
    parser.add_argument("topic")
    parser.add_argument("--accept", default="cpu")
    args = parser.parse_args()
    check_simulated_driver()
    node = freight.Node("cuda_sim_peer", context=freight.Context(local_only=True))
    (publish if args.role == "publish" else subscribe)(args, node)


if __name__ == "__main__":
    main()
