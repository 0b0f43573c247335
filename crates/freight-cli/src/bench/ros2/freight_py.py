"""freight's Python side of `freight bench ros2`: the stock script (stock_rclpy.py) through
freight's rclpy-shaped API, on freight's local plane only (`freight.init(local_only=True)`:
shared memory, no DDS).

    python freight_py.py {pub,sub} TOPIC (image WIDTH HEIGHT | cloud POINTS)
                         [--warmup N] [--count N] [--duration SECS]
    python freight_py.py probe

The protocol, the checks and the output are stock_rclpy.py's; what differs is what a
freight user does differently: the publisher loans each message's payload from shared
memory (`pub.loan`) and writes it there, instead of rewriting one array.array that
rclpy then copies, and the subscriber's `msg.data` is a read-only view of that memory.
"""

import sys

import numpy as np
from bench_protocol import fill_value, parse, publisher, subscriber

import freight
from freight.msgs.sensor_msgs import Image, PointCloud2, PointField
from freight.msgs.std_msgs import Header


def make_message(pub, kind, dims, value):
    """A data message whose payload is a fresh loan of `pub`'s shared memory, every byte
    written with `value`."""
    if kind == "image":
        width, height = dims
        frame = pub.loan((height, width, 4), np.uint8)
        frame.fill(value)
        return Image(width=width, height=height, encoding="bgra8", step=4 * width, data=frame)
    (points,) = dims
    cloud = pub.loan((points, 15), np.uint8)
    cloud.fill(value)
    return PointCloud2(
        height=1, width=points, fields=cloud_fields(), point_step=15, row_step=15 * points, is_dense=True, data=cloud
    )


def probe():
    """`PROBE freight <version>`: what this interpreter runs."""
    from importlib import metadata

    print(f"PROBE freight {metadata.version('freight')} (Python), local plane only", flush=True)


def main():
    if sys.argv[1:] == ["probe"]:
        probe()
        return
    args = parse()
    freight.init(local_only=True)
    node = freight.Node(f"bench_ros2_{args.role}")
    msg_type = Image if args.kind == "image" else PointCloud2
    if args.role == "pub":

        def loaned(pub, k):
            return make_message(pub, args.kind, args.dims, fill_value(k))

        publisher(args, node, freight.spin_once, msg_type, Header, loaned)
    else:
        subscriber(args, node, freight.spin_once, msg_type, Header)
    node.destroy_node()
    freight.shutdown()


if __name__ == "__main__":
    main()
