"""`freight view` end to end, spoken to as the Foxglove app speaks to it.

The client is the ``websockets`` package on subprotocol ``foxglove.sdk.v1``
(not Foxglove's own code): it reads ``serverInfo`` and ``advertise``, subscribes,
and takes the binary MessageData frames apart by the protocol's layout (opcode
0x01, subscription id u32 LE, log time u64 LE, payload). Payloads are decoded
by ``rosbags`` against the schema text the server advertised, not against a
definition of the test's own, and compared with what the freight publisher
published, byte for byte.

Also: the byte budget (``--max-bandwidth``) bounds what a client receives while
the publisher keeps its rate and an ordinary freight subscriber gets every
message, and a camera spending it does not hold back a small topic; a client that subscribes and never reads does not slow the publisher;
a port in use is a one-line error.
"""

import itertools
import json
import os
import re
import signal
import socket
import struct
import threading
import time

import numpy as np
import pytest
import websockets.sync.client
from conftest import FREIGHT_BIN, REPO
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from support import Child, fill_pattern, first_mismatch

import freight
from freight.msgs.builtin_interfaces import Time
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import Header, String

#: Seconds any one expected event may take: generous; nothing here measures speed
#: except where a test says so.
EVENT = 20.0
#: The foxglove crate (0.30) negotiates `foxglove.sdk.v1` (inline schemas, the messages of the
#: older `foxglove.websocket.v1`) and `foxglove.sdk.v1.1` (a schema table), not the old name.
SUBPROTOCOL = "foxglove.sdk.v1"
IMAGE = "sensor_msgs/msg/Image"
STRING = "std_msgs/msg/String"
LOG = "rcl_interfaces/msg/Log"

_topics = itertools.count()


def new_topic(what):
    """A topic name no other test (or concurrent run) uses."""
    return f"/view_{what}_{os.getpid()}_{next(_topics)}"


@pytest.fixture(scope="module", autouse=True)
def _freight_view_exists():
    if not FREIGHT_BIN.exists():
        pytest.fail(f"{FREIGHT_BIN} is not built: run `cargo build --release` (or set FREIGHT_BIN)")


@pytest.fixture
def pub_node():
    """A node of its own context (shared memory only) for the test's publishers."""
    ctx = freight.Context(local_only=True)
    node = freight.Node("view_test_pub", context=ctx)
    yield node
    node.destroy_node()
    ctx.shutdown()


class View:
    """`freight view TOPICS --port 0 OPTIONS`, its port parsed from the first line."""

    def __init__(self, topics, *options):
        self.child = Child(
            [FREIGHT_BIN, "view", *topics, "--port", "0", *options], sigint_default=True, name="freight view"
        )
        try:
            words = self.child.expect("freight view: serving", timeout=EVENT)
            match = re.search(r"ws://127\.0\.0\.1:(\d+)", " ".join(words))
            assert match, f"no URL on the first line: {words}"
            self.url = f"ws://127.0.0.1:{match[1]}"
        except BaseException:
            self.child.close()
            raise

    def stop(self):
        """SIGINT (Ctrl-C); the exit status and the summary's lines."""
        self.child.proc.send_signal(signal.SIGINT)
        status = self.child.wait(timeout=EVENT)
        return status, self.child.stdout

    def close(self):
        self.child.close()


class Client:
    """A Foxglove WebSocket client: JSON for control, binary for messages."""

    def __init__(self, url, **options):
        self.ws = websockets.sync.client.connect(url, subprotocols=[SUBPROTOCOL], max_size=None, **options)
        assert self.ws.subprotocol == SUBPROTOCOL
        self.channels = {}  # topic -> advertised channel
        self.server_info = None
        self._next_sub = itertools.count(1)

    def recv(self, timeout):
        """The next frame: ``("json", dict)`` or ``("data", sub_id, log_time, payload)``."""
        frame = self.ws.recv(timeout=timeout)
        if isinstance(frame, str):
            msg = json.loads(frame)
            if msg["op"] == "serverInfo":
                self.server_info = msg
            elif msg["op"] == "advertise":
                for ch in msg["channels"]:
                    self.channels[ch["topic"]] = ch
            return ("json", msg)
        assert frame[0] == 0x01, f"opcode {frame[0]:#x} is not MessageData"
        sub_id, log_time = struct.unpack_from("<IQ", frame, 1)
        return ("data", sub_id, log_time, memoryview(frame)[13:])

    def wait_advertised(self, topics):
        deadline = time.monotonic() + EVENT
        while not all(t in self.channels for t in topics):
            left = deadline - time.monotonic()
            assert left > 0, f"advertised {sorted(self.channels)}, not all of {topics}"
            self.recv(left)
        return [self.channels[t] for t in topics]

    def subscribe(self, channel):
        sub_id = next(self._next_sub)
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sub_id, "channelId": channel["id"]}]}))
        return sub_id

    def close(self):
        self.ws.close()


def decoder(channel):
    """A function decoding ``channel``'s payloads with the schema it advertised."""
    assert channel["encoding"] == "cdr"
    assert channel["schemaEncoding"] == "ros2msg"
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(channel["schema"], channel["schemaName"]))
    return lambda payload: store.deserialize_cdr(bytes(payload), channel["schemaName"])


def pattern_image(k, width, height):
    data = np.empty(width * height * 4, dtype=np.uint8)
    fill_pattern(data, k)
    header = Header(stamp=Time(sec=k, nanosec=0), frame_id=f"frame{k}")
    return Image(header=header, height=height, width=width, encoding="bgra8", step=width * 4, data=data)


def test_a_foxglove_client_gets_images_and_strings_that_decode_against_the_advertised_schemas(pub_node):
    image_topic, string_topic = new_topic("image"), new_topic("string")
    images = pub_node.create_publisher(Image, image_topic, 10)
    strings = pub_node.create_publisher(String, string_topic, 10)
    view = View([image_topic, string_topic])
    try:
        client = Client(view.url)
        try:
            image_ch, string_ch = client.wait_advertised([image_topic, string_topic])
            assert client.server_info["name"] == "freight view"
            assert (image_ch["schemaName"], string_ch["schemaName"]) == (IMAGE, STRING)
            assert "\nstd_msgs/Header header\n" in image_ch["schema"], image_ch["schema"][:300]
            assert "MSG: builtin_interfaces/Time" in image_ch["schema"]
            decode = {client.subscribe(image_ch): decoder(image_ch), client.subscribe(string_ch): decoder(string_ch)}
            image_sub = next(iter(decode))

            # The server subscribes asynchronously: publish until both topics arrive.
            width, height = 64, 48
            got_images, got_strings = {}, {}
            deadline = time.monotonic() + EVENT
            k = 0
            while not (len(got_images) >= 3 and len(got_strings) >= 3):
                assert time.monotonic() < deadline, f"got images {sorted(got_images)}, strings {sorted(got_strings)}"
                images.publish(pattern_image(k, width, height))
                strings.publish(String(data=f"hello {k}"))
                k += 1
                end = time.monotonic() + 0.05
                while (left := end - time.monotonic()) > 0:
                    try:
                        frame = client.recv(left)
                    except TimeoutError:
                        break
                    if frame[0] != "data":
                        continue
                    _, sub_id, log_time, payload = frame
                    assert abs(log_time - time.time_ns()) < 60e9, f"log time {log_time} is not now"
                    assert bytes(payload[:4]) == b"\x00\x01\x00\x00", "CDR little-endian encapsulation header"
                    msg = decode[sub_id](payload)
                    if sub_id == image_sub:
                        got_images[msg.header.frame_id] = msg
                    else:
                        got_strings[msg.data] = msg
        finally:
            client.close()
        for frame_id, msg in got_images.items():
            n = int(frame_id.removeprefix("frame"))
            assert (msg.header.stamp.sec, msg.width, msg.height, msg.encoding, msg.step) == (n, width, height, "bgra8", width * 4)
            assert first_mismatch(np.asarray(msg.data, dtype=np.uint8), n) is None, f"frame {n}'s bytes"
        assert all(re.fullmatch(r"hello \d+", s) for s in got_strings)
        status, out = view.stop()
        assert status == 0, view.child.transcript()
        assert any(line.startswith("freight view: served 2 topics") for line in out), out
    finally:
        view.close()


def log_bag(path, topic, count):
    """A bag (rosbags' writer) of ``count`` rcl_interfaces/msg/Log lines
    "line0", "line1", ... 50 ms apart on ``topic``."""
    store = get_typestore(Stores.ROS2_JAZZY)
    writer = Rosbag2Writer(path, version=8, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    try:
        conn = writer.add_connection(topic, LOG, typestore=store)
        start = time.time_ns()
        for k in range(count):
            stamp = store.types["builtin_interfaces/msg/Time"](sec=k, nanosec=0)
            line = store.types[LOG](stamp=stamp, level=20, name="bag", msg=f"line{k}", file="", function="", line=0)
            writer.write(conn, start + k * 50_000_000, store.serialize_cdr(line, LOG))
    finally:
        writer.close()


def test_a_type_freight_has_no_rust_type_for_is_served_from_dds_with_its_install_definition(tmp_path):
    """rcl_interfaces/msg/Log (a stock node's /rosout): `freight bag play`
    sends a bag's lines to DDS as CDR, `freight view` reads them raw and
    advertises the definition of the stock Jazzy install that --msg-path names;
    the lines decode against it."""
    topic = new_topic("log")
    share = REPO / ".venv-ros-jazzy" / "share"
    if not (share / "rcl_interfaces" / "msg" / "Log.msg").is_file():
        pytest.fail(f"no stock ROS 2 Jazzy install at {share}: run scripts/install-deps.sh")
    log_bag(tmp_path / "logs", topic, 20)
    view = View([topic], "--msg-path", share)
    play = Child([FREIGHT_BIN, "bag", "play", tmp_path / "logs", "--loop"], sigint_default=True, name="freight bag play")
    try:
        client = Client(view.url)
        try:
            (channel,) = client.wait_advertised([topic])
            assert channel["schemaName"] == LOG
            assert channel["schema"].startswith((share / "rcl_interfaces" / "msg" / "Log.msg").read_text())
            sub_id = client.subscribe(channel)
            decode = decoder(channel)
            lines = []
            read_for(client, EVENT, lambda f: f[1] == sub_id and lines.append(decode(f[3]).msg), lambda: len(lines) >= 5)
        finally:
            client.close()
        assert len(lines) >= 5 and all(re.fullmatch(r"line\d+", line) for line in lines), lines
        assert "serving " + topic + " [rcl_interfaces/msg/Log] (from DDS, as CDR)" in view.child.stderr
    finally:
        play.close()
        view.close()


def test_all_serves_a_topic_that_appears_after_the_client_connected(pub_node):
    late = new_topic("late")
    view = View([], "--all")
    try:
        client = Client(view.url)
        try:
            client.recv(EVENT)  # serverInfo
            strings = pub_node.create_publisher(String, late, 10)
            (channel,) = client.wait_advertised([late])
            assert channel["schemaName"] == STRING
            sub_id, decode = client.subscribe(channel), decoder(channel)
            got = set()
            deadline = time.monotonic() + EVENT
            k = 0
            while len(got) < 3:
                assert time.monotonic() < deadline, f"got {sorted(got)} of the late topic"
                strings.publish(String(data=f"late {k}"))
                k += 1
                try:
                    frame = client.recv(0.05)
                except TimeoutError:
                    continue
                if frame[0] == "data" and frame[1] == sub_id:
                    got.add(decode(frame[3]).data)
            assert all(re.fullmatch(r"late \d+", s) for s in got), got
        finally:
            client.close()
        status, _ = view.stop()
        assert status == 0, view.child.transcript()
    finally:
        view.close()


def publish_at(pub, rate, seconds, width, height):
    """Publishes images at ``rate`` Hz for ``seconds``: (published, slowest publish in s)."""
    period, start = 1.0 / rate, time.monotonic()
    published, slowest = 0, 0.0
    while time.monotonic() - start < seconds:
        t = time.monotonic()
        pub.publish(pattern_image(published, width, height))
        slowest = max(slowest, time.monotonic() - t)
        published += 1
        time.sleep(max(0.0, start + published * period - time.monotonic()))
    return published, slowest


def every_message(topic):
    """An ordinary freight subscriber in a context of its own, keeping all it
    receives: ``(stop, frames)``, stop() returns the frame numbers taken."""
    ctx = freight.Context(local_only=True)
    node = freight.Node("view_test_sub", context=ctx)
    # Reliable, keep last 16 (freight's most), taken at once: nothing is lost at 30 Hz.
    sub = node.create_subscription(Image, topic, None, 16)
    frames, done = [], threading.Event()

    def take():
        while not done.is_set():
            msg = sub.take(timeout_sec=0.1)
            if msg is not None:
                frames.append(int(msg.header.frame_id.removeprefix("frame")))

    taker = threading.Thread(target=take, daemon=True)
    taker.start()

    def stop():
        time.sleep(0.5)  # the last messages in flight
        done.set()
        taker.join(EVENT)
        node.destroy_node()
        ctx.shutdown()
        return frames

    return stop


def read_for(client, seconds, on_data, until=lambda: False):
    """Reads ``client``'s frames for ``seconds`` (or until ``until()``), handing
    each MessageData to ``on_data``."""
    deadline = time.monotonic() + seconds
    while not until() and (left := deadline - time.monotonic()) > 0:
        try:
            frame = client.recv(left)
        except TimeoutError:
            return
        if frame[0] == "data":
            on_data(frame)


def wait_subscribed(pub, count):
    deadline = time.monotonic() + EVENT
    while pub.get_subscription_count() < count:
        assert time.monotonic() < deadline, f"{pub.get_subscription_count()} of {count} subscriptions matched"
        time.sleep(0.02)


def test_max_bandwidth_bounds_what_a_client_gets_while_the_publisher_keeps_its_rate(pub_node):
    topic = new_topic("budget")
    width, height, rate, seconds = 320, 240, 30, 4.0
    size = width * height * 4
    budget = 1_000_000  # bytes/s, against 9.2 MB/s offered
    pub = pub_node.create_publisher(Image, topic, 10)
    others = every_message(topic)
    view = View([topic], "--max-bandwidth", str(budget))
    try:
        wait_subscribed(pub, 2)  # the view's and the ordinary subscriber's
        client = Client(view.url)
        try:
            (channel,) = client.wait_advertised([topic])
            subscribed_at = time.monotonic()
            client.subscribe(channel)
            counts = {"bytes": 0, "messages": 0}

            def count(frame):
                counts["bytes"] += len(frame[3])
                counts["messages"] += 1

            reader = threading.Thread(target=read_for, args=(client, seconds + 1.0, count))
            reader.start()
            published, _ = publish_at(pub, rate, seconds, width, height)
            reader.join()
            elapsed = time.monotonic() - subscribed_at
        finally:
            client.close()
        frames = others()
        # The publisher kept its own rate, and the ordinary subscriber got every message.
        assert published >= 0.9 * rate * seconds, f"published {published} of {rate * seconds:.0f}"
        assert sorted(frames) == list(range(published)), f"the freight subscriber got {len(frames)} of {published}"
        # The client got at most the budget over its whole subscription, plus the
        # burst (0.1 s) and one message of slack, and not nothing.
        message = size + 200  # CDR of the image: its pixels and a small head
        bound = budget * elapsed + budget * 0.1 + message
        assert counts["bytes"] <= bound, f"{counts} in {elapsed:.2f} s, bound {bound:.0f}"
        assert counts["messages"] >= 3, f"only {counts} arrived"
        status, out = view.stop()
        assert status == 0, view.child.transcript()
        line = next(line for line in out if line.strip().startswith(f"{topic}:"))
        skipped = int(re.search(r"(\d+) skipped", line)[1])
        assert skipped > 0, line
    finally:
        view.close()


def test_small_messages_get_through_while_a_camera_spends_the_budget(pub_node):
    """A 1 MB/s budget against a 9.2 MB/s camera: each frame leaves 0.3 s of
    debt, in which one shared bucket skipped nearly every message of a small
    topic beside it (8 of 148 in two runs before the budget kept a share for
    small messages). Now the small topic gets through whole, and the camera
    still gets frames."""
    camera, small = new_topic("fair_camera"), new_topic("fair_small")
    width, height, rate, seconds = 320, 240, 30, 3.0
    images = pub_node.create_publisher(Image, camera, 10)
    strings = pub_node.create_publisher(String, small, 10)
    view = View([camera, small], "--max-bandwidth", "1000000")
    try:
        wait_subscribed(images, 1)
        wait_subscribed(strings, 1)
        client = Client(view.url)
        try:
            channels = client.wait_advertised([camera, small])
            sub_camera, sub_small = (client.subscribe(c) for c in channels)
            counts = {sub_camera: 0, sub_small: 0}

            def count(frame):
                counts[frame[1]] += 1

            reader = threading.Thread(target=read_for, args=(client, seconds + 1.5, count))
            reader.start()
            time.sleep(0.5)  # the subscriptions reach the server
            sent_small = [0]

            def publish_small():
                start = time.monotonic()
                while time.monotonic() - start < seconds:
                    strings.publish(String(data=f"small {sent_small[0]}"))
                    sent_small[0] += 1
                    time.sleep(0.02)

            small_thread = threading.Thread(target=publish_small)
            small_thread.start()
            publish_at(images, rate, seconds, width, height)
            small_thread.join()
            reader.join()
        finally:
            client.close()
        assert counts[sub_camera] >= 3, f"the camera got {counts[sub_camera]} frames"
        assert counts[sub_small] >= 0.8 * sent_small[0], f"{counts[sub_small]} of {sent_small[0]} small messages"
        status, _ = view.stop()
        assert status == 0, view.child.transcript()
    finally:
        view.close()


def test_a_client_that_subscribes_and_never_reads_does_not_slow_the_publisher(pub_node):
    topic = new_topic("stalled")
    width, height, rate, seconds = 512, 512, 30, 4.0  # 1 MiB frames, no budget
    pub = pub_node.create_publisher(Image, topic, 10)
    others = every_message(topic)
    view = View([topic], "--max-bandwidth", "0")
    try:
        wait_subscribed(pub, 2)
        # The client's library reads into a queue of one frame, then stops reading
        # the socket: the kernel's buffers fill and the server's writes stall.
        client = Client(view.url, max_queue=1)
        try:
            (channel,) = client.wait_advertised([topic])
            client.subscribe(channel)
            published, slowest = publish_at(pub, rate, seconds, width, height)
        finally:
            frames = others()
            client.ws.socket.close()  # no closing handshake: the client never reads again
        assert published >= 0.9 * rate * seconds, f"published {published} of {rate * seconds:.0f}"
        assert slowest < 0.5, f"a publish took {slowest:.3f} s"
        assert sorted(frames) == list(range(published)), f"the freight subscriber got {len(frames)} of {published}"
        # The view still ends at once on Ctrl-C, and sent the client something.
        status, out = view.stop()
        assert status == 0, view.child.transcript()
        line = next(line for line in out if line.strip().startswith(f"{topic}:"))
        assert int(re.search(r"(\d+) sent", line)[1]) > 0, line
    finally:
        view.close()


def test_a_port_in_use_is_a_one_line_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        view = Child([FREIGHT_BIN, "view", "/t", "--port", str(port)], name="freight view")
        try:
            status = view.wait(timeout=EVENT)
        finally:
            view.close()
    assert status != 0
    assert view.stdout == [], view.stdout
    assert len(view.stderr) == 1, view.stderr
    assert view.stderr[0].startswith(f"error: cannot listen on 127.0.0.1:{port}: "), view.stderr
    assert "--port" in view.stderr[0]


def test_no_topics_is_an_error_that_says_what_to_do():
    view = Child([FREIGHT_BIN, "view"], name="freight view")
    try:
        status = view.wait(timeout=EVENT)
    finally:
        view.close()
    assert status != 0
    assert view.stderr == ["error: name the topics to view, or --all"], view.stderr
