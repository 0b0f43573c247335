"""freight against stock ROS 2 nodes as users run them.

The peers are real rclpy nodes on rmw_fastrtps_cpp — ROS 2 Jazzy (Fast DDS 2.14)
and Kilted (Fast DDS 3.2) from PyPI, installed by scripts/install-deps.sh into
``.venv-ros-jazzy`` / ``.venv-ros-kilted`` — and freight's Python API, both
running ``peers/ros2_peer.py``. **Nothing is configured on either side**: the
processes get no CYCLONEDDS_URI, no Fast DDS XML and no ROS_* variable, only
PATH and HOME, exactly as a default install runs.

Every test runs in network namespaces it creates (``netns.py``): one "host" with
a multicast-capable loopback, or two joined by a shaped, lossy veth pair. No
traffic reaches this machine's interfaces. Without root the tests skip, saying
so; without the stock wheels they fail (``make test`` installs them).
"""

import json
import os
import pathlib
import re
import signal
import sys
import time

import pytest

import netns
from conftest import FREIGHT_BIN
from support import Child, remove_dead_fastdds_segments

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parents[1]
PEER = TESTS / "peers" / "ros2_peer.py"
DISTROS = ["jazzy", "kilted"]

#: Seconds a peer may take to start (rclpy's import and init are slow).
START = 30.0
#: Seconds one expected message may take, repairs included: generous, nothing
#: here measures speed (`freight bench ros2` does).
ARRIVE = 30.0
#: 3,686,400 points of x, y, z, rgb (16 B): four 1280x720 RGB-D cameras merged,
#: the Qiita seed's 55 MB cloud (59 MB, 56 MiB).
CLOUD_POINTS = 4 * 1280 * 720
SIZES = [(64, 48), (640, 480), (1920, 1080), (3840, 2160)]


@pytest.fixture(scope="module", autouse=True)
def _namespaces_possible():
    why = netns.unavailable()
    if why:
        pytest.skip(f"stock ROS 2 interop runs in private network namespaces: {why}")


@pytest.fixture(params=DISTROS)
def distro(request):
    """The stock interpreter of one distribution; a missing one fails the test."""
    python = REPO / f".venv-ros-{request.param}" / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"stock ROS 2 {request.param} is not installed ({python} is missing): "
            "run scripts/install-deps.sh (make test does)"
        )
    return python


@pytest.fixture
def host():
    with netns.host() as name:
        yield name


@pytest.fixture
def topic():
    return f"/stock_interop_{os.getpid()}_{time.monotonic_ns() % 1_000_000}"


class Peers:
    """Starts peers in namespaces and closes them all at the end of a test."""

    def __init__(self, stock_python):
        self.stock_python = stock_python
        self.children = []

    def start(self, namespace, stack, role, kind, topic, *options, node=None):
        python = self.stock_python if stack == "stock" else sys.executable
        argv = [python, PEER, stack, role, kind, topic, *options]
        if node:
            argv += ["--node", node]
        child = Child(netns.argv(namespace, argv), clean_env=True, name=f"{stack}-{role}")
        self.children.append(child)
        child.expect("READY", timeout=START)
        return child

    def close(self):
        for child in self.children:
            child.close()


@pytest.fixture
def peers(distro):
    started = time.time()
    p = Peers(distro)
    yield p
    p.close()
    # Stock nodes that a test SIGKILLed leave Fast DDS's segments behind.
    remove_dead_fastdds_segments(started)


def matched(child, count, within=None):
    """How many endpoints ``child`` matched, once ``count`` did or its wait
    (``within`` seconds, else the peer's 20) ran out."""
    child.send(f"WAIT {count}" + (f" {within}" if within is not None else ""))
    return int(child.expect("MATCHED", timeout=START)[1])


#: Frames numbered from here on are warm-up frames, which :func:`received` skips.
WARM_UP = 10_000


def both_matched(pub, sub, pub_stack="freight"):
    """Waits until each side sees the other. A stock publisher then sends
    warm-up messages of about a megabyte until the subscription gets one:
    Cyclone DDS drops the first sample larger than a datagram from a new Fast
    DDS writer (test_the_first_large_frame_of_a_new_stock_publisher_arrives
    says why), and a subscription still matched to a killed publisher answers
    ``WAIT 1`` before it has matched the new one."""
    # At least one: a killed peer stays matched until its lease runs out.
    assert matched(pub, 1) >= 1, "the publisher never saw the subscription"
    assert matched(sub, 1) >= 1, "the subscription never saw the publisher"
    if pub_stack != "stock":
        return
    deadline = time.monotonic() + START
    k = WARM_UP
    while time.monotonic() < deadline:
        pub.send(f"WARMUP {k}")
        pub.expect("SENT")
        k += 1
        try:
            words = sub.expect("GOT", timeout=1.0)
        except AssertionError:
            continue  # not heard yet: send another
        if int(words[1]) >= WARM_UP:
            return
    raise AssertionError(f"no warm-up message reached the subscription within {START} s{sub.transcript()}")


def received(sub, count, timeout=ARRIVE):
    """The next ``count`` messages: ``{k: (width, height, nbytes)}``; fails on a
    wrong byte, a message received twice, or one that does not come."""
    got = {}
    while len(got) < count:
        try:
            words = sub.expect("GOT", timeout=timeout)
        except AssertionError as e:
            # Callers' numbering need not start at 0: name the gaps in what came.
            gaps = sorted(set(range(min(got), max(got))) - set(got)) if got else []
            came = f"up to {max(got)}, not {gaps[:10]}" if got else "none"
            raise AssertionError(f"{len(got)} of {count} messages ({came}): {e}") from None
        k, width, height, nbytes, verdict = int(words[1]), int(words[2]), int(words[3]), int(words[4]), words[5]
        assert verdict == "OK", f"message {k} has a wrong byte at {words[6:]}{sub.transcript()}"
        if k >= WARM_UP:
            continue
        assert k not in got, f"message {k} arrived twice{sub.transcript()}"
        got[k] = (width, height, nbytes)
    return got


def nothing_more(sub, seconds):
    with pytest.raises(AssertionError, match="no 'GOT' line"):
        sub.expect("GOT", timeout=seconds)


def send_images(pub, frames, rate=5.0):
    """Publishes ``(k, width, height)`` frames at ``rate`` Hz, as a camera would."""
    for k, width, height in frames:
        t0 = time.monotonic()
        pub.send(f"IMAGE {k} {width} {height}")
        pub.expect("SENT", timeout=ARRIVE)
        time.sleep(max(0.0, 1 / rate - (time.monotonic() - t0)))


STACKS = {"freight_to_stock": ("freight", "stock"), "stock_to_freight": ("stock", "freight")}


@pytest.mark.parametrize("direction", list(STACKS))
def test_images_from_64x48_to_4k_arrive_byte_exact_every_one(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    sub = peers.start(host, sub_stack, "sub", "image", topic)
    pub = peers.start(host, pub_stack, "pub", "image", topic)
    both_matched(pub, sub, pub_stack)
    frames = [(3 * i + j, w, h) for i, (w, h) in enumerate(SIZES) for j in range(3)]
    send_images(pub, frames)
    got = received(sub, len(frames))
    assert got == {k: (w, h, w * h * 4) for k, w, h in frames}


@pytest.mark.parametrize("direction", list(STACKS))
def test_a_55mb_point_cloud_arrives_byte_exact(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    sub = peers.start(host, sub_stack, "sub", "cloud", topic)
    pub = peers.start(host, pub_stack, "pub", "cloud", topic)
    both_matched(pub, sub, pub_stack)
    for k in range(3):
        pub.send(f"CLOUD {k} {CLOUD_POINTS}")
        pub.expect("SENT", timeout=ARRIVE)
        time.sleep(1.0)
    got = received(sub, 3, timeout=60.0)
    assert got == {k: (CLOUD_POINTS, 1, 16 * CLOUD_POINTS) for k in range(3)}


@pytest.mark.parametrize("direction", list(STACKS))
def test_imu_messages_with_fixed_size_covariances_arrive_field_exact(peers, host, topic, direction):
    # sensor_msgs/Imu is generated from its .msg file (nested geometry_msgs,
    # three float64[9]): its layout must be ROS 2's to the byte.
    pub_stack, sub_stack = STACKS[direction]
    sub = peers.start(host, sub_stack, "sub", "imu", topic)
    pub = peers.start(host, pub_stack, "pub", "imu", topic)
    both_matched(pub, sub, pub_stack)
    for k in range(5):
        pub.send(f"IMU {k}")
        pub.expect("SENT", timeout=ARRIVE)
    assert received(sub, 5) == {k: (0, 0, 0) for k in range(5)}


@pytest.mark.parametrize("direction", list(STACKS))
def test_a_subscription_that_joins_after_the_publisher_gets_what_follows(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    pub = peers.start(host, pub_stack, "pub", "image", topic)
    sub = peers.start(host, sub_stack, "sub", "image", topic)
    both_matched(pub, sub, pub_stack)
    frames = [(k, 1920, 1080) for k in range(5)]
    send_images(pub, frames)
    assert sorted(received(sub, len(frames))) == list(range(5))


# A best-effort frame is sent once, every fragment at once, and never repaired:
# it arrives only if the reader's socket buffer holds what comes while its thread
# wakes up. A stock reader's is the kernel's default (net.core.rmem_default,
# 208 KiB: three 64 KB datagrams); freight's reader asks for 4 MiB. So a stock
# reader gets 256x180 (184 kB, three datagrams) and freight's reader 640x480
# (1.2 MB, 19 datagrams). Larger frames to a stock reader on one host are lost
# as often from a stock writer over UDP as from freight: docs/network.md.
BEST_EFFORT_FRAME = {"freight_to_stock": (256, 180), "stock_to_freight": (640, 480)}


@pytest.mark.parametrize("direction", list(STACKS))
def test_best_effort_frames_arrive_intact(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    sub = peers.start(host, sub_stack, "sub", "image", topic, "--reliability", "best_effort")
    pub = peers.start(host, pub_stack, "pub", "image", topic, "--reliability", "best_effort")
    both_matched(pub, sub, pub_stack)
    width, height = BEST_EFFORT_FRAME[direction]
    send_images(pub, [(k, width, height) for k in range(20)], rate=10.0)
    got = everything_received(sub, quiet=3.0)
    # Measured, 50 of 50 both ways on an idle machine; best effort may still
    # lose a frame to a reader that is late by a whole frame period.
    assert len(got) >= 15, f"{len(got)} of 20 best-effort frames arrived: {sorted(got)}{sub.transcript()}"
    assert all(v == (width, height, width * height * 4) for v in got.values()), got


@pytest.mark.parametrize("direction", list(STACKS))
def test_a_reliable_subscription_does_not_match_a_best_effort_publisher(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    sub = peers.start(host, sub_stack, "sub", "image", topic)
    pub = peers.start(host, pub_stack, "pub", "image", topic, "--reliability", "best_effort")
    # Discovery is done once each side's graph lists the other's endpoint; a
    # match would come with it. Then DDS's request-offer rule, which both sides
    # must apply the same way, keeps them apart.
    for child, kind in ((pub, "subscriptions"), (sub, "publishers")):
        g = settled_graph(child, topic, lambda g, kind=kind: len(g[kind]) == 1)
        assert len(g[kind]) == 1, g
    assert matched(pub, 1, within=3.0) == 0
    pub.send("IMAGE 0 64 48")
    pub.expect("SENT")
    nothing_more(sub, 3.0)


@pytest.mark.parametrize("direction", list(STACKS))
def test_a_late_transient_local_subscription_gets_the_latched_messages(peers, host, topic, direction):
    pub_stack, sub_stack = STACKS[direction]
    # Depth 1, as latched ROS topics use (and freight's default Limits::max_history).
    latched = ["--durability", "transient_local", "--depth", "1"]
    pub = peers.start(host, pub_stack, "pub", "image", topic, *latched)
    for k in range(3):
        pub.send(f"IMAGE {k} 1920 1080")
        pub.expect("SENT")
    # Started after the last publish: it gets the publisher's history, the last message.
    sub = peers.start(host, sub_stack, "sub", "image", topic, *latched)
    assert sorted(received(sub, 1)) == [2]
    nothing_more(sub, 2.0)


def test_garbage_from_a_hostile_participant_is_dropped_and_the_stream_goes_on(peers, host, topic):
    """A DDS writer that is no ROS 2 node sends samples of another layout under
    the Image type name; the spinning freight subscription logs each as a
    malformed message and goes on receiving a stock publisher's frames."""
    sub = peers.start(host, "freight", "sub", "image", topic)
    pub = peers.start(host, "stock", "pub", "image", topic)
    both_matched(pub, sub, "stock")
    hostile = Child(netns.argv(host, [sys.executable, TESTS / "peers" / "hostile_dds.py", topic, 3]), clean_env=True)
    peers.children.append(hostile)
    hostile.expect("MATCHED", timeout=START)
    hostile.expect("SENT", timeout=START)
    send_images(pub, [(k, 640, 480) for k in range(3)])
    assert sorted(received(sub, 3)) == [0, 1, 2]
    deadline = time.monotonic() + ARRIVE
    while sum("dropped a malformed message" in line for line in sub.stderr) < 3:
        assert time.monotonic() < deadline, f"the malformed samples were not reported{sub.transcript()}"
        time.sleep(0.1)


def test_a_stock_subscriber_killed_and_restarted_mid_stream_gets_the_rest(peers, host, topic):
    pub = peers.start(host, "freight", "pub", "image", topic)
    first = peers.start(host, "stock", "sub", "image", topic)
    both_matched(pub, first)
    pub.send("STREAM 0 80 10 640 480")
    received(first, 10)
    first.proc.send_signal(signal.SIGKILL)
    first.wait()
    second = peers.start(host, "stock", "sub", "image", topic)
    got = sorted(received(second, 10))
    # From the frame it joined at, every frame, in order, to the end of the stream.
    got += sorted(received(second, 80 - got[-1] - 1))
    assert got == list(range(got[0], 80)), got


def test_a_stock_publisher_killed_and_restarted_mid_stream_is_heard_again(peers, host, topic):
    sub = peers.start(host, "freight", "sub", "image", topic)
    first = peers.start(host, "stock", "pub", "image", topic)
    both_matched(first, sub, "stock")
    first.send("STREAM 0 50 10 640 480")
    received(sub, 10)
    first.proc.send_signal(signal.SIGKILL)
    first.wait()
    second = peers.start(host, "stock", "pub", "image", topic)
    both_matched(second, sub, "stock")
    second.send("STREAM 1000 20 10 640 480")
    # Frames of the dead publisher may still be in flight: skip them.
    got = set()
    while len(got) < 20:
        words = sub.expect("GOT", timeout=ARRIVE)
        assert words[5] == "OK", sub.transcript()
        if 1000 <= int(words[1]) < WARM_UP:
            got.add(int(words[1]))
    assert got == set(range(1000, 1020))


@pytest.mark.xfail(
    strict=True,
    reason="Cyclone DDS (freight's network plane, and rmw_cyclonedds alike) drops the first sample larger "
    "than a datagram from a new Fast DDS writer: Fast DDS sends its first heartbeat before Cyclone has "
    "processed the writer's discovery data, so Cyclone ignores it, and the next one, piggybacked on the "
    "sample's second fragment, starts Cyclone's volatile reader after that sample (ddsi_receive.c, "
    "handle_Heartbeat). See docs/network.md.",
)
def test_the_first_large_frame_of_a_new_stock_publisher_arrives(peers, host, topic):
    sub = peers.start(host, "freight", "sub", "image", topic)
    pub = peers.start(host, "stock", "pub", "image", topic)
    both_matched(pub, sub)  # no warm-up frame
    send_images(pub, [(0, 640, 480), (1, 640, 480)])
    assert sorted(received(sub, 2, timeout=10.0)) == [0, 1]


def settled_graph(child, topic, wanted, within=ARRIVE):
    """The graph ``child`` reports for ``topic`` once ``wanted(graph)`` holds, or
    after ``within`` seconds: node announcements travel apart from endpoint
    discovery, so a graph settles over a moment, as `ros2` waits its --spin-time."""
    deadline = time.monotonic() + within
    while True:
        child.send(f"GRAPH {topic}")
        # The JSON has no whitespace inside its strings, so the words join back.
        g = json.loads(" ".join(child.expect("GRAPH", timeout=START)[1:]))
        if wanted(g) or time.monotonic() > deadline:
            return g


def graph_pair(peers, host, topic):
    pub = peers.start(host, "freight", "pub", "image", topic, node="freight_camera")
    sub = peers.start(host, "stock", "sub", "image", topic, node="stock_viewer")
    both_matched(pub, sub)
    return pub, sub


NAMED = {
    "publishers": [["/", "freight_camera", "sensor_msgs/msg/Image"]],
    "subscriptions": [["/", "stock_viewer", "sensor_msgs/msg/Image"]],
}


def test_each_side_lists_the_others_nodes_topics_and_types(peers, host, topic):
    pub, sub = graph_pair(peers, host, topic)

    def complete(g):
        nodes = ["freight_camera", "/"] in g["nodes"] and ["stock_viewer", "/"] in g["nodes"]
        endpoints = len(g["publishers"]) == 1 and len(g["subscriptions"]) == 1
        return nodes and endpoints and g["topics"].get(topic) == ["sensor_msgs/msg/Image"]

    for side, child in (("freight", pub), ("stock", sub)):
        g = settled_graph(child, topic, complete)
        assert complete(g), (side, g)
    # freight names the stock node's endpoints whatever the distribution.
    g = settled_graph(pub, topic, lambda g: {k: g[k] for k in NAMED} == NAMED)
    assert {k: g[k] for k in NAMED} == NAMED, g


def test_stock_rclpy_names_the_node_of_each_freight_endpoint(peers, host, topic, request):
    # Where the names are known never to come (the xfail below), the graph is
    # read after 8 s, long past the moment they take on Jazzy, not after ARRIVE.
    within = ARRIVE
    if "kilted" in request.node.callspec.id:
        within = 8.0
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="Fast DDS 3 (Kilted) gives an endpoint whose discovery data carries no participant "
                "GUID — Cyclone DDS's never do, rmw_cyclonedds's included — the all-zero participant, so "
                "rclpy names it _CREATED_BY_BARE_DDS_APP_; freight announces its nodes under its real "
                "participant GUID, which Jazzy uses and the RTPS specification defines. Node names are "
                "listed either way. See docs/network.md.",
            )
        )
    pub, sub = graph_pair(peers, host, topic)
    g = settled_graph(sub, topic, lambda g: {k: g[k] for k in NAMED} == NAMED, within)
    assert {k: g[k] for k in NAMED} == NAMED, g


def test_1080p_at_15hz_reaches_a_stock_node_on_another_host_over_a_lossy_gigabit_link(peers, topic):
    """Two hosts joined by a 1 Gbit/s link that drops 1 % of the packets each way.
    1080p bgra8 would be twice the link at 30 Hz: the stream is 1080p mono8, a
    monochrome or IR camera. Every frame arrives.

    15 Hz, not a camera's 30: both "hosts" share this machine's cores. At 30 Hz
    the stock reader alone takes 80-90 % of a core (1,540 datagrams a frame); on
    two cores shared with the publisher it falls behind now and then, the
    writer's KEEP_LAST 10 history moves on, and frames are lost, in about one
    run in three (stock to stock over the same link: 0 of 90). docs/network.md
    has the measurements."""
    with netns.two_hosts(rate="1gbit", loss=0.01) as (a, b):
        sub = peers.start(b, "stock", "sub", "image", topic)
        pub = peers.start(a, "freight", "pub", "image", topic)
        both_matched(pub, sub)
        pub.send("STREAM 0 90 15 1920 1080 mono8")
        got = received(sub, 90, timeout=ARRIVE)
        assert sorted(got) == list(range(90))
        assert set(got.values()) == {(1920, 1080, 1920 * 1080)}


def everything_received(sub, quiet=5.0):
    """What ``sub`` received until nothing came for ``quiet`` seconds:
    ``{k: (width, height, nbytes)}``, warm-up messages left out; fails on a
    wrong byte or a message received twice."""
    got = {}
    while True:
        try:
            words = sub.expect("GOT", timeout=quiet)
        except AssertionError:
            return got
        k, verdict = int(words[1]), words[5]
        assert verdict == "OK", f"message {k} has a wrong byte at {words[6:]}{sub.transcript()}"
        if k < WARM_UP:
            assert k not in got, f"message {k} arrived twice{sub.transcript()}"
            got[k] = (int(words[2]), int(words[3]), int(words[4]))


def test_in_a_containers_64mb_dev_shm_freight_delivers_what_stock_ros2_does(distro, topic):
    """Issue 22's case, side by side: in a "container" whose /dev/shm is
    Docker's default 64 MB, a publisher sends thirty 4K bgra8 frames (31.6 MiB
    each) at 20 Hz with rclpy's default QoS (reliable, depth 10) to a
    subscription that keeps the last four alive; first on stock rclpy, then on
    freight, each in a container of its own. freight once died of SIGBUS after
    two frames. Now the frames /dev/shm has no room for go over DDS: the
    publisher lives, every frame that arrives is intact, and freight delivers
    at least what stock ROS 2 does, or all but two frames. (Stock rclpy delivered 30 of 30 on a quiet
    machine and lost some under load: its keep-last queues drop frames that a
    busy subscriber does not take in time.)"""
    frames = 30
    delivered = {}
    for stack, python in (("stock", distro), ("freight", sys.executable)):
        with netns.container("64m") as inside:

            def start(role, *options):
                argv = inside([python, PEER, stack, role, "image", topic, *options])
                child = Child(argv, clean_env=True, name=f"{stack}-{role}")
                child.expect("READY", timeout=START)
                return child

            with start("sub", "--hold", "4") as sub, start("pub") as pub:
                both_matched(pub, sub, pub_stack=stack)
                pub.send(f"STREAM 0 {frames} 20 3840 2160")
                for _ in range(frames):
                    pub.expect("SENT", timeout=ARRIVE)
                got = everything_received(sub)
                assert all(size == (3840, 2160, 3840 * 2160 * 4) for size in got.values()), got
                assert pub.proc.poll() is None, f"the {stack} publisher died{pub.transcript()}"
                if stack == "freight":
                    said = "\n".join(pub.stderr)
                    assert "go to the subscribers over DDS" in said, f"nothing spilled: /dev/shm was not full{pub.transcript()}"
                delivered[stack] = len(got)
    print(f"64 MB /dev/shm, {frames} 4K frames: stock {delivered['stock']}, freight {delivered['freight']} delivered")
    # freight delivered all 30 in every run where it was recorded; one run in
    # seven had it behind stock, by how much is not known yet: allow two.
    assert delivered["freight"] >= min(delivered["stock"], frames - 2), delivered


#: The comment `freight topic echo` prints before a message of a type it decoded by its .msg files.
ECHO_HEADER = r"# from publisher [0-9a-f]{16}, via network, as CDR decoded by its \.msg definition"


def test_echo_and_hz_take_a_stock_nodes_rosout_decoded_by_the_installs_msg_files(peers, host, topic, distro):
    """`freight topic echo` and `hz` of a type freight has no Rust type for: a
    stock node's /rosout (rcl_interfaces/msg/Log), read from DDS as CDR and
    decoded by the stock install's .msg files, found through AMENT_PREFIX_PATH
    as a sourced install sets it. Every field comes out, in the definition's
    order, with the values the stock node sent."""
    env = {"AMENT_PREFIX_PATH": str(distro.parent.parent)}
    logger = peers.start(host, "stock", "pub", "image", topic, node="stock_logger")

    def freight(*argv, name):
        child = Child(netns.argv(host, [FREIGHT_BIN, "topic", *argv]), env=env, clean_env=True, name=name)
        peers.children.append(child)
        return child

    def log_until_exit(child, period):
        # The tools subscribe volatile, best effort: log until they have what
        # they wait for.
        deadline = time.monotonic() + ARRIVE
        while child.proc.poll() is None and time.monotonic() < deadline:
            logger.send("LOG 1")
            logger.expect("LOGGED", timeout=START)
            time.sleep(period)
        return child.wait(timeout=START)

    echo = freight("echo", "/rosout", "--count", "3", "--spin-time", "3", name="freight topic echo")
    assert log_until_exit(echo, 0.3) == 0, echo.transcript()
    documents = [d.strip() for d in "\n".join(echo.stdout).split("\n---") if d.strip()]
    assert len(documents) == 3, echo.transcript()
    for d in documents:
        header, *body = d.splitlines()
        assert re.fullmatch(ECHO_HEADER, header), d
        keys = [line.split(":")[0] for line in body if not line.startswith(" ")]
        assert keys == ["stamp", "level", "name", "msg", "file", "function", "line"], d
        fields = dict(line.split(": ", 1) for line in body if ": " in line)
        assert (fields["level"], fields["name"], fields["msg"]) == ("20", "stock_logger", "log0"), d
        assert int(fields["  sec"]) > 1_700_000_000 and fields["file"].endswith(".py") and int(fields["line"]) > 0, d

    hz = freight("hz", "/rosout", "--duration", "4", "--spin-time", "3", name="freight topic hz")
    assert log_until_exit(hz, 0.1) == 0, hz.transcript()
    rates = [float(line.split()[-1]) for line in hz.stdout if line.startswith("average rate:")]
    assert rates and 1.0 < rates[-1] < 50.0, hz.transcript()


#: A freight Python subscription that takes nothing until told: best effort,
#: keep-all (bounded by freight's queue limit), so that a burst overflows it.
#: ``PUBLISHERS`` prints ``PUBLISHERS <matched>``, ``COUNT`` prints
#: ``LOSSES <network_losses>``, ``DRAIN`` takes all and prints ``KEPT <n>``.
LOSSY_SUBSCRIBER = """
import sys
import freight
from freight.msgs.sensor_msgs import Image
from freight.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

freight.init()
node = freight.Node("lossy")
qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.BEST_EFFORT)
sub = node.create_subscription(Image, sys.argv[1], None, qos)
print("READY", flush=True)
for line in sys.stdin:
    if line.strip() == "PUBLISHERS":
        print(f"PUBLISHERS {sub.get_publisher_count()}", flush=True)
    elif line.strip() == "COUNT":
        print(f"LOSSES {sub.network_losses}", flush=True)
    elif line.strip() == "DRAIN":
        kept = 0
        while sub.take(timeout_sec=0) is not None:
            kept += 1
        print(f"KEPT {kept}", flush=True)
"""


def test_a_python_subscription_counts_what_dds_knows_it_missed(peers, host, topic):
    """A stock node bursts images at a best-effort freight Python subscription
    that takes none: what its queue has no room for, DDS rejects, and
    ``Subscription.network_losses`` counts (as Rust's
    ``Subscription::network_losses``, and rclcpp's message-lost event). Every
    image is either kept or counted."""
    burst = 30
    pub = peers.start(host, "stock", "pub", "image", topic, "--reliability", "best_effort")
    sub = Child(netns.argv(host, [sys.executable, "-c", LOSSY_SUBSCRIBER, topic]), clean_env=True, name="lossy-sub")
    peers.children.append(sub)
    sub.expect("READY", timeout=START)
    assert matched(pub, 1) == 1
    # Matched both ways: a sample sent before the subscription's reader knows
    # the writer is neither kept nor counted.
    deadline = time.monotonic() + ARRIVE
    while time.monotonic() < deadline:
        sub.send("PUBLISHERS")
        if sub.expect("PUBLISHERS", timeout=START)[1] == "1":
            break
        time.sleep(0.1)
    sub.send("COUNT")
    assert sub.expect("LOSSES", timeout=START)[1] == "0"
    pub.send(f"STREAM 0 {burst} 1000 8 8")
    for k in range(burst):
        pub.expect(f"SENT {k} ", timeout=ARRIVE)
    deadline = time.monotonic() + ARRIVE
    losses = 0
    while time.monotonic() < deadline:
        sub.send("COUNT")
        losses = int(sub.expect("LOSSES", timeout=START)[1])
        if losses > 0:
            time.sleep(0.5)  # the last rejections of the burst
            sub.send("COUNT")
            losses = int(sub.expect("LOSSES", timeout=START)[1])
            break
        time.sleep(0.2)
    sub.send("DRAIN")
    kept = int(sub.expect("KEPT", timeout=START)[1])
    assert losses > 0, f"none of {burst} counted lost, {kept} kept{sub.transcript()}"
    assert losses + kept == burst, f"{losses} lost + {kept} kept != {burst}{sub.transcript()}"


def test_topic_pub_sends_a_type_freight_lacks_to_a_stock_subscriber(peers, host, topic, distro):
    """`freight topic pub` of rcl_interfaces/msg/Log, a type freight has no Rust
    type for, given as YAML: encoded by the stock install's .msg files (found
    through --msg-path) and sent over DDS to a stock subscription, which checks
    the fields it got."""
    sub = peers.start(host, "stock", "sub", "log", topic)
    argv = [FREIGHT_BIN, "topic", "pub", topic, "rcl_interfaces/msg/Log", "{level: 20, name: bag, msg: line3}"]
    argv += ["--count", "3", "--rate", "5", "--wait-for-subscribers", "1", "--msg-path", distro.parent.parent / "share"]
    pub = Child(netns.argv(host, argv), clean_env=True, name="freight topic pub")
    peers.children.append(pub)
    assert pub.wait(timeout=ARRIVE) == 0, pub.transcript()
    for _ in range(3):
        words = sub.expect("GOT", timeout=ARRIVE)
        assert words[1:] == ["3", "0", "0", "5", "OK"], f"{words}{sub.transcript()}"
