"""freight's built-in messages, by ROS 2 package::

    from freight.msgs.sensor_msgs import Image, PointCloud2, PointField
    from freight.msgs.std_msgs import Header, UInt8MultiArray
    from freight.msgs.builtin_interfaces import Time
    from freight.msgs.tensor_msgs import Tensor

Each class takes its fields as keyword arguments (rclpy's style), compares with
``==``, and converts to and from ROS 2 CDR with ``serialize()`` and
``deserialize()``. A buffer field (``data``) accepts any numpy array,
bytes-like object or sequence of numbers; on a received message it is a
read-only numpy array over the memory the message arrived in.
"""
