"""Python and Rust endpoints on one topic, through the `freight` CLI.

Python publishes and ``freight topic echo`` prints what it received; ``freight
topic pub`` publishes a known pattern and Python checks it, byte for byte, in
shared memory it views in place. Both tools run with their network plane (DDS)
on, confined to loopback by CYCLONEDDS_URI (set for every child, see
:mod:`support`); this process stays local-only unless a test says otherwise.
"""

import os
import re
import subprocess
import time

import freight
import numpy as np
import pytest
import support
from conftest import FREIGHT_BIN
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import MultiArrayDimension, UInt8MultiArray
from support import TIMEOUT, Child, array_address, first_mismatch, shm_location

pytestmark = pytest.mark.skipif(
    not FREIGHT_BIN.exists(), reason=f"{FREIGHT_BIN} is not built: run `cargo build --release` (or set FREIGHT_BIN)"
)

MiB = 1 << 20


def _has_topic_pub():
    if not FREIGHT_BIN.exists():
        return False
    done = subprocess.run([FREIGHT_BIN, "topic", "pub", "--help"], capture_output=True, timeout=TIMEOUT)
    return done.returncode == 0


needs_topic_pub = pytest.mark.skipif(
    not _has_topic_pub(),
    reason=f"`{FREIGHT_BIN} topic pub` does not exist: rebuild with `cargo build --release -p freight-cli`",
)


def _echo(topic, count):
    return Child([FREIGHT_BIN, "topic", "echo", topic, "--count", count, "--spin-time", "0"], name="freight topic echo")


def _wait_for_subscription(pub):
    deadline = time.monotonic() + TIMEOUT
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pub.get_subscription_count() >= 1, "freight topic echo's subscription never matched"


def _echoed(echo, count):
    """What echo printed, once it exited: per message, the fields of its
    header line (publisher, sequence, transport, backend) and its body."""
    assert echo.wait() == 0, echo.transcript()
    blocks = [b.strip() for b in "\n".join(echo.stdout).split("\n---") if b.strip()]
    assert len(blocks) == count, echo.transcript()
    out = []
    for block in blocks:
        header, _, body = block.partition("\n")
        match = re.fullmatch(r"# from publisher (\w+), sequence (\d+), via (\w+), buffers in (\w+)", header)
        assert match, f"unexpected echo header {header!r}"
        out.append((match.groups(), body))
    return out


def _field(body, name):
    """The text after `name:` on its line (YAML, as `ros2 topic echo` prints it)."""
    match = re.search(rf"^\s*{name}:(.*)$", body, re.MULTILINE)
    assert match, f"no {name} in\n{body}"
    return match.group(1).strip()


def _data(body, nbytes, backend="shm"):
    """Checks the `data` field of an echoed message: every byte up to 128, else
    the first 128, `'...'` and the length and memory in a comment."""
    field = _field(body, "data")
    items = re.findall(r"^- (.*)$", body.partition("\ndata:")[2], re.MULTILINE)
    if nbytes == 0:
        assert field == "[]", body
    elif nbytes <= 128:
        assert field == "" and len(items) == nbytes, body
    else:
        assert field == f"# {nbytes} elements (uint8) in {backend}", body
        assert len(items) == 129 and items[-1] == "'...'", body


@pytest.mark.parametrize("local_only", [True, False], ids=["local_only", "with_dds"])
def test_rust_echo_prints_the_images_a_python_publisher_sends(topic, local_only, monkeypatch):
    # With DDS on both sides, each message must still come once, through
    # shared memory, not a second time over the network; on loopback only.
    if not local_only and "CYCLONEDDS_URI" not in os.environ:
        monkeypatch.setenv("CYCLONEDDS_URI", support.LOOPBACK_DDS)
    ctx = freight.Context(local_only=local_only)
    try:
        node = freight.Node("py_image_source", context=ctx)
        pub = node.create_publisher(Image, topic, 10)
        # echo subscribes best effort, keep last 5: four messages all fit.
        sizes = [(2, 3), (480, 640), (0, 5), (1080, 1920)]
        with _echo(topic, len(sizes)) as echo:
            _wait_for_subscription(pub)
            for k, (height, width) in enumerate(sizes):
                data = pub.loan(height * width * 4, np.uint8)
                support.fill_pattern(data, k)
                msg = Image(height=height, width=width, encoding="bgra8", step=width * 4, data=data)
                msg.header.stamp.sec = k
                msg.header.stamp.nanosec = 1000 + k
                msg.header.frame_id = f"camera_{k}"
                pub.publish(msg)
            echoed = _echoed(echo, len(sizes))
        for k, ((height, width), ((_, sequence, via, backend), body)) in enumerate(zip(sizes, echoed)):
            assert (sequence, via, backend) == (str(k), "shm", "shm")
            assert _field(body, "sec") == str(k)
            assert _field(body, "nanosec") == str(1000 + k)
            assert _field(body, "frame_id") == f"camera_{k}"
            assert _field(body, "height") == str(height)
            assert _field(body, "width") == str(width)
            assert _field(body, "encoding") == "bgra8"
            assert _field(body, "is_bigendian") == "0"
            assert _field(body, "step") == str(width * 4)
            _data(body, height * width * 4)
    finally:
        ctx.shutdown()


def test_rust_echo_prints_the_arrays_a_python_publisher_sends(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 10)
    sizes = [0, 1, 3 * MiB + 7, 100]
    with _echo(topic, len(sizes)) as echo:
        _wait_for_subscription(pub)
        for k, nbytes in enumerate(sizes):
            # Loaned and plain (copied) data alike.
            data = pub.loan(nbytes, np.uint8) if k % 2 else np.empty(nbytes, np.uint8)
            support.fill_pattern(data, k)
            msg = UInt8MultiArray(data=data)
            msg.layout.data_offset = k
            msg.layout.dim = [
                MultiArrayDimension(label="rows", size=k, stride=nbytes),
                MultiArrayDimension(label=f"cols_{k}", size=nbytes, stride=1),
            ]
            pub.publish(msg)
        echoed = _echoed(echo, len(sizes))
    for k, (nbytes, ((_, sequence, via, backend), body)) in enumerate(zip(sizes, echoed)):
        assert (sequence, via, backend) == (str(k), "shm", "shm")
        assert _field(body, "data_offset") == str(k)
        dims = re.findall(r"- label: (\w+)\n\s+size: (\d+)\n\s+stride: (\d+)", body)
        assert dims == [("rows", str(k), str(nbytes)), (f"cols_{k}", str(nbytes), "1")], body
        _data(body, nbytes)


def _topic_pub(topic, type_name, *options):
    return Child(
        [FREIGHT_BIN, "topic", "pub", topic, type_name, *options, "--wait-for-subscribers", "1", "--spin-time", "0"],
        name="freight topic pub",
    )


def _receive(sub, count, child):
    msgs = []
    for _ in range(count):
        msg = sub.take(TIMEOUT)
        assert msg is not None, f"got {len(msgs)} of {count} messages{child.transcript()}"
        msgs.append(msg)
    assert child.wait() == 0, child.transcript()
    return msgs


def _assert_last_published(child, k, nbytes):
    """topic pub's last stdout line names the last message."""
    assert child.stdout and child.stdout[-1].startswith(f"published {k} {nbytes} bytes"), child.transcript()


def _assert_zero_copy(data):
    assert data.base.backend == "shm"
    where = shm_location(array_address(data))
    assert where is not None and where[0].startswith("/dev/shm/"), f"received array at {where}, not in shared memory"


@needs_topic_pub
@pytest.mark.parametrize(("nbytes", "count"), [(1, 5), (8 * MiB + 3, 5), (64 * MiB, 3)])
def test_python_receives_the_arrays_rust_topic_pub_sends_in_shared_memory(node, topic, nbytes, count):
    # Deep enough to keep every message, whatever the publisher's QoS.
    sub = node.create_subscription(UInt8MultiArray, topic, None, count)
    with _topic_pub(topic, "std_msgs/msg/UInt8MultiArray", "--size", nbytes, "--count", count, "--rate", 50) as child:
        msgs = _receive(sub, count, child)
    _assert_last_published(child, count - 1, nbytes)
    for k, msg in enumerate(msgs):
        assert msg.layout.data_offset == k
        assert msg.data.nbytes == nbytes
        assert first_mismatch(msg.data, k) is None, f"message {k}: wrong byte"
        _assert_zero_copy(msg.data)


@needs_topic_pub
def test_python_receives_the_images_rust_topic_pub_sends_in_shared_memory(node, topic):
    count, width, height = 4, 640, 480
    sub = node.create_subscription(Image, topic, None, count)
    options = ("--width", width, "--height", height, "--count", count, "--rate", 50)
    with _topic_pub(topic, "sensor_msgs/msg/Image", *options) as child:
        msgs = _receive(sub, count, child)
    _assert_last_published(child, count - 1, height * width * 4)
    for k, msg in enumerate(msgs):
        assert (msg.height, msg.width, msg.encoding, msg.step) == (height, width, "bgra8", width * 4)
        assert msg.header.frame_id == "freight"
        # Stamped with the wall clock of this host.
        assert abs(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 - time.time()) < 60
        assert msg.data.nbytes == height * width * 4
        assert first_mismatch(msg.data, k) is None, f"message {k}: wrong byte"
        _assert_zero_copy(msg.data)
