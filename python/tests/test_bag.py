"""`freight bag` end to end, each result checked by tools freight did not write.

* What `freight bag record` writes is read back by ``rosbags`` (decoded with
  ROS 2 Jazzy's own type definitions, not the bag's) and by the ``mcap`` and
  ``mcap-ros2-support`` packages, byte for byte against the pattern the
  publisher wrote (byte i of message k is (k + i) % 251).
* What ``rosbags`` and ``mcap_ros2`` write, `freight bag play` plays to freight
  subscribers and to stock rclpy nodes (Jazzy, Kilted) in a private network
  namespace.
* A recorder killed with SIGKILL, split into many files, or stopped by a full
  disk leaves a bag that ``freight bag reindex`` makes whole, losing nothing but
  the tail it never wrote.
* Bad input (an existing output directory, a truncated file, a corrupted chunk,
  a type hash that is not freight's) is refused with an error that names the
  file and the problem, and nothing is changed.

Publishers are ``peers/ros2_peer.py`` on freight (and ``freight topic pub``);
the stock nodes are the same script on ``.venv-ros-jazzy`` / ``.venv-ros-kilted``.
Only the stock-node test needs root (network namespaces) and skips without it,
saying so; the full-disk test mounts a tmpfs in a private mount namespace and
fails, with the reason, where it cannot.
"""

import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import netns
import numpy as np
import pytest
from conftest import FREIGHT_BIN, REPO
from mcap.reader import make_reader
from mcap.writer import Writer as McapWriter
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2.writer import Writer as McapRos2Writer
from rosbags.highlevel import AnyReader
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore
from ruamel.yaml import YAML
from support import Child, fill_pattern, first_mismatch, peer, remove_dead_fastdds_segments

#: ROS 2 Jazzy's message definitions, as rosbags ships them: what a stock node
#: would decode the recorded bytes with.
JAZZY = get_typestore(Stores.ROS2_JAZZY)
LOG = "rcl_interfaces/msg/Log"
IMAGE = "sensor_msgs/msg/Image"
BLOB = "std_msgs/msg/UInt8MultiArray"
#: Seconds a peer may take to start (rclpy's import and init are slow).
START = 30.0
#: Seconds any one expected event may take: generous; nothing here measures speed.
EVENT = 20.0

_topics = itertools.count()


def new_topic(what):
    """A topic name no other test (or concurrent run) uses."""
    return f"/bag_{what}_{os.getpid()}_{next(_topics)}"


@pytest.fixture(scope="module", autouse=True)
def _freight_bag_exists():
    if not FREIGHT_BIN.exists():
        pytest.fail(f"{FREIGHT_BIN} is not built: run `cargo build --release` (or set FREIGHT_BIN)")
    done = subprocess.run([FREIGHT_BIN, "bag", "--help"], check=False, capture_output=True, text=True, timeout=EVENT)
    if done.returncode != 0:
        pytest.fail(f"`{FREIGHT_BIN} bag` does not exist: rebuild with `cargo build --release -p freight-cli`")


# ---------------------------------------------------------------- helpers


def freight(*args, timeout=EVENT):
    """Runs the `freight` tool to the end: (status, stdout, stderr)."""
    env = dict(os.environ)
    env.setdefault("CYCLONEDDS_URI", f"file://{REPO / 'crates' / 'freight-dds' / 'loopback.xml'}")
    done = subprocess.run(
        [str(FREIGHT_BIN), *map(str, args)], check=False, capture_output=True, text=True, timeout=timeout, env=env
    )
    return done.returncode, done.stdout, done.stderr


def wait_stderr(child, text, timeout=EVENT):
    """Waits until a line of ``child``'s stderr contains ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in list(child.stderr)):
            return
        if child.proc.poll() is not None:
            child.wait()  # read what is left
            if any(text in line for line in child.stderr):
                return
            raise AssertionError(f"{child.name}: exited before printing {text!r}{child.transcript()}")
        time.sleep(0.02)
    raise AssertionError(f"{child.name}: no {text!r} on stderr within {timeout} s{child.transcript()}")


def stock_interpreter(distro):
    """The stock ROS 2 ``distro`` interpreter, for a test whose nodes run in a
    private network namespace: skips (saying why) where namespaces cannot be
    made, fails where the install step did not install that distro."""
    why = netns.unavailable()
    if why:
        pytest.skip(f"stock ROS 2 nodes run in private network namespaces: {why}")
    python = REPO / f".venv-ros-{distro}" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"stock ROS 2 {distro} is not installed ({python} is missing): run scripts/install-deps.sh")
    return python


def start_recorder(bag, topics, *options):
    """`freight bag record -o bag topics...`, once it has subscribed to each topic
    (it does once a publisher exists)."""
    rec = Child(
        [FREIGHT_BIN, "bag", "record", "-o", bag, *options, *topics], sigint_default=True, name="freight bag record"
    )
    try:
        wait_stderr(rec, f"recording into {bag}")
        for t in topics:
            wait_stderr(rec, f"recording {t} [")
    except BaseException:
        rec.close()
        raise
    return rec


def stop_recorder(rec):
    """SIGINT (Ctrl-C), then the exit status once the summary is out."""
    rec.proc.send_signal(signal.SIGINT)
    return rec.wait(timeout=EVENT)


def image_publisher(topic):
    pub = peer("ros2_peer.py", "freight", "pub", "image", topic)
    try:
        pub.expect("READY", timeout=START)
    except BaseException:
        pub.close()
        raise
    return pub


def stream(pub, count, rate, width, height, first=0):
    """Has ``pub`` (matched to the recorder first) publish images ``first`` ..
    ``first + count - 1`` at ``rate`` Hz and waits until all are out."""
    pub.send("WAIT 1")
    assert int(pub.expect("MATCHED", timeout=START)[1]) >= 1, "the recorder's subscription never matched"
    pub.send(f"STREAM {first} {count} {rate} {width} {height}")
    for _ in range(count):
        pub.expect("SENT", timeout=EVENT)


def pattern_image(k, width, height):
    """Image ``k`` as ros2_peer.py publishes it, a Jazzy message object."""
    data = np.empty(width * height * 4, dtype=np.uint8)
    fill_pattern(data, k)
    Time, Header, Image = (JAZZY.types[t] for t in ("builtin_interfaces/msg/Time", "std_msgs/msg/Header", IMAGE))
    return Image(
        header=Header(stamp=Time(sec=k, nanosec=0), frame_id=f"frame{k}"),
        height=height,
        width=width,
        encoding="bgra8",
        is_bigendian=0,
        step=width * 4,
        data=data,
    )


def check_image(msg, width=None, height=None):
    """Frame number of a decoded image (from ``frame<k>``), after checking its
    every byte against the pattern."""
    k = int(msg.header.frame_id.removeprefix("frame"))
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8) if not isinstance(msg.data, np.ndarray) else msg.data
    if width is not None:
        assert (msg.width, msg.height, msg.encoding, msg.step) == (width, height, "bgra8", width * 4), f"frame {k}"
        assert data.size == width * height * 4, f"frame {k} has {data.size} bytes"
    bad = first_mismatch(data, k)
    assert bad is None, f"frame {k}: byte {bad} breaks the pattern"
    return k


def read_rosbags(bag):
    """Every message of ``bag`` through rosbags: ``[(topic, type, raw CDR)]`` in
    the bag's order. Decoding is left to the caller (with JAZZY)."""
    with AnyReader([Path(bag)], default_typestore=JAZZY) as reader:
        return [(c.topic, c.msgtype, bytes(raw)) for c, _, raw in reader.messages()]


def image_frames(messages, topic, width=None, height=None):
    """Frame numbers of ``topic``'s images, in the bag's order, each decoded with
    Jazzy's definition and checked against the pattern."""
    return [check_image(JAZZY.deserialize_cdr(raw, IMAGE), width, height) for t, _, raw in messages if t == topic]


def metadata(bag):
    """``metadata.yaml``'s ``rosbag2_bagfile_information``, parsed by ruamel."""
    return YAML(typ="safe").load((Path(bag) / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


def mcap_files(bag):
    """The bag's .mcap files, in the order of their number."""
    return sorted(Path(bag).glob("*.mcap"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))


def mcap_count(path):
    """Messages in one file, by reading every one (not from its summary)."""
    with open(path, "rb") as f:
        return sum(1 for _ in make_reader(f).iter_messages())


def fingerprint(directory):
    """Names, sizes, times and contents of every file under ``directory``."""
    found = {}
    for p in sorted(Path(directory).rglob("*")):
        st = p.stat()
        content = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        found[str(p.relative_to(directory))] = (st.st_mode, st.st_size, st.st_mtime_ns, content)
    return found


def check_metadata_matches_files(bag, topics):
    """metadata.yaml lists exactly the bag's files, with each file's count as the
    file holds it and each topic's count as given (``{topic: count}``)."""
    meta = metadata(bag)
    names = [p.name for p in mcap_files(bag)]
    assert meta["relative_file_paths"] == names
    assert [f["path"] for f in meta["files"]] == names
    assert [f["message_count"] for f in meta["files"]] == [mcap_count(p) for p in mcap_files(bag)]
    assert {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]} == topics
    assert meta["message_count"] == sum(topics.values())
    return meta


@pytest.fixture(scope="module")
def small_bag(tmp_path_factory):
    """A bag `freight bag record` wrote: 8 images of 64x48, one file."""
    bag = tmp_path_factory.mktemp("small") / "small"
    topic = new_topic("small")
    with image_publisher(topic) as pub, start_recorder(bag, [topic]) as rec:
        stream(pub, 8, 50, 64, 48)
        time.sleep(0.3)
        assert stop_recorder(rec) == 0, rec.transcript()
    assert image_frames(read_rosbags(bag), topic, 64, 48) == list(range(8))
    return bag, topic


@pytest.fixture
def bag_copy(small_bag, tmp_path):
    """A copy of ``small_bag`` this test may damage."""
    bag, topic = small_bag
    copy = tmp_path / "copy"
    shutil.copytree(bag, copy)
    return copy, topic


# ---------------------------------------------------------------- recording


def test_a_recording_reads_back_byte_exact_in_rosbags_and_the_mcap_tools(tmp_path):
    cam, blob = new_topic("cam"), new_topic("blob")
    bag = tmp_path / "rec"
    frames, blobs, size = 20, 10, 1000
    with image_publisher(cam) as pub:
        # The second topic comes from `freight topic pub`, which waits for the
        # recorder's subscription before its first message.
        blob_pub = Child(
            [
                FREIGHT_BIN,
                "topic",
                "pub",
                blob,
                BLOB,
                "--size",
                size,
                "--count",
                blobs,
                "--rate",
                20,
                "--wait-for-subscribers",
                1,
                "--spin-time",
                0,
            ],
            name="freight topic pub",
        )
        with blob_pub, start_recorder(bag, [cam, blob]) as rec:
            stream(pub, frames, 10, 1280, 720)
            assert blob_pub.wait(timeout=EVENT) == 0, blob_pub.transcript()
            time.sleep(0.5)  # the last frames on their way to the recorder
            status = stop_recorder(rec)
            out = "\n".join(rec.stdout)
            assert status == 0, f"exit status {status}{rec.transcript()}"
            assert f"recorded {frames + blobs} messages on 2 topics into {bag} (1 file)" in out, rec.transcript()
            for t, n in ((cam, frames), (blob, blobs)):
                assert re.search(rf"^  {re.escape(t)}: {n} messages, \d+ bytes, 0 lost$", out, re.MULTILINE), (
                    rec.transcript()
                )
            # The frames (3.7 MB each) went to the disk from the recorder's memory,
            # each after a padding record, which the readers below must skip.
            passed = re.search(r"^  copies: (\d+) bytes went to the disk", out, re.MULTILINE)
            assert passed and int(passed.group(1)) >= frames * (1280 * 720 * 4 - 8192), rec.transcript()

    # rosbags: every message, decoded with Jazzy's definitions, byte exact.
    messages = read_rosbags(bag)
    assert {(t, ty) for t, ty, _ in messages} == {(cam, IMAGE), (blob, BLOB)}
    assert sorted(image_frames(messages, cam, 1280, 720)) == list(range(frames))
    got_blobs = []
    for t, _, raw in messages:
        if t == blob:
            m = JAZZY.deserialize_cdr(raw, BLOB)
            k = m.layout.data_offset
            assert m.data.size == size and first_mismatch(m.data, k) is None, f"blob {k} breaks the pattern"
            got_blobs.append(k)
    assert sorted(got_blobs) == list(range(blobs))

    # mcap + mcap-ros2-support: profile, schemas, channel metadata, and the same
    # bytes message by message.
    raw_by_topic = {t: [raw for tt, _, raw in messages if tt == t] for t in (cam, blob)}
    seen = {cam: [], blob: []}
    for path in mcap_files(bag):
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory()])
            assert reader.get_header().profile == "ros2"
            summary = reader.get_summary()
            for channel in summary.channels.values():
                schema = summary.schemas[channel.schema_id]
                expected_type = IMAGE if channel.topic == cam else BLOB
                assert (schema.name, schema.encoding, channel.message_encoding) == (expected_type, "ros2msg", "cdr")
                assert "offered_qos_profiles" in channel.metadata
                assert channel.metadata["topic_type_hash"] == JAZZY.hash_rihs01(expected_type)
            for _, channel, message, decoded in reader.iter_decoded_messages():
                seen[channel.topic].append(message.data)
                if channel.topic == cam:
                    check_image(decoded, 1280, 720)
    assert seen == raw_by_topic, "mcap and rosbags read different bytes"

    meta = check_metadata_matches_files(bag, {cam: frames, blob: blobs})
    hashes = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["type_description_hash"]
        for t in meta["topics_with_message_count"]
    }
    assert hashes == {cam: JAZZY.hash_rihs01(IMAGE), blob: JAZZY.hash_rihs01(BLOB)}

    status, out, err = freight("bag", "info", bag)
    assert status == 0, err
    assert f"Messages:          {frames + blobs}\n" in out, out
    assert f"Topic: {cam} | Type: {IMAGE} | Count: {frames} | Serialization Format: cdr" in out, out


def test_a_recorder_whose_topics_pause_for_seconds_keeps_recording_and_stops_on_ctrl_c(tmp_path):
    # A pause longer than the writer's flush period once deadlocked the writer
    # thread (it took the bag's lock twice) and, with it, the status line and
    # Ctrl-C.
    cam = new_topic("pause")
    bag = tmp_path / "paused"
    with image_publisher(cam) as pub, start_recorder(bag, [cam]) as rec:
        stream(pub, 3, 20, 64, 48)
        time.sleep(2.5)
        stream(pub, 3, 20, 64, 48, first=3)
        time.sleep(0.5)
        status = stop_recorder(rec)
        assert status == 0, f"exit status {status}{rec.transcript()}"
    assert sorted(image_frames(read_rosbags(bag), cam, 64, 48)) == list(range(6))


@pytest.mark.parametrize("distro", ["jazzy", "kilted"])
def test_a_stock_publisher_is_recorded_over_the_network_plane_byte_exact(tmp_path, distro):
    """A stock node's camera and its /rosout, whose type (rcl_interfaces/msg/Log)
    freight has no Rust type for: that one is taken from DDS as CDR, its
    definition from the stock install's .msg files, found through
    AMENT_PREFIX_PATH (Jazzy) or --msg-path (Kilted)."""
    stock_python = stock_interpreter(distro)
    prefix = Path(stock_python).parent.parent
    cam = new_topic("stock")
    bag = tmp_path / "from_stock"
    frames, width, height, logs = 12, 640, 480, 5
    definitions = ([], {"AMENT_PREFIX_PATH": str(prefix)}) if distro == "jazzy" else (["--msg-path", prefix / "share"], {})
    started = time.time()
    children = []
    try:
        with netns.host() as ns:
            # Nothing configured on either side: no DDS XML, no ROS_*.
            pub = Child(
                netns.argv(ns, [stock_python, Path(__file__).parent / "peers" / "ros2_peer.py", "stock", "pub", "image", cam]),
                clean_env=True,
                name="stock-pub",
            )
            children.append(pub)
            pub.expect("READY", timeout=START)
            rec = Child(
                netns.argv(ns, [FREIGHT_BIN, "bag", "record", "-o", bag, cam, "/rosout", *definitions[0]]),
                env=definitions[1],
                clean_env=True,
                sigint_default=True,
                name="freight bag record",
            )
            children.append(rec)
            pub.send(f"LOG {logs}")
            pub.expect("LOGGED", timeout=EVENT)
            wait_stderr(rec, f"recording {cam} [", timeout=START)
            wait_stderr(rec, "recording /rosout [rcl_interfaces/msg/Log] (from DDS, as CDR)", timeout=START)
            stream(pub, frames, 10, width, height)
            time.sleep(1.0)  # the last frames on their way through DDS
            status = stop_recorder(rec)
            assert status == 0, f"exit status {status}{rec.transcript()}"
            out = "\n".join(rec.stdout)
            assert f"messages on 2 topics into {bag} (1 file)" in out, rec.transcript()
    finally:
        for child in children:
            child.close()
        remove_dead_fastdds_segments(started)
    # What rosbags decodes with Jazzy's definitions is every frame, byte exact,
    # and the QoS recorded is what the stock publisher offered (rclpy's
    # default: reliable, volatile).
    messages = read_rosbags(bag)
    assert sorted(image_frames(messages, cam, width, height)) == list(range(frames))
    counts = {t["topic_metadata"]["name"]: t for t in metadata(bag)["topics_with_message_count"]}
    assert counts[cam]["message_count"] == frames
    qos = counts[cam]["topic_metadata"]["offered_qos_profiles"]
    assert "reliability: 1" in qos and "durability: 2" in qos, qos
    # The log lines, logged before the recorder subscribed, came from the
    # stock node's transient-local /rosout (reliable, transient local).
    lines = [JAZZY.deserialize_cdr(raw, LOG).msg for t, _, raw in messages if t == "/rosout"]
    assert [line for line in lines if line.startswith("log")] == [f"log{k}" for k in range(logs)], lines
    assert counts["/rosout"]["message_count"] == len(lines)
    assert counts["/rosout"]["topic_metadata"]["type"] == LOG
    assert "durability: 1" in counts["/rosout"]["topic_metadata"]["offered_qos_profiles"]
    # The schema is the stock install's Log.msg with its dependency, and the
    # channel's type hash that of the install's type description.
    with open(mcap_files(bag)[0], "rb") as f:
        summary = make_reader(f).get_summary()
    schema = next(s for s in summary.schemas.values() if s.name == LOG)
    stock_msg = (prefix / "share/rcl_interfaces/msg/Log.msg").read_text()
    assert schema.encoding == "ros2msg" and schema.data.decode().startswith(stock_msg)
    assert "\nMSG: builtin_interfaces/Time\n" in schema.data.decode()
    channel = next(c for c in summary.channels.values() if c.topic == "/rosout")
    stock_hash = json.loads((prefix / "share/rcl_interfaces/msg/Log.json").read_text())["type_hashes"][0]["hash_string"]
    assert channel.metadata["topic_type_hash"] == stock_hash


def test_a_stock_publisher_of_another_version_of_the_type_is_not_recorded_with_the_wrong_definition(tmp_path):
    """The .msg files --msg-path names define rcl_interfaces/msg/Log with one
    field more than the stock node's: the hash its USER_DATA gives differs
    from the definition's, so its lines would decode wrongly. The recorder
    says so and takes none of them."""
    stock_python = stock_interpreter("jazzy")
    stock_share = Path(stock_python).parent.parent / "share"
    share = tmp_path / "share"
    for package in ("builtin_interfaces", "rcl_interfaces"):
        shutil.copytree(stock_share / package / "msg", share / package / "msg")
    log_msg = share / "rcl_interfaces" / "msg" / "Log.msg"
    log_msg.write_text(log_msg.read_text() + "uint32 extra\n")
    bag = tmp_path / "other_version"
    started = time.time()
    children = []
    try:
        with netns.host() as ns:
            argv = [stock_python, Path(__file__).parent / "peers" / "ros2_peer.py", "stock", "pub", "image", new_topic("v")]
            pub = Child(netns.argv(ns, argv), clean_env=True, name="stock-pub")
            children.append(pub)
            pub.expect("READY", timeout=START)
            rec = Child(
                netns.argv(ns, [FREIGHT_BIN, "bag", "record", "-o", bag, "/rosout", "--msg-path", share]),
                clean_env=True,
                sigint_default=True,
                name="freight bag record",
            )
            children.append(rec)
            wait_stderr(rec, "recording /rosout [rcl_interfaces/msg/Log] (from DDS, as CDR)", timeout=START)
            pub.send("LOG 3")
            pub.expect("LOGGED", timeout=EVENT)
            wait_stderr(rec, "warning: /rosout: a publisher's type hash is RIHS01_", timeout=EVENT)
            time.sleep(0.5)
            assert stop_recorder(rec) == 0, rec.transcript()
    finally:
        for child in children:
            child.close()
        remove_dead_fastdds_segments(started)
    assert [t for t, _, _ in read_rosbags(bag)] == []


def test_five_splits_lose_no_message_and_metadata_lists_every_file(tmp_path):
    topic = new_topic("split")
    bag = tmp_path / "split"
    count = 24
    # 76,800-byte frames, a new file from 200,000 bytes on: three frames a file.
    with image_publisher(topic) as pub, start_recorder(bag, [topic], "-b", "200000") as rec:
        stream(pub, count, 40, 160, 120)
        time.sleep(0.3)
        status = stop_recorder(rec)
        assert status == 0, rec.transcript()
        files = len(mcap_files(bag))
        assert files >= 5, f"only {files} files"
        assert f"recorded {count} messages on 1 topics into {bag} ({files} files)" in rec.stdout, rec.transcript()
    frames = image_frames(read_rosbags(bag), topic, 160, 120)
    assert sorted(frames) == list(range(count)), "a frame is missing or recorded twice"
    check_metadata_matches_files(bag, {topic: count})
    assert all(mcap_count(p) > 0 for p in mcap_files(bag)), "a split left an empty file"


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_compressed_recordings_read_back_byte_exact_in_rosbags_and_mcap(tmp_path, compression):
    topic = new_topic(compression)
    bag = tmp_path / compression
    count = 8
    with image_publisher(topic) as pub, start_recorder(bag, [topic], "--compression", compression) as rec:
        stream(pub, count, 50, 320, 240)
        time.sleep(0.3)
        assert stop_recorder(rec) == 0, rec.transcript()
    messages = read_rosbags(bag)
    assert sorted(image_frames(messages, topic, 320, 240)) == list(range(count))
    (path,) = mcap_files(bag)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert {c.compression for c in reader.get_summary().chunk_indexes} == {compression}
        assert [m.data for _, _, m in reader.iter_messages()] == [raw for _, _, raw in messages]
    assert path.stat().st_size < count * 320 * 240 * 4 // 4, "the chunks are not compressed"
    check_metadata_matches_files(bag, {topic: count})


def test_a_recorder_killed_mid_stream_leaves_a_bag_that_reindex_makes_whole(tmp_path):
    topic = new_topic("kill")
    bag = tmp_path / "killed"
    with image_publisher(topic) as pub, start_recorder(bag, [topic], "-b", "300000") as rec:
        pub.send("WAIT 1")
        assert int(pub.expect("MATCHED", timeout=START)[1]) >= 1
        # 10 s of frames; the recorder dies once it has finished a few files.
        pub.send("STREAM 0 400 40 160 120")
        deadline = time.monotonic() + EVENT
        while len(mcap_files(bag)) < 5:
            assert time.monotonic() < deadline, f"no five files within {EVENT} s{rec.transcript()}"
            time.sleep(0.05)
        rec.proc.send_signal(signal.SIGKILL)
        assert rec.wait() == -signal.SIGKILL
        # The publisher was still sending: it prints more after the kill.
        printed = len(pub.stdout)
        deadline = time.monotonic() + EVENT
        while len(pub.stdout) == printed:
            assert time.monotonic() < deadline, f"the stream had ended before the kill{pub.transcript()}"
            time.sleep(0.02)
        assert pub.stdout[printed].startswith("SENT"), pub.transcript()
    durable = metadata(bag)["message_count"]  # what the last split wrote (files finished and synced)

    # Killed mid-file, info fails on the cut file; killed inside a split (the
    # next file opened, metadata.yaml not yet rewritten), the files it lists are
    # whole and it warns that metadata.yaml is behind them. Either way it says
    # what to do.
    status, _, err = freight("bag", "info", bag)
    assert "freight bag reindex" in err, f"info on a killed bag: {status} {err}"
    status, out, err = freight("bag", "reindex", bag)
    assert status == 0, err
    assert f"{bag}: metadata.yaml rewritten from the files" in out, out

    frames = image_frames(read_rosbags(bag), topic, 160, 120)
    assert frames, "reindex kept nothing"
    # Only the tail the recorder had not written yet may be missing.
    assert frames == list(range(len(frames))), "a frame in the middle is missing, doubled or out of order"
    assert len(frames) >= durable, f"reindex kept {len(frames)} messages, metadata.yaml had {durable} in finished files"
    check_metadata_matches_files(bag, {topic: len(frames)})
    status, out, err = freight("bag", "info", bag)
    assert status == 0 and f"Messages:          {len(frames)}\n" in out, f"{out}{err}"


# ---------------------------------------------------------------- playing


def rosbags_image_bag(path, topic, count, width, height, version):
    """A bag written by rosbags' own rosbag2 writer (MCAP storage): ``count``
    pattern images 100 ms apart on ``topic`` and as many log lines on
    ``topic + "_log"``, offered reliable and volatile. Returns the first
    image's receive time (ns)."""
    qos = Qos(
        history=QosHistory.KEEP_LAST,
        depth=10,
        reliability=QosReliability.RELIABLE,
        durability=QosDurability.VOLATILE,
        deadline=QosTime(sec=0, nsec=0),
        lifespan=QosTime(sec=0, nsec=0),
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=QosTime(sec=0, nsec=0),
        avoid_ros_namespace_conventions=False,
    )
    writer = Rosbag2Writer(path, version=version, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    try:
        conn = writer.add_connection(topic, IMAGE, typestore=JAZZY, offered_qos_profiles=[qos])
        # rcl_interfaces/msg/Log, a type freight has no Rust type for: its
        # lines "line0", "line1", ... between the images.
        log = writer.add_connection(topic + "_log", LOG, typestore=JAZZY, offered_qos_profiles=[qos])
        start = time.time_ns()
        for k in range(count):
            writer.write(conn, start + k * 100_000_000, JAZZY.serialize_cdr(pattern_image(k, width, height), IMAGE))
            line = JAZZY.types[LOG](
                stamp=JAZZY.types["builtin_interfaces/msg/Time"](sec=k, nanosec=0),
                level=20,
                name="bag",
                msg=f"line{k}",
                file="",
                function="",
                line=0,
            )
            writer.write(log, start + k * 100_000_000 + 50_000_000, JAZZY.serialize_cdr(line, LOG))
    finally:
        writer.close()
    return start


def received(sub, count):
    """``{k: (width, height, nbytes)}`` of the next ``count`` messages; fails on a
    wrong byte, a message received twice, or one that does not come."""
    got = {}
    while len(got) < count:
        try:
            words = sub.expect("GOT", timeout=EVENT)
        except AssertionError as e:
            raise AssertionError(f"{len(got)} of {count} messages ({sorted(got)}): {e}") from None
        k = int(words[1])
        assert words[5] == "OK", f"message {k} has a wrong byte at {words[6:]}{sub.transcript()}"
        assert k not in got, f"message {k} arrived twice{sub.transcript()}"
        got[k] = tuple(int(w) for w in words[2:5])
    return got


@pytest.mark.parametrize(("distro", "version"), [("jazzy", 8), ("kilted", 9)])
def test_a_bag_written_by_rosbags_plays_to_a_freight_and_a_stock_subscriber(tmp_path, distro, version):
    stock_python = stock_interpreter(distro)
    topic = new_topic("play")
    bag = tmp_path / "from_rosbags"
    count, width, height = 10, 320, 240
    rosbags_image_bag(bag, topic, count, width, height, version)
    started = time.time()
    children = []
    try:
        with netns.host() as ns:
            # Nothing configured, as in test_stock_ros2.py: no DDS XML, no ROS_*.
            # The log lines go to a stock subscriber only: freight has no
            # Rust type for them, and plays their CDR to DDS as it is.
            subscribers = (("freight", sys.executable, "image", topic), ("stock", stock_python, "image", topic))
            for stack, python, kind, name in (*subscribers, ("stock", stock_python, "log", topic + "_log")):
                argv = netns.argv(ns, [python, Path(__file__).parent / "peers" / "ros2_peer.py", stack, "sub", kind, name])
                children.append(Child(argv, clean_env=True, name=f"{stack}-{kind}-sub"))
                children[-1].expect("READY", timeout=START)
            play = Child(
                netns.argv(ns, [FREIGHT_BIN, "bag", "play", bag, "--delay", 2]), clean_env=True, name="freight bag play"
            )
            children.append(play)
            assert play.wait(timeout=EVENT) == 0, play.transcript()
            assert any(line.startswith(f"played {2 * count} messages on 2 topics") for line in play.stdout), (
                play.transcript()
            )
            assert f"playing {topic}_log [rcl_interfaces/msg/Log] (to DDS, as CDR)" in play.stderr, play.transcript()
            for sub in children[:2]:
                assert received(sub, count) == {k: (width, height, width * height * 4) for k in range(count)}, sub.name
            assert received(children[2], count) == {k: (0, 0, len(f"line{k}")) for k in range(count)}
    finally:
        for child in children:
            child.close()
        remove_dead_fastdds_segments(started)


def test_a_type_freight_has_no_rust_type_for_plays_and_records_byte_exact(tmp_path):
    """rcl_interfaces/msg/Log lines of a rosbags-written bag, played to DDS as CDR
    and recorded from DDS as CDR, the definition from the stock Jazzy install
    (--msg-path): the new bag holds the same bytes, under the install's schema.
    The recorder records that topic alone, with no typed subscription at all."""
    share = REPO / ".venv-ros-jazzy" / "share"
    if not (share / "rcl_interfaces" / "msg" / "Log.msg").is_file():
        pytest.fail(f"no stock ROS 2 Jazzy install at {share}: run scripts/install-deps.sh")
    topic = new_topic("raw")
    played, recorded = tmp_path / "played", tmp_path / "recorded"
    rosbags_image_bag(played, topic, 10, 32, 24, 8)
    log = topic + "_log"
    play = Child([FREIGHT_BIN, "bag", "play", played, "--topics", log, "--delay", 3], name="freight bag play")
    try:
        rec = start_recorder(recorded, [log], "--msg-path", share)
        try:
            assert play.wait(timeout=EVENT) == 0, play.transcript()
            time.sleep(0.5)  # the last line on its way through DDS
            assert stop_recorder(rec) == 0, rec.transcript()
        finally:
            rec.close()
    finally:
        play.close()
    original = [raw for t, _, raw in read_rosbags(played) if t == log]
    assert [raw for t, _, raw in read_rosbags(recorded) if t == log] == original
    assert [JAZZY.deserialize_cdr(raw, LOG).msg for raw in original] == [f"line{k}" for k in range(10)]
    (topic_info,) = metadata(recorded)["topics_with_message_count"]
    assert topic_info["message_count"] == 10 and topic_info["topic_metadata"]["type"] == LOG


def clock_times(child, until_ns):
    """The times a clock peer printed until one reached ``until_ns`` (or it
    stopped printing)."""
    times = []
    while not times or times[-1] < until_ns:
        try:
            times.append(int(child.expect("TIME", timeout=EVENT)[1]))
        except AssertionError:
            break
    return times


def test_play_clock_drives_a_stock_node_on_sim_time_and_a_freight_subscriber(tmp_path):
    stock_python = stock_interpreter("jazzy")
    bag = tmp_path / "clocked"
    # Ten images and ten log lines over 0.95 s of recorded time; played at
    # half speed: 1.9 s.
    start = rosbags_image_bag(bag, new_topic("clock"), 10, 32, 24, 8)
    end = start + 950_000_000
    started = time.time()
    children = []
    try:
        with netns.host() as ns:
            for stack, python in (("freight", sys.executable), ("stock", stock_python)):
                argv = netns.argv(ns, [python, Path(__file__).parent / "peers" / "clock_peer.py", stack])
                children.append(Child(argv, clean_env=True, name=f"{stack}-clock"))
                children[-1].expect("READY", timeout=START)
            play = Child(
                netns.argv(ns, [FREIGHT_BIN, "bag", "play", bag, "--delay", 2, "--rate", 0.5, "--clock", 50]),
                clean_env=True,
                name="freight bag play",
            )
            children.append(play)
            assert play.wait(timeout=EVENT) == 0, play.transcript()
            for child in children[:2]:
                # rclpy's clock reads 0 until the first /clock message.
                times = [t for t in clock_times(child, end - 50_000_000) if t != 0]
                where = f"{child.name}: {times}{child.transcript()}"
                assert all(start <= t <= end for t in times), where
                assert times == sorted(times), where
                # 50 Hz over 1.9 s of playing, each tick 10 ms of bag time:
                # most of them reach even a best-effort subscriber.
                assert len(times) >= 40 and times[-1] >= end - 50_000_000, where
    finally:
        for child in children:
            child.close()
        remove_dead_fastdds_segments(started)


def test_one_mcap_file_written_by_mcap_ros2_plays_to_a_freight_subscriber(tmp_path):
    topic = new_topic("mcap")
    path = tmp_path / "from_mcap_ros2.mcap"
    count, width, height = 6, 128, 96
    msgdef, _ = JAZZY.generate_msgdef(IMAGE, ros_version=2)
    with open(path, "wb") as f:
        writer = McapRos2Writer(f)  # zstd chunks, with CRCs: its defaults
        schema = writer.register_msgdef(IMAGE, msgdef)
        start = time.time_ns()
        for k in range(count):
            m = pattern_image(k, width, height)
            message = {
                "header": {"stamp": {"sec": k, "nanosec": 0}, "frame_id": f"frame{k}"},
                "height": height,
                "width": width,
                "encoding": "bgra8",
                "is_bigendian": 0,
                "step": width * 4,
                "data": m.data.tobytes(),
            }
            writer.write_message(topic, schema, message, log_time=start + k * 50_000_000)
        writer.finish()
    with peer("ros2_peer.py", "freight", "sub", "image", topic) as sub:
        sub.expect("READY", timeout=START)
        status, out, err = freight("bag", "play", path, "--delay", 0.5)
        assert status == 0, err
        assert out.startswith(f"played {count} messages on 1 topics"), out
        assert received(sub, count) == {k: (width, height, width * height * 4) for k in range(count)}


# ---------------------------------------------------------------- bad input


def test_record_refuses_an_existing_output_directory_and_leaves_it_as_it_was(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("not a bag\n")
    (out / "taken_0.mcap").write_bytes(b"someone else's file")
    before = fingerprint(out)
    status, stdout, err = freight("bag", "record", "-o", out, new_topic("taken"), "--duration", 1)
    assert status != 0, stdout
    assert str(out) in err and "already exists" in err, err
    assert fingerprint(out) == before


def test_a_truncated_file_is_refused_by_info_and_play_naming_it_and_the_remedy(bag_copy):
    bag, _ = bag_copy
    (path,) = mcap_files(bag)
    os.truncate(path, path.stat().st_size * 6 // 10)
    before = fingerprint(bag)
    for args in (["info", bag], ["info", path], ["play", bag], ["play", path]):
        status, out, err = freight("bag", *args)
        assert status != 0, f"bag {args[0]} {args[1]}: {out}"
        assert str(path) in err and "freight bag reindex" in err, f"bag {args[0]} {args[1]}: {err}"
        assert "played" not in out
    assert fingerprint(bag) == before


def test_a_corrupted_chunk_is_refused_by_play_naming_the_file(bag_copy):
    bag, _ = bag_copy
    (path,) = mcap_files(bag)
    with open(path, "rb") as f:
        chunk = make_reader(f).get_summary().chunk_indexes[0]
    data = bytearray(path.read_bytes())
    # The middle of the chunk is message bytes: flipping one keeps every
    # record's framing; only the chunk's CRC can tell.
    data[chunk.chunk_start_offset + chunk.chunk_length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    before = fingerprint(bag)
    status, out, err = freight("bag", "play", bag)
    assert status != 0, out
    assert str(path) in err and "CRC" in err, err
    assert fingerprint(bag) == before


def test_play_refuses_a_topic_whose_type_hash_in_metadata_yaml_is_not_freights(bag_copy):
    bag, topic = bag_copy
    meta = bag / "metadata.yaml"
    right = JAZZY.hash_rihs01(IMAGE)
    wrong = "RIHS01_" + "0" * 64
    text = meta.read_text()
    assert text.count(right) == 1, text
    meta.write_text(text.replace(right, wrong))
    before = fingerprint(bag)
    status, out, err = freight("bag", "play", bag)
    assert status != 0, f"played a topic whose metadata.yaml says type hash {wrong}: {out}"
    assert topic in err and wrong in err, err
    assert fingerprint(bag) == before


def test_play_refuses_a_topic_whose_mcap_channel_type_hash_is_not_freights(tmp_path):
    topic = new_topic("hash")
    path = tmp_path / "wrong_hash.mcap"
    wrong = "RIHS01_" + "1" * 64
    msgdef, _ = JAZZY.generate_msgdef(IMAGE, ros_version=2)
    with open(path, "wb") as f:
        w = McapWriter(f)
        w.start(profile="ros2", library="test_bag.py")
        schema = w.register_schema(name=IMAGE, encoding="ros2msg", data=msgdef.encode())
        channel = w.register_channel(
            topic=topic, message_encoding="cdr", schema_id=schema, metadata={"topic_type_hash": wrong}
        )
        w.add_message(channel, log_time=1, publish_time=1, data=JAZZY.serialize_cdr(pattern_image(0, 8, 8), IMAGE))
        w.finish()
    before = fingerprint(tmp_path)
    status, out, err = freight("bag", "play", path)
    assert status != 0, out
    assert topic in err and wrong in err, err
    assert fingerprint(tmp_path) == before


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    """A recording onto a 4 MiB tmpfs that fills up: (exit status, stderr, the
    bag as it was left, copied out, and its topic). The tmpfs is mounted in a
    mount namespace of the recorder's own, which (with the tmpfs) ends with the
    shell, after it copied the bag out."""
    root = tmp_path_factory.mktemp("full")
    topic = new_topic("full")
    disk, kept = root / "disk", root / "kept"
    disk.mkdir()
    kept.mkdir()
    bag = disk / "bag"
    script = (
        'mount -t tmpfs -o size=4m none "$1" || { echo "cannot mount a tmpfs on $1" >&2; exit 97; }\n'
        'shift; "$@"; status=$?\n'
        f"cp -a {bag} {kept}/ || exit 98\n"
        "exit $status\n"
    )
    # 76,800-byte frames, about seven a file.
    record = [FREIGHT_BIN, "bag", "record", "-o", bag, "-b", "500000", "--duration", "20", topic]
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", disk, *record]
    with image_publisher(topic) as pub, Child(argv, name="freight bag record (4 MiB disk)") as rec:
        wait_stderr(rec, f"recording {topic} [")
        pub.send("WAIT 1")
        assert int(pub.expect("MATCHED", timeout=START)[1]) >= 1
        # 7.7 MB of frames: the disk is full after about half of them.
        pub.send("STREAM 0 100 50 160 120")
        status = rec.wait(timeout=EVENT + 5)
    err = "\n".join(rec.stderr)
    if status in (97, 98):
        pytest.fail(f"the test could not mount a tmpfs or copy the bag out of it (CI runs as root): {err}")
    return status, err, kept / "bag", topic


def test_a_full_disk_ends_the_recording_with_an_error_and_reindex_recovers_what_was_written(full_disk):
    status, err, bag, topic = full_disk
    assert status not in (0, 2), f"a full disk ended the recording with status {status}: {err}"
    # An error that names a file of the bag and the reason.
    assert re.search(r"^error: \S*/disk/bag/\S+: .*No space left", err, re.MULTILINE), err
    status, out, err = freight("bag", "reindex", bag)
    assert status == 0, err
    frames = image_frames(read_rosbags(bag), topic, 160, 120)
    assert frames, f"nothing written before the disk filled is readable: {out}"
    assert frames == list(range(len(frames))), "a frame before the disk filled is missing, doubled or out of order"
    check_metadata_matches_files(bag, {topic: len(frames)})


def test_the_full_disk_error_names_the_bag_file_that_could_not_be_written(full_disk):
    # The first write that fails is a .mcap file's; that is the error a user
    # must see (not only a later one, about metadata.yaml, on the same full disk).
    _, err, _, _ = full_disk
    assert re.search(r"bag_\d+\.mcap: [^\n]*No space left", err), err
