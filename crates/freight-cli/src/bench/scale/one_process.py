"""One process with N publishers and N subscriptions of std_msgs/UInt8MultiArray on
N topics, for `freight bench scale`'s per-process comparison; run by
`crates/freight-cli/src/bench/scale/one_process.rs` with stock rclpy's interpreter
or freight's.

    python one_process.py rclpy|freight N

prints one line, after the endpoints have been idle for a second:

    #scale# ONE <seconds to create> <fds before> <fds after> <VmRSS KiB before> <after>

"before" is after init and the node, so the difference is what the endpoints cost.
"""

import os
import sys
import time


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds():
    return len(os.listdir("/proc/self/fd"))


def main():
    stack, n = sys.argv[1], int(sys.argv[2])
    if stack == "freight":
        import freight as ros
        from freight.msgs.std_msgs import UInt8MultiArray
    else:
        import rclpy as ros
        from std_msgs.msg import UInt8MultiArray
    ros.init()
    node = ros.create_node(f"scale_one_{os.getpid()}")
    fds_before, rss_before = fds(), rss_kib()
    t0 = time.perf_counter()
    publishers = [node.create_publisher(UInt8MultiArray, f"/scale_one/t{i}", 10) for i in range(n)]
    subscriptions = [
        node.create_subscription(UInt8MultiArray, f"/scale_one/t{i}", lambda _msg: None, 10) for i in range(n)
    ]
    created = time.perf_counter() - t0
    time.sleep(1.0)
    print(f"#scale# ONE {created:.6f} {fds_before} {fds()} {rss_before} {rss_kib()}", flush=True)
    del publishers, subscriptions
    node.destroy_node()
    ros.shutdown()


if __name__ == "__main__":
    main()
