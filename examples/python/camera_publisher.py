"""A synthetic 4K camera: BGRA frames published with zero copies.

Shows the zero-copy publishing path of freight's Python API. Each frame is
drawn straight into memory loaned from the publisher (``pub.loan``), which
lives in shared memory; publishing it hands that memory to the subscribers,
so a 33 MB frame costs the same to send as a tiny one. A node timer paces
the frames, as in an rclpy driver.

The picture is a fixed gradient, a red bar that crosses it every 120 frames
and, along the top, the frame number in binary (32 blocks, most significant
first, white for 1).

    python camera_publisher.py                      # 3840x2160 at 30 Hz on "image"
    python camera_publisher.py --count 60 --local-only
"""

import argparse
import math
import time

import numpy as np

import freight
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import Header

# Colors in BGRA order, as the frames are.
RED = np.array([0, 0, 255, 255], np.uint8)
BIT_COLORS = np.array([[40, 40, 40, 255], [255, 255, 255, 255]], np.uint8)  # 0, 1
COUNTER_BITS = 32
# The bar crosses the frame in this many frames.
BAR_CROSSING_FRAMES = 120


def gradient(width, height):
    """The background: blue grows to the right, green downwards."""
    image = np.empty((height, width, 4), np.uint8)
    image[..., 0] = np.linspace(0, 255, width).astype(np.uint8)
    image[..., 1] = np.linspace(0, 255, height).astype(np.uint8)[:, None]
    image[..., 2] = 64
    image[..., 3] = 255
    return image


class Frames:
    """Draws frame ``n`` into an array with a few whole-array numpy operations."""

    def __init__(self, width, height):
        self.background = gradient(width, height)
        self.bar_width = max(1, width // 32)
        self.bar_step = max(1, width // BAR_CROSSING_FRAMES)
        self.counter_height = max(1, height // 16)
        # Which bit of the counter each column shows.
        self.bit_of_column = np.arange(width) * COUNTER_BITS // width
        self.bit_shifts = np.arange(COUNTER_BITS - 1, -1, -1)

    def draw(self, frame, n):
        # A loan starts with unspecified contents, so every pixel is written:
        # one copy of the background (memcpy speed), then the parts that move.
        np.copyto(frame, self.background)
        x = n * self.bar_step % frame.shape[1]
        frame[:, x : x + self.bar_width] = RED
        bits = (n >> self.bit_shifts) & 1
        frame[: self.counter_height] = BIT_COLORS[bits[self.bit_of_column]]


class Camera(freight.Node):
    def __init__(self, topic, rate, width, height):
        super().__init__("camera")
        # Best effort, keep last 5: a slow viewer misses frames instead of
        # slowing the camera down (rclpy's sensor-data profile).
        self.publisher = self.create_publisher(Image, topic, freight.qos_profile_sensor_data)
        self.frames = Frames(width, height)
        self.shape = (height, width, 4)
        self.published = 0
        self._window_start = time.monotonic()
        self._window_frames = 0
        self._window_draw_s = 0.0
        self.create_timer(1.0 / rate, self.publish_frame)
        self.get_logger().info(
            f"publishing {width}x{height} bgra8 frames on {self.publisher.topic_name} at {rate:g} Hz"
        )

    def publish_frame(self):
        started = time.monotonic()
        pixels = self.publisher.loan(self.shape, np.uint8)  # writable numpy array in shared memory
        self.frames.draw(pixels, self.published)
        height, width, _ = self.shape
        msg = Image(
            # Stamped when the frame is complete, as a driver stamps at acquisition.
            header=Header(stamp=self.get_clock().now().to_msg(), frame_id="camera"),
            height=height,
            width=width,
            encoding="bgra8",
            step=width * 4,
            data=pixels,
        )
        self.publisher.publish(msg)  # no copy: the subscribers get this very memory
        self.published += 1
        self._window_frames += 1
        self._window_draw_s += time.monotonic() - started
        self._report_every_second()

    def _report_every_second(self):
        elapsed = time.monotonic() - self._window_start
        if elapsed < 1.0:
            return
        self.get_logger().info(
            f"{self._window_frames / elapsed:.1f} frames/s, "
            f"{1e3 * self._window_draw_s / self._window_frames:.1f} ms per frame to draw and publish, "
            f"{self.publisher.get_subscription_count()} subscriber(s)"
        )
        self._window_start += elapsed
        self._window_frames = 0
        self._window_draw_s = 0.0


def positive(kind):
    def parse(text):
        value = kind(text)
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} is not a positive number")
        return value

    return parse


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="image", help="topic to publish on (default: image)")
    parser.add_argument("--rate", type=positive(float), default=30.0, help="frames per second (default: 30)")
    parser.add_argument("--width", type=positive(int), default=3840, help="pixels (default: 3840)")
    parser.add_argument("--height", type=positive(int), default=2160, help="pixels (default: 2160)")
    parser.add_argument("--count", type=positive(int), help="stop after this many frames (default: run until Ctrl-C)")
    parser.add_argument(
        "--local-only", action="store_true", help="shared memory only: no DDS, not visible to other hosts"
    )
    args = parser.parse_args()

    freight.init(local_only=args.local_only)
    camera = Camera(args.topic, args.rate, args.width, args.height)
    try:
        while args.count is None or camera.published < args.count:
            freight.spin_once(camera)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a camera is meant to be stopped
    finally:
        camera.get_logger().info(f"published {camera.published} frames")
        camera.destroy_node()
        freight.shutdown()


if __name__ == "__main__":
    main()
