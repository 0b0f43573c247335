"""``freight.bag``: the Python reader and writer, checked against ``rosbags``.

A bag written by ``freight.bag.Writer`` (plain, zstd, lz4, split) is read back
by rosbags with ROS 2 Jazzy's own type definitions; a bag rosbags wrote is read
by ``freight.bag.Reader`` into freight's message classes, every field equal.
Bad input raises :class:`freight.errors.BagError` naming the file.
"""

from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore

import freight.bag
from freight.errors import BagError
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import String

JAZZY = get_typestore(Stores.ROS2_JAZZY)


def image(k, width=8, height=4):
    data = (np.arange(width * height * 4, dtype=np.uint32) + k) % 251
    return Image(width=width, height=height, encoding="bgra8", step=width * 4, data=data.astype(np.uint8))


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
def test_what_freight_writes_rosbags_reads_field_for_field(tmp_path, compression):
    bag = tmp_path / "out"
    with freight.bag.Writer(bag, compression=compression, max_file_size=2000) as w:
        w.add_topic("/cam", "sensor_msgs/msg/Image")
        w.add_topic("/chatter", "std_msgs/msg/String", reliable=False)
        for k in range(20):
            w.write("/cam", image(k), 1_000 + 2 * k)
            w.write("/chatter", String(data=f"hello {k}"), 1_001 + 2 * k)
    assert len(list(bag.glob("*.mcap"))) > 1, "max_file_size split nothing"
    with AnyReader([bag], default_typestore=JAZZY) as r:
        got = [(c.topic, t, r.deserialize(raw, c.msgtype)) for c, t, raw in r.messages()]
    assert [t for _, t, _ in got] == list(range(1_000, 1_040))
    for k in range(20):
        topic, _, m = got[2 * k]
        assert topic == "/cam" and (m.width, m.height, m.encoding) == (8, 4, "bgra8")
        assert np.array_equal(m.data, image(k).data)
        assert got[2 * k + 1][2].data == f"hello {k}"
    # freight reads its own bag back into its classes, in order.
    back = list(freight.bag.Reader(bag))
    assert [type(m) for _, m, _ in back[:2]] == [Image, String]
    assert back[4][1] == image(2)
    assert freight.bag.Reader(bag).topics() == {
        "/cam": ("sensor_msgs/msg/Image", 20),
        "/chatter": ("std_msgs/msg/String", 20),
    }


def test_what_rosbags_writes_freight_reads_into_its_classes(tmp_path):
    bag = tmp_path / "theirs"
    Img = JAZZY.types["sensor_msgs/msg/Image"]
    Hdr = JAZZY.types["std_msgs/msg/Header"]
    Stamp = JAZZY.types["builtin_interfaces/msg/Time"]
    with Rosbag2Writer(bag, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/cam", "sensor_msgs/msg/Image", typestore=JAZZY)
        for k in range(5):
            ours = image(k)
            theirs = Img(
                header=Hdr(stamp=Stamp(sec=k, nanosec=7), frame_id=f"f{k}"),
                height=ours.height,
                width=ours.width,
                encoding="bgra8",
                is_bigendian=0,
                step=ours.step,
                data=np.asarray(ours.data),
            )
            w.write(conn, 500 + k, JAZZY.serialize_cdr(theirs, "sensor_msgs/msg/Image"))
    got = list(freight.bag.Reader(bag).messages(topics=["/cam"]))
    assert [t for _, _, t in got] == [500, 501, 502, 503, 504]
    for k, (_, m, _) in enumerate(got):
        assert (m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id) == (k, 7, f"f{k}")
        assert np.array_equal(m.data, image(k).data)
    assert list(freight.bag.Reader(bag).messages(topics=["/other"])) == []


def test_bad_input_raises_bag_error_naming_the_file(tmp_path):
    bag = tmp_path / "b"
    with freight.bag.Writer(bag) as w:
        w.add_topic("/cam", "sensor_msgs/msg/Image")
        for k in range(3):
            w.write("/cam", image(k, 64, 64), 10 + k)
    with pytest.raises(BagError, match="already exists"):
        freight.bag.Writer(bag)
    with pytest.raises(BagError, match="no message definition"):
        freight.bag.Writer(tmp_path / "c").add_topic("/x", "nobody/msg/Nothing")
    w = freight.bag.Writer(tmp_path / "d")
    with pytest.raises(BagError, match="not added"):
        w.write("/nowhere", b"\x00\x01\x00\x00", 1)
    w.close()
    with pytest.raises(BagError, match="closed"):
        w.close()
    # A file cut in half: the reader names it and the remedy.
    path = next(Path(bag).glob("*.mcap"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(BagError, match=rf"{path.name}.*reindex"):
        list(freight.bag.Reader(bag))
    with pytest.raises(OSError):
        freight.bag.Reader(tmp_path / "missing")
    with pytest.raises(TypeError, match="not one of freight's built-in types"):
        freight.bag.message_class("nobody/msg/Nothing")


def _address(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_arrays_of_an_uncompressed_bag_are_read_only_views_of_the_file(tmp_path, compression):
    bag = tmp_path / "views"
    sent = [image(k, width=640, height=480) for k in range(3)]
    with freight.bag.Writer(bag, compression=compression) as w:
        w.add_topic("/cam", "sensor_msgs/msg/Image")
        for k, m in enumerate(sent):
            w.write("/cam", m, 1_000 + k)
    r = freight.bag.Reader(bag)
    one = [m for _, m, _ in r]
    two = [m for _, m, _ in r]
    for a, s in zip(one, sent, strict=True):
        assert np.array_equal(a.data, s.data) and a.width == 640
        assert not a.data.flags.writeable
        with pytest.raises(ValueError):
            a.data[0] = 1
    # Two passes over one reader view the same mapping: the same addresses,
    # where copies (both alive) could not share one.
    same = [_address(x.data) == _address(y.data) for x, y in zip(one, two, strict=True)]
    assert all(same) == (compression == "none"), same
    # The arrays outlive the reader that mapped the file.
    del r
    assert all(np.array_equal(x.data, s.data) for x, s in zip(one, sent, strict=True))
