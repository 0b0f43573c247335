"""A node that follows ``/clock``, on stock rclpy or on freight.

    clock_peer.py {stock,freight}

``stock``: an rclpy node (run by a stock ROS 2 interpreter) with the parameter
``use_sim_time`` set, as a node that replays a bag runs; it prints its clock's
time whenever it changes, so the test sees what rclpy's time source made of
``/clock`` rather than the messages themselves. ``freight``: a freight
subscription to ``/clock`` (best effort, depth 1, as rclpy's time source
subscribes) printing each message's time. Both print ``READY`` first, then::

    TIME <ns>

The process exits when stdin closes or after 60 s.
"""

import sys
import threading
import time

stack = sys.argv[1]
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
deadline = time.monotonic() + 60.0

if stack == "stock":
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    rclpy.init()
    node = Node("clock_follower", parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, True)])
    print("READY", flush=True)
    last = None
    while not done.is_set() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
        now = node.get_clock().now().nanoseconds
        if now != last:
            print("TIME", now, flush=True)
            last = now
else:
    import freight
    from freight import QoSProfile, ReliabilityPolicy
    from freight.msgs.rosgraph_msgs import Clock

    freight.init()
    node = freight.Node("freight_clock_follower")
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    node.create_subscription(
        Clock, "/clock", lambda m: print("TIME", m.clock.sec * 1_000_000_000 + m.clock.nanosec, flush=True), qos
    )
    print("READY", flush=True)
    while not done.is_set() and time.monotonic() < deadline:
        freight.spin_once(node, timeout_sec=0.02)
