"""One ROS 2 node, on stock rclpy or on freight, driven by commands on stdin.

    ros2_peer.py {stock,freight} {pub,sub} {image,cloud,imu} TOPIC
                 [--node NAME] [--reliability R] [--durability D] [--depth N]
                 [--hold N]

The same script runs under a stock ROS 2 interpreter (rclpy on rmw_fastrtps_cpp,
from PyPI; nothing of freight is imported there) and under freight's, since
freight's Python API has rclpy's names. Neither side is configured: no DDS XML,
no environment beyond what the test gives (nothing, in the stock-interop tests).

Prints ``READY`` once the endpoint exists, then, for a subscription, one line per
message received (a subscription given ``--hold N`` keeps the last ``N`` messages
alive, as a node that works on a few recent frames does)::

    GOT <k> <width> <height> <nbytes> OK | BAD <first wrong byte>

where ``k`` comes from ``header.frame_id`` (``frame<k>``) and byte i of message k
must be (k + i) % 251; an IMU message ``k`` carries the values of ``imu(k)``
(``OK``, or ``BAD <first wrong field>``; width, height and size are 0).
Commands, one per line:

``WAIT n [seconds]``
    waits (up to ``seconds``, 20 unless given) until ``n`` matched endpoints of
    the other kind exist: ``MATCHED <count>``.
``IMAGE k width height [encoding]``
    publishes image ``k`` (bgra8 unless said): ``SENT k <nbytes>``.
``CLOUD k points``
    publishes point cloud ``k``, ``points`` points of x, y, z, rgb (16 B each).
``IMU k``
    publishes IMU message ``k`` (nested vectors, three ``float64[9]`` covariances).
``WARMUP k``
    publishes message ``k`` of this endpoint's type, about a megabyte.
``STREAM first count rate width height [encoding]``
    publishes images ``first`` .. ``first + count - 1`` at ``rate`` Hz.
``GRAPH topic``
    ``GRAPH <json>``: the nodes, topics, and the publishers and subscriptions of
    ``topic`` with their node names, as this stack's graph API reports them.

The process exits when stdin closes.
"""

import argparse
import array
import collections
import json
import os
import queue
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pattern import fill_pattern, first_mismatch  # noqa: E402

WAIT_LIMIT = 20.0

parser = argparse.ArgumentParser()
parser.add_argument("stack", choices=["stock", "freight"])
parser.add_argument("role", choices=["pub", "sub"])
parser.add_argument("type", choices=["image", "cloud", "imu", "log"])
parser.add_argument("topic")
parser.add_argument("--node", default=None)
parser.add_argument("--reliability", choices=["reliable", "best_effort"], default="reliable")
parser.add_argument("--durability", choices=["volatile", "transient_local"], default="volatile")
parser.add_argument("--depth", type=int, default=10)
parser.add_argument("--hold", type=int, default=0)
args = parser.parse_args()

if args.stack == "stock":
    import rclpy as ros
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rcl_interfaces.msg import Log
    from sensor_msgs.msg import Image, Imu, PointCloud2, PointField

    ros.init()
    node = Node(args.node or f"stock_{args.role}")

    def spin_once(timeout):
        ros.spin_once(node, timeout_sec=timeout)

    def set_data(msg, data):
        # rclpy's uint8[] fields take an array.array('B') as it is; anything else
        # is checked element by element (seconds for a 4K frame).
        buf = array.array("B")
        buf.frombytes(data.tobytes())
        msg.data = buf

    def view(data):
        return np.frombuffer(data, dtype=np.uint8)

else:
    import freight as ros
    from freight import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from freight.msgs.sensor_msgs import Image, Imu, PointCloud2, PointField

    ros.init()
    node = ros.Node(args.node or f"freight_{args.role}")

    def spin_once(timeout):
        ros.spin_once(node, timeout_sec=timeout)

    def set_data(msg, data):
        msg.data = data

    def view(data):
        return np.asarray(data).reshape(-1).view(np.uint8)


qos = QoSProfile(
    depth=args.depth,
    reliability=ReliabilityPolicy.RELIABLE if args.reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.TRANSIENT_LOCAL if args.durability == "transient_local" else DurabilityPolicy.VOLATILE,
)
# "log": rcl_interfaces/msg/Log, a type freight has no Rust type for (stock only).
msg_type = {"image": Image, "cloud": PointCloud2, "imu": Imu, "log": Log if args.stack == "stock" else None}[args.type]
BYTES_PER_PIXEL = {"bgra8": 4, "rgb8": 3, "bgr8": 3, "mono8": 1, "mono16": 2}


held = collections.deque(maxlen=args.hold or None) if args.hold else None


def on_message(msg):
    if held is not None:
        held.append(msg)
    if args.type == "log":
        # Line k is "line{k}" from the node "bag": GOT k 0 0 <length> OK.
        k = int(msg.msg.removeprefix("line"))
        ok = msg.name == "bag" and msg.msg == f"line{k}" and msg.level == 20
        print(f"GOT {k} 0 0 {len(msg.msg)} {'OK' if ok else 'BAD ' + repr(msg)}", flush=True)
        return
    k = int(msg.header.frame_id.removeprefix("frame"))
    if args.type == "imu":
        bad = imu_mismatch(msg, k)
        print(f"GOT {k} 0 0 0 {'OK' if bad is None else 'BAD ' + bad}", flush=True)
        return
    data = view(msg.data)
    bad = first_mismatch(data, k)
    verdict = "OK" if bad is None else f"BAD {bad}"
    print(f"GOT {k} {msg.width} {msg.height} {data.size} {verdict}", flush=True)


if args.role == "pub":
    endpoint = node.create_publisher(msg_type, args.topic, qos)
else:
    endpoint = node.create_subscription(msg_type, args.topic, on_message, qos)


def matched():
    if args.role == "pub":
        return endpoint.get_subscription_count()
    return node.count_publishers(args.topic)


def image(k, width, height, encoding="bgra8"):
    msg = Image()
    msg.header.frame_id = f"frame{k}"
    msg.header.stamp.sec = k
    msg.width, msg.height, msg.encoding = width, height, encoding
    msg.step = width * BYTES_PER_PIXEL[encoding]
    data = np.empty(msg.step * height, dtype=np.uint8)
    fill_pattern(data, k)
    set_data(msg, data)
    return msg


def cloud(k, points):
    msg = PointCloud2()
    msg.header.frame_id = f"frame{k}"
    msg.height, msg.width = 1, points
    msg.fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate(["x", "y", "z", "rgb"])
    ]
    msg.point_step, msg.row_step, msg.is_dense = 16, 16 * points, True
    data = np.empty(16 * points, dtype=np.uint8)
    fill_pattern(data, k)
    set_data(msg, data)
    return msg


def imu_values(k):
    """Field by field, what IMU message ``k`` carries."""
    return {
        "orientation": (0.5 * k, -0.25, 0.125, 1.0),
        "angular_velocity": (float(k), 0.0, -1.5),
        "linear_acceleration": (0.0, 0.1, 9.81),
        "orientation_covariance": [float(k + i) for i in range(9)],
        "angular_velocity_covariance": [-1.0] + [0.0] * 8,
        "linear_acceleration_covariance": [0.01 * i for i in range(9)],
    }


def imu(k):
    msg = Imu()
    msg.header.frame_id = f"frame{k}"
    msg.header.stamp.sec = k
    for name, value in imu_values(k).items():
        if name.endswith("covariance"):
            setattr(msg, name, value)
        else:
            for axis, v in zip("xyzw", value):
                setattr(getattr(msg, name), axis, v)
    return msg


def imu_mismatch(msg, k):
    """The first field of ``msg`` that is not what IMU message ``k`` carries."""
    for name, value in imu_values(k).items():
        if name.endswith("covariance"):
            got = [float(v) for v in getattr(msg, name)]
        else:
            got = [getattr(getattr(msg, name), axis) for axis in "xyzw"[: len(value)]]
        if got != list(value):
            return name
    return None


def publish(msg, k):
    endpoint.publish(msg)
    print(f"SENT {k} {len(getattr(msg, 'data', ()))}", flush=True)


def graph(topic):
    info = {
        "nodes": sorted([list(n) for n in node.get_node_names_and_namespaces()]),
        "topics": {name: types for name, types in node.get_topic_names_and_types()},
        "publishers": [[i.node_namespace, i.node_name, i.topic_type] for i in node.get_publishers_info_by_topic(topic)],
        "subscriptions": [
            [i.node_namespace, i.node_name, i.topic_type] for i in node.get_subscriptions_info_by_topic(topic)
        ],
    }
    print("GRAPH " + json.dumps(info), flush=True)


def command(words):
    verb, rest = words[0], words[1:]
    if verb == "WAIT":
        deadline = time.monotonic() + (float(rest[1]) if len(rest) > 1 else WAIT_LIMIT)
        while matched() < int(rest[0]) and time.monotonic() < deadline:
            spin_once(0.05)
        print(f"MATCHED {matched()}", flush=True)
    elif verb == "IMAGE":
        k, width, height = (int(x) for x in rest[:3])
        publish(image(k, width, height, *rest[3:]), k)
    elif verb == "CLOUD":
        k, points = int(rest[0]), int(rest[1])
        publish(cloud(k, points), k)
    elif verb == "IMU":
        k = int(rest[0])
        publish(imu(k), k)
    elif verb == "WARMUP":
        # One message of this endpoint's type, of about a megabyte where it has data.
        k = int(rest[0])
        warm_up = {"image": lambda: image(k, 640, 480), "cloud": lambda: cloud(k, 640 * 480 // 4), "imu": lambda: imu(k)}
        publish(warm_up[args.type](), k)
    elif verb == "STREAM":
        first, count, rate, width, height = int(rest[0]), int(rest[1]), float(rest[2]), int(rest[3]), int(rest[4])
        start = time.monotonic()
        for k in range(first, first + count):
            publish(image(k, width, height, *rest[5:]), k)
            pause = start + (k - first + 1) / rate - time.monotonic()
            if pause > 0:
                spin_once(pause)
    elif verb == "GRAPH":
        graph(rest[0])
    elif verb == "LOG" and args.stack == "stock":
        # Lines "log0", "log1", ... through rclpy's logger: /rosout
        # (rcl_interfaces/msg/Log), a type freight has no Rust type for.
        for k in range(int(rest[0])):
            node.get_logger().info(f"log{k}")
        print("LOGGED", flush=True)
    else:
        print(f"ERR unknown command {verb}", flush=True)


commands = queue.Queue()


def read_stdin():
    for line in sys.stdin:
        commands.put(line.split())
    commands.put(None)


threading.Thread(target=read_stdin, daemon=True).start()
print("READY", flush=True)
while True:
    try:
        words = commands.get_nowait()
    except queue.Empty:
        spin_once(0.02)
        continue
    if words is None:
        break
    if words:
        command(words)
