"""Bags: read and write what ``ros2 bag record -s mcap`` writes (a directory with
``metadata.yaml`` and MCAP files), as ``freight bag`` does. See docs/bag.md.

Reading yields ``(topic, message, time_ns)``, the message as a freight class of a
built-in type (``freight.msgs``), decoded from the bag's CDR; ``raw=True`` yields
the CDR bytes and the type name instead, for any type::

    import freight.bag

    for topic, msg, t in freight.bag.Reader("run1"):
        print(t, topic, msg.width, msg.height, msg.data[:4])

    with freight.bag.Writer("run2", compression="zstd") as bag:
        bag.add_topic("/camera/image", "sensor_msgs/msg/Image")
        bag.write("/camera/image", image, time.time_ns())

Bags written here open in ``ros2 bag``, ``rosbags``, the ``mcap`` tools and
Foxglove, and play with ``freight bag play``. Errors are :class:`freight.errors.BagError`
and name the file.
"""

import importlib

from freight._native import BagReader as _BagReader
from freight._native import BagWriter as _BagWriter

__all__ = ["Reader", "Writer", "message_class"]


def message_class(type_name):
    """The freight class of a built-in type, by its ROS 2 name (``sensor_msgs/msg/Image``)."""
    parts = type_name.split("/")
    if len(parts) != 3 or parts[1] != "msg":
        raise TypeError(f"{type_name!r} is not a message type name (pkg/msg/Type)")
    try:
        module = importlib.import_module(f"freight.msgs.{parts[0]}")
        return getattr(module, parts[2])
    except (ImportError, AttributeError):
        raise TypeError(f"{type_name} is not one of freight's built-in types") from None


class Reader:
    """A bag directory (or one ``.mcap`` file), read in recorded order.

    Iterating yields ``(topic, message, log_time_ns)``; :meth:`messages` with
    ``raw=True`` yields ``(topic, type_name, cdr_bytes, log_time_ns)``.
    """

    def __init__(self, path):
        self._bag = _BagReader(str(path))

    @property
    def files(self):
        """The bag's files, in order."""
        return self._bag.files()

    def topics(self):
        """``{name: (type_name, message_count)}``, from the files."""
        return {name: (ty, count) for name, ty, count, _qos, _hash in self._bag.topics()}

    def messages(self, topics=None, raw=False):
        """The messages of ``topics`` (all if None).

        Where a chunk is stored uncompressed, a message's arrays (an image's
        ``data``, a cloud's points) are read-only numpy views over the file's
        memory: nothing is copied until the program reads the pixels, and then
        only by the page cache. Arrays of wider elements (``float32``) that the
        file does not place aligned, and every array of a compressed chunk, are
        copies. ``raw=True`` yields the CDR bytes (a copy) instead.
        """
        wanted = None if topics is None else set(topics)
        classes = {}
        for topic, type_name, message, log_time, _publish_time in self._bag.messages():
            if wanted is not None and topic not in wanted:
                continue
            if raw:
                yield topic, type_name, message.cdr(), log_time
                continue
            cls = classes.get(type_name)
            if cls is None:
                cls = classes[type_name] = message_class(type_name)
            yield topic, message.decode(cls), log_time

    def __iter__(self):
        return self.messages()


class Writer:
    """A new bag directory (it must not exist). Use as a context manager, or call
    :meth:`close`, which writes the final ``metadata.yaml``."""

    def __init__(self, path, compression="none", max_file_size=None, max_file_duration=None):
        self._bag = _BagWriter(str(path), compression, max_file_size, max_file_duration)
        self._types = {}

    def add_topic(self, name, type_name, reliable=True, transient_local=False):
        """Adds a topic of a built-in type, with the QoS its publisher offers."""
        self._bag.add_topic(name, type_name, reliable, transient_local)
        self._types[name] = type_name

    def write(self, topic, message, log_time_ns, publish_time_ns=None):
        """Writes a message (a freight message object, or its CDR bytes) on ``topic``."""
        if isinstance(message, (bytearray, memoryview)):
            message = bytes(message)
        data = message if isinstance(message, bytes) else message.serialize()
        self._bag.write(topic, data, log_time_ns, publish_time_ns)

    def close(self):
        """Finishes the files; returns how many messages the bag holds."""
        return self._bag.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
