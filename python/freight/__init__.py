"""freight: zero-copy publish/subscribe for large ROS 2 messages, with rclpy's API.

Messages between processes of one host travel through shared memory: a
received image's ``data`` is a read-only numpy array over the publisher's
memory, not a copy. Other hosts and stock ROS 2 nodes are reached over DDS
(Cyclone DDS, ROS 2's wire format).

::

    import numpy as np
    import freight
    from freight.msgs.sensor_msgs import Image

    freight.init()
    node = freight.Node("camera")
    pub = node.create_publisher(Image, "image", 5)

    frame = pub.loan((2160, 3840, 4), np.uint8)     # writable, in shared memory
    frame[:] = 255
    pub.publish(Image(height=2160, width=3840, encoding="bgra8", step=3840 * 4, data=frame))

    def on_image(msg):
        pixels = msg.data.reshape(msg.height, msg.width, 4)   # no copy
    node.create_subscription(Image, "image", on_image, 5)
    freight.spin(node)
"""

from freight._native import Context, DeviceArray, LoanedBuffer, Publisher, ReceivedBuffer, Subscription
from freight.clock import Clock, Time
from freight.context import init, ok, shutdown
from freight import errors as _errors
from freight.errors import (
    BackendError,
    BagError,
    BackendUnavailableError,
    ContextError,
    FreightError,
    InvalidNameError,
    LimitError,
    LoanError,
    MalformedMessageError,
    NetworkError,
    NoServerError,
    QueueFullError,
    ServerGoneError,
    SharedMemoryError,
    TooManyHeldError,
    TypeMismatchError,
)
from freight.executors import Executor, MultiThreadedExecutor, SingleThreadedExecutor
from freight.graph import TopicEndpointInfo, TopicEndpointTypeEnum
from freight.node import Node, Timer
from freight.services import Client, Future, Service
from freight.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
    qos_profile_system_default,
)


def as_cuda(data):
    """``data`` as a CUDA device addresses it, for DLPack consumers on the GPU.

    ``data`` is a received buffer field: a numpy array in ``cuda-host`` memory
    (page-locked host memory mapped for the GPU) or its ``ReceivedBuffer``
    gives a :class:`DeviceArray` over the mapped device pointer, with no copy
    (``torch.from_dlpack(freight.as_cuda(msg.data))`` is a CUDA tensor over
    host memory); a :class:`DeviceArray` (``cuda`` memory) is returned as it
    is. Memory no GPU maps raises :class:`freight.BackendError`.
    """
    if isinstance(data, DeviceArray):
        return data
    base = data
    while base is not None and not isinstance(base, ReceivedBuffer):
        base = getattr(base, "base", None)
    if base is None:
        raise TypeError(
            f"as_cuda takes a received buffer field (numpy array, ReceivedBuffer or DeviceArray), not {type(data).__name__}"
        )
    return base.as_cuda()


def create_node(node_name, *, context=None, namespace=None):
    """A :class:`Node` (rclpy's ``create_node``)."""
    return Node(node_name, context=context, namespace=namespace)


def spin(node, executor=None):
    """Runs ``node``'s callbacks until shutdown or Ctrl-C (``KeyboardInterrupt``)."""
    executor = executor if executor is not None else SingleThreadedExecutor(context=node.context)
    added = executor.add_node(node)
    try:
        executor.spin()
    finally:
        if added:
            executor.remove_node(node)


def spin_once(node, *, executor=None, timeout_sec=None):
    """Runs at most one callback of ``node``, waiting up to ``timeout_sec`` for one."""
    executor = executor if executor is not None else SingleThreadedExecutor(context=node.context)
    added = executor.add_node(node)
    try:
        executor.spin_once(timeout_sec=timeout_sec)
    finally:
        if added:
            executor.remove_node(node)


def spin_until_future_complete(node, future, executor=None, timeout_sec=None):
    """Runs ``node``'s callbacks until ``future`` is done or ``timeout_sec`` passes."""
    executor = executor if executor is not None else SingleThreadedExecutor(context=node.context)
    added = executor.add_node(node)
    try:
        executor.spin_until_future_complete(future, timeout_sec=timeout_sec)
    finally:
        if added:
            executor.remove_node(node)


__all__ = [
    "init",
    "ok",
    "shutdown",
    "create_node",
    "spin",
    "spin_once",
    "spin_until_future_complete",
    "Service",
    "Client",
    "Future",
    "Context",
    "Node",
    "Timer",
    "Clock",
    "Time",
    "Publisher",
    "Subscription",
    "ReceivedBuffer",
    "LoanedBuffer",
    "DeviceArray",
    "as_cuda",
    "Executor",
    "SingleThreadedExecutor",
    "MultiThreadedExecutor",
    "TopicEndpointInfo",
    "TopicEndpointTypeEnum",
    "QoSProfile",
    "HistoryPolicy",
    "ReliabilityPolicy",
    "DurabilityPolicy",
    "qos_profile_sensor_data",
    "qos_profile_system_default",
] + _errors.__all__
