"""freight's built-in messages, by ROS 2 package::

    from freight.msgs.sensor_msgs import Image, PointCloud2, PointField, Imu
    from freight.msgs.std_msgs import Header, UInt8MultiArray, Float32MultiArray
    from freight.msgs.geometry_msgs import PoseStamped, Twist
    from freight.msgs.builtin_interfaces import Time
    from freight.msgs.tensor_msgs import Tensor

The classes are generated from the ``.msg`` files in the repository's
``interfaces/`` directory, as the Rust types are; each module has a ``.pyi``
stub listing the fields. Each class takes its fields as keyword arguments
(rclpy's style), has the ``.msg`` file's constants as class attributes
(``PointField.FLOAT32``), compares with ``==``, and converts to and from ROS 2
CDR with ``serialize()`` and ``deserialize()``. A fixed-size array of numbers
(``Imu.orientation_covariance``) is a numpy array of its length, as in rclpy.
A buffer field (an unbounded sequence of numbers, such as ``data``) accepts
any numpy array, bytes-like object or sequence of numbers; on a received
message it is a read-only numpy array over the memory the message arrived in.
"""
