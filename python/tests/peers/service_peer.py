"""A service server process.

    service_peer.py {set_bool,stuck} NAME

``set_bool`` serves ``std_srvs/SetBool`` on ``NAME`` from ``freight.spin``:
it answers ``success = data`` and a message naming its pid. ``stuck`` serves
it with a callback that prints ``GOT`` and never returns. Prints ``READY``
once the service exists; exits when stdin closes.
"""

import os
import pathlib
import sys
import threading
import time

import freight
from freight.msgs.std_srvs import SetBool

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import support  # noqa: E402


def main():
    role, name = sys.argv[1], sys.argv[2]
    freight.init()
    node = freight.Node("service_peer")

    def set_bool(request, response):
        response.success = request.data
        response.message = f"pid {os.getpid()}"
        return response

    def stuck(request, response):
        print("GOT", flush=True)
        while True:
            time.sleep(3600)

    node.create_service(SetBool, name, set_bool if role == "set_bool" else stuck)
    closed = support.stdin_closed()
    executor = freight.SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=lambda: (closed.wait(), executor.shutdown()), daemon=True).start()
    print("READY", flush=True)
    executor.spin()


if __name__ == "__main__":
    main()
