"""Saves one frame of an image topic as a PNG, then exits.

Shows the receiving side of freight's Python API: ``sub.take()`` returns an
``Image`` whose ``data`` is a read-only numpy array over the publisher's
shared memory (no copy), which numpy reshapes and converts as it would any
array. The PNG is written with the standard library only (zlib and struct).

    python viewer.py                                 # first frame on "image" -> snapshot.png
    python viewer.py --frames 30 --output frame30.png
"""

import argparse
import sys
import time

import freight
from freight.demos.png import png_bytes  # the standard library's zlib and struct, nothing else
from freight.msgs.sensor_msgs import Image

# encoding -> (channels in the message, their order in the PNG, PNG color type)
ENCODINGS = {
    "rgb8": (3, [0, 1, 2], 2),
    "bgr8": (3, [2, 1, 0], 2),
    "rgba8": (4, [0, 1, 2, 3], 6),
    "bgra8": (4, [2, 1, 0, 3], 6),
    "mono8": (1, [0], 0),
}


def to_png_pixels(msg):
    """The message's pixels as a (height, width, channels) array in PNG order, and the PNG color type."""
    if msg.encoding not in ENCODINGS:
        raise ValueError(f"encoding {msg.encoding!r} is not supported; this viewer reads {', '.join(ENCODINGS)}")
    channels, order, color_type = ENCODINGS[msg.encoding]
    if msg.step < msg.width * channels or len(msg.data) < msg.height * msg.step:
        raise ValueError(
            f"a {msg.width}x{msg.height} {msg.encoding} image needs step >= {msg.width * channels} and "
            f"height * step bytes of data; this one has step {msg.step} and {len(msg.data)} bytes"
        )
    # Rows may be padded to `step` bytes: view the rows, then cut the padding off.
    rows = msg.data[: msg.height * msg.step].reshape(msg.height, msg.step)
    pixels = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    # Indexing with a list copies: the result no longer refers to the shared memory.
    return pixels[..., order], color_type


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="image", help="topic to read (default: image)")
    parser.add_argument("--output", default="snapshot.png", help="PNG file to write (default: snapshot.png)")
    parser.add_argument("--frames", type=int, default=1, help="save the Nth frame received (default: 1)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for it (default: 10)")
    parser.add_argument("--local-only", action="store_true", help="shared memory only: no DDS")
    args = parser.parse_args()
    if args.frames < 1:
        parser.error(f"--frames {args.frames}: frames are counted from 1")
    if not args.timeout > 0:
        parser.error(f"--timeout {args.timeout:g}: give a positive number of seconds")

    freight.init(local_only=args.local_only)
    node = freight.Node("viewer")
    # Best effort, as the camera publishes: a frame that would not fit is skipped, not waited for.
    subscription = node.create_subscription(Image, args.topic, None, freight.qos_profile_sensor_data)
    try:
        return save_nth_frame(node, subscription, args)
    except KeyboardInterrupt:
        return 0
    finally:
        node.destroy_node()
        freight.shutdown()


def save_nth_frame(node, subscription, args):
    deadline = time.monotonic() + args.timeout
    for received in range(args.frames):
        msg = subscription.take(timeout_sec=max(0.0, deadline - time.monotonic()))
        if msg is None:
            print(
                f"error: no frame on {subscription.topic_name} within {args.timeout:g} s "
                f"({received} of {args.frames} received, {subscription.get_publisher_count()} publishers matched); "
                "start camera_publisher.py with the same ROS_DOMAIN_ID, and without --local-only on either side "
                "when it runs on another host",
                file=sys.stderr,
            )
            return 1
    arrived = node.get_clock().now()
    stamp = freight.Time.from_msg(msg.header.stamp)
    # Both clocks are the system clock: the difference is meaningful on one host,
    # or across hosts whose clocks are synchronized.
    latency = f"{(arrived - stamp) * 1e3:.2f} ms from stamp to receipt" if stamp.nanoseconds else "no stamp"
    try:
        pixels, color_type = to_png_pixels(msg)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    png = png_bytes(pixels, color_type)
    with open(args.output, "wb") as f:
        f.write(png)
    print(
        f"saved frame {args.frames} of {subscription.topic_name} to {args.output}: "
        f"{msg.width}x{msg.height} {msg.encoding}, {len(msg.data):,} bytes, frame_id {msg.header.frame_id!r}; "
        f"{len(png):,} bytes of PNG; {latency}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
