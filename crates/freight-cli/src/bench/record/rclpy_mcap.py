"""The baseline of `freight bench record`: stock rclpy recording with the `mcap` writer,
nothing of freight.

    python rclpy_mcap.py pub TOPIC (image WIDTH HEIGHT | array BYTES) --rate HZ --count N
                         --keep-alive SECS
    python rclpy_mcap.py rec TOPIC (image | array) OUT.mcap SCHEMA_FILE
    python rclpy_mcap.py probe

What a Python user does today to record a large stream: a stock rclpy node (ROS 2 Jazzy
from PyPI, rmw_fastrtps_cpp, no DDS configuration) subscribes with rclpy's default
profile (`create_subscription(Type, topic, callback, 10, raw=True)`: reliable, volatile,
keep last 10) and writes every serialized message as it arrives with
`mcap.writer.Writer` (profile "ros2", a "ros2msg" schema holding the type's full
definition, "cdr" messages, log_time = receive time, the writer's default 1 MiB chunks).
Chunks are not compressed: `freight bag record`'s default, so that both write the same
bytes to the disk (the writer's own default, zstd, would measure the compressor).
`freight bench record` embeds this file in the binary, writes it to its work directory
and starts the two roles as two processes of the stock interpreter in a private network
namespace.

* `pub` builds one message (sensor_msgs/Image bgra8, or std_msgs/UInt8MultiArray; data
  byte i is i % 251, as `freight topic pub`'s first message), waits for the recorder to
  match (at most 60 s), then publishes --count messages at --rate Hz on rclpy's default
  profile (`create_publisher(Type, topic, 10)`, the QoS of `freight topic pub`'s rows).
  Only the sequence number k changes: header.stamp.sec for an image, the first 8 bytes of
  data (little-endian) for an array. It then waits (at most 60 s) until the recorder has
  acknowledged every message, and at least --keep-alive seconds after its last publish (as
  `freight topic pub --keep-alive` does: both recorders get their signal as long after the
  last message), and prints `SENT {"published": n, "seconds": s, "all_acked": bool}` (s:
  from the first publish to the last).
* `rec` records until SIGINT or SIGTERM, then takes what is still delivered (the publisher
  has had every message acknowledged by then: it is in the reader's queue) until 0.05 s
  pass without a message, finishes the file, flushes and fsyncs it, and prints
  `RECORDED {...}`: messages received, lost (gaps in the sequence numbers, those before
  the first included), payload bytes, seconds from the first message until the file is
  synced (as `freight bag record` counts them), CPU seconds (user + system, every thread)
  and peak resident memory (KiB), both from getrusage.

A failure prints `ERROR <what>` and exits with status 2.
"""

import json
import os
import resource
import signal
import struct
import sys
import time

# After the signal the recorder spins until one wait this long brings no message; the
# publisher, before it exits, waits for its subscriber's match and then for its acks.
DRAIN_QUIET_S = 0.05
MATCH_LIMIT_S = 60.0
# The publisher's wait, after its last message, until the recorder has acknowledged all.
ACK_LIMIT_S = 60.0


def fail(what):
    print(f"ERROR {what}", flush=True)
    sys.exit(2)


def take_option(argv, name, convert):
    if name not in argv:
        fail(f"{name} is missing")
    at = argv.index(name)
    try:
        value = convert(argv[at + 1])
    except (IndexError, ValueError):
        fail(f"{name} needs a value")
    del argv[at : at + 2]
    return value


def message_type(kind):
    if kind == "image":
        from sensor_msgs.msg import Image

        return Image
    if kind == "array":
        from std_msgs.msg import UInt8MultiArray

        return UInt8MultiArray
    fail(f"unknown kind `{kind}` (image or array)")


def sequence_of(raw):
    """The publisher's sequence number in a serialized message, or None when the bytes are
    not the shape `pub` sends. Offsets count the 4-byte encapsulation header: an image's
    header.stamp.sec is the first field; an array with no dimensions has its data after the
    dimension count, data_offset and data length."""
    if len(raw) < 8 or raw[0] != 0:
        return None
    endian = "<" if raw[1] & 1 else ">"
    if KIND == "image":
        return struct.unpack_from(endian + "i", raw, 4)[0]
    if len(raw) < 24 or struct.unpack_from(endian + "I", raw, 4)[0] != 0:
        return None
    return struct.unpack_from("<Q", raw, 16)[0]


def publish(topic, dims, rate, count, keep_alive):
    from array import array

    import rclpy
    from rclpy.duration import Duration

    Type = message_type(KIND)
    if KIND == "image":
        width, height = dims
        msg = Type(width=width, height=height, encoding="bgra8", step=4 * width)
        size = msg.step * height
    else:
        (size,) = dims
        msg = Type()
    pattern = bytes(range(251))
    msg.data = array("B", (pattern * (size // 251 + 1))[:size])
    rclpy.init()
    node = rclpy.create_node("freight_bench_record_stock_pub")
    publisher = node.create_publisher(Type, topic, 10)
    deadline = time.monotonic() + MATCH_LIMIT_S
    while publisher.get_subscription_count() < 1:
        if time.monotonic() > deadline:
            fail(f"no subscriber matched {topic} within {MATCH_LIMIT_S:.0f} s")
        time.sleep(0.01)
    start = time.monotonic()
    for k in range(count):
        wait = start + k / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if KIND == "image":
            msg.header.stamp.sec = k
        else:
            msg.data[0:8] = array("B", k.to_bytes(8, "little"))
        publisher.publish(msg)
    last = time.monotonic()
    seconds = last - start
    # A reliable writer drops what the reader has not acknowledged when its node goes: stay
    # until every message is acknowledged, as `freight topic pub` lets its queue drain.
    acked = publisher.wait_for_all_acked(Duration(seconds=ACK_LIMIT_S))
    time.sleep(max(0.0, last + keep_alive - time.monotonic()))
    print("SENT " + json.dumps({"published": count, "seconds": seconds, "all_acked": acked}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def record(topic, path, schema_file):
    import rclpy
    from mcap.writer import CompressionType, Writer
    from rclpy.signals import SignalHandlerOptions

    Type = message_type(KIND)
    type_name = "sensor_msgs/msg/Image" if KIND == "image" else "std_msgs/msg/UInt8MultiArray"
    with open(schema_file, "rb") as f:
        definition = f.read()
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(time.monotonic()))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(time.monotonic()))
    # The signals are this script's: it drains and finishes the file after one.
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("freight_bench_record_stock_rec")
    out = open(path, "wb")
    writer = Writer(out, compression=CompressionType.NONE)
    writer.start(profile="ros2", library="freight bench record: rclpy + mcap " + mcap_version())
    schema_id = writer.register_schema(name=type_name, encoding="ros2msg", data=definition)
    channel_id = writer.register_channel(topic=topic, message_encoding="cdr", schema_id=schema_id)
    seen = set()
    state = {"bytes": 0, "first": None, "unreadable": 0}

    def on_message(raw):
        now = time.time_ns()
        if state["first"] is None:
            state["first"] = time.monotonic()
        sequence = sequence_of(raw)
        if sequence is None:
            state["unreadable"] += 1
        else:
            seen.add(sequence)
        writer.add_message(channel_id, log_time=now, publish_time=now, data=raw, sequence=len(seen))
        state["bytes"] += len(raw)

    node.create_subscription(Type, topic, on_message, 10, raw=True)
    while not stop:
        rclpy.spin_once(node, timeout_sec=0.1)
    while True:
        before = state["bytes"]
        rclpy.spin_once(node, timeout_sec=DRAIN_QUIET_S)
        if state["bytes"] == before:
            break
    writer.finish()
    out.flush()
    os.fsync(out.fileno())
    out.close()
    synced = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    received = len(seen) + state["unreadable"]
    summary = {
        "received": received,
        "lost": (max(seen) + 1 - len(seen)) if seen else 0,
        "unreadable": state["unreadable"],
        "bytes": state["bytes"],
        "seconds": synced - state["first"] if received else 0.0,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_kib": usage.ru_maxrss,
    }
    print("RECORDED " + json.dumps(summary), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def mcap_version():
    from importlib.metadata import version

    return version("mcap")


def main(argv):
    global KIND
    if argv[:1] == ["probe"]:
        import mcap.writer  # noqa: F401
        import rclpy  # noqa: F401
        from rclpy.utilities import get_rmw_implementation_identifier

        print(f"PROBE {get_rmw_implementation_identifier()}, mcap {mcap_version()}", flush=True)
        return
    if len(argv) < 3:
        fail("usage: pub|rec TOPIC KIND ...")
    role, topic, KIND = argv[0], argv[1], argv[2]
    rest = argv[3:]
    if role == "pub":
        rate = take_option(rest, "--rate", float)
        count = take_option(rest, "--count", int)
        keep_alive = take_option(rest, "--keep-alive", float)
        try:
            dims = [int(d) for d in rest]
        except ValueError:
            fail(f"dimensions must be numbers, not {rest}")
        if len(dims) != (2 if KIND == "image" else 1) or rate <= 0:
            fail(f"{KIND} takes {'WIDTH HEIGHT' if KIND == 'image' else 'BYTES'} and a positive --rate")
        publish(topic, dims, rate, count, keep_alive)
    elif role == "rec":
        if len(rest) != 2:
            fail("rec takes OUT.mcap SCHEMA_FILE")
        record(topic, rest[0], rest[1])
    else:
        fail(f"unknown role `{role}` (pub, rec or probe)")


KIND = None

if __name__ == "__main__":
    main(sys.argv[1:])
