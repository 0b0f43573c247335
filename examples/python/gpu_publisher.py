"""Publishes frames drawn on the GPU with torch, without copying them.

Shows ``backend="cuda"`` and ``loan_tensor``: each frame is a torch CUDA
tensor over the publisher's device memory, written by an ordinary torch
kernel and published as it is. Subscribers' streams wait for the kernel on the
GPU; this loop never waits for the GPU.

    python gpu_publisher.py                     # 3840x2160 bgra8 on /gpu_image, 30 Hz
    python gpu_publisher.py --rate 0 --count 500
"""

import argparse
import time

import torch

import freight
from freight.msgs.sensor_msgs import Image


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="/gpu_image")
    parser.add_argument("--width", type=int, default=3840)
    parser.add_argument("--height", type=int, default=2160)
    parser.add_argument("--rate", type=float, default=30.0, help="frames per second (0: as fast as possible)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many frames (0: never)")
    args = parser.parse_args()

    freight.init(local_only=True)
    node = freight.Node("gpu_camera")
    try:
        pub = node.create_publisher(Image, args.topic, 2, backend="cuda")
    except freight.BackendUnavailableError as e:
        raise SystemExit(f"{e}\n(gpu_publisher.py needs a CUDA GPU; camera_publisher.py runs anywhere)") from None
    w, h = args.width, args.height
    x = torch.arange(w, device="cuda", dtype=torch.float32)
    node.get_logger().info(f"publishing {w}x{h} bgra8 frames from CUDA memory on {args.topic}")
    sent = 0
    try:
        while args.count == 0 or sent < args.count:
            frame = pub.loan_tensor((h, w, 4), torch.uint8)      # device memory of the publisher
            band = ((x + 8 * sent) % 256).to(torch.uint8)         # a moving gradient, drawn by torch
            frame[..., 0] = band
            frame[..., 1] = band.flip(0)
            frame[..., 2] = sent % 256
            frame[..., 3] = 255
            msg = Image(height=h, width=w, encoding="bgra8", step=w * 4, data=frame)
            msg.header.stamp = node.get_clock().now().to_msg()
            msg.header.frame_id = "gpu_camera"
            pub.publish(msg)   # no copy; readers wait for torch's current stream on the GPU
            del frame, msg     # the loan now belongs to the subscribers
            sent += 1
            if args.rate > 0:
                time.sleep(1.0 / args.rate)
    except KeyboardInterrupt:
        pass
    node.get_logger().info(f"published {sent} frames")


if __name__ == "__main__":
    main()
