"""Receives frames in GPU memory and reads them with torch, without copying them.

Shows ``accepted_backends=["cuda"]``: ``msg.data`` is a ``freight.DeviceArray``
(numpy cannot view it) that ``torch.from_dlpack`` imports as a CUDA tensor on
this process's stream, which DLPack first makes wait for the publisher's
kernel. Frames from a publisher that lends host memory arrive as numpy arrays
and are uploaded instead; the log says which.

    python gpu_subscriber.py                    # pairs with gpu_publisher.py
    python gpu_subscriber.py --frames 100 --save-png frame.png
"""

import argparse
import time

import numpy as np
import torch

import freight
from freight.demos.png import write_png
from freight.msgs.sensor_msgs import Image


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="/gpu_image")
    parser.add_argument("--frames", type=int, default=300, help="stop after this many frames")
    parser.add_argument("--save-png", metavar="FILE", help="save the last frame (copied to the host)")
    args = parser.parse_args()

    freight.init(local_only=True)
    node = freight.Node("gpu_viewer")
    sub = node.create_subscription(Image, args.topic, None, 2, accepted_backends=["cuda", "cuda-host"])
    stream = torch.cuda.Stream()
    start, got, last = None, 0, None
    while got < args.frames:
        msg = sub.take(timeout_sec=10.0)
        if msg is None:
            raise SystemExit(f"no frame on {args.topic} in 10 s")
        with torch.cuda.stream(stream):
            if isinstance(msg.data, freight.DeviceArray):                # cuda: in place
                frame = torch.from_dlpack(msg.data)
            elif msg.data.base.backend == "cuda-host":                 # host memory the GPU maps
                frame = torch.from_dlpack(freight.as_cuda(msg.data))
            else:                                                       # host memory: upload
                frame = torch.from_numpy(np.array(msg.data)).cuda()
            pixels = frame.view(msg.height, msg.width, 4)
            brightness = pixels[..., :3].float().mean().item()          # reads every pixel on `stream`
        if start is None:
            start = time.monotonic()
            backend = msg.data.backend if isinstance(msg.data, freight.DeviceArray) else msg.data.base.backend
            node.get_logger().info(f"{msg.width}x{msg.height} frames via {backend}")
        got += 1
        last = (pixels, msg)
        del frame
    elapsed = time.monotonic() - start
    node.get_logger().info(f"{got} frames, {(got - 1) / elapsed:.1f} frames/s, mean brightness {brightness:.1f}")
    if args.save_png:
        pixels, msg = last
        size = write_png(args.save_png, pixels[..., [2, 1, 0, 3]].cpu().numpy())
        node.get_logger().info(f"saved {args.save_png} ({size:,} bytes)")


if __name__ == "__main__":
    main()
