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

Types of your own packages
--------------------------

``freight msg python --out DIR path/to/my_msgs`` writes the package
``my_msgs`` (``my_msgs/msg.py``, ``my_msgs/srv.py``) under ``DIR``; with
``DIR`` on ``sys.path``, ``from my_msgs.msg import Scan`` works as with
rclpy. Each class is made by :func:`message_class` from the type's
definition, which the generated module carries; it behaves as a built-in
class, fields of freight's built-in types holding those classes, and meets
endpoints of the same ``.msg`` file in Rust, C++ and Python. Values are
checked when a message is published or serialized (types, ranges, the bounds
of ``string<=N`` and ``T[<=N]``), not when a field is assigned.
"""

import numpy as _numpy

from freight import _native

_MessageType = _native.MessageType


def message_class(type_name, definition):
    """The class of the message type ``type_name`` (``"my_msgs/msg/Scan"``)
    whose ``ros2msg`` definition is ``definition``: the ``.msg`` text, then
    that of each type it uses after a ``MSG: pkg/Name`` line, as rosbag2
    records it. One class per type name in a process: asking again gives the
    same class, and another definition of the same name raises
    ``TypeError``. A type freight has built in gives its built-in class.

    >>> Scan = message_class("my_msgs/msg/Scan", "uint32 id\\nfloat32[] ranges\\n")
    >>> Scan(id=7, ranges=[0.5, 1.5]).ranges.dtype
    dtype('float32')
    """
    return _class_of(_MessageType(type_name, definition))


def service_class(type_name, request_definition, response_definition):
    """The class of the service type ``type_name`` (``"my_msgs/srv/Detect"``):
    ``Request`` and ``Response`` are the message classes of the two halves'
    ``ros2msg`` definitions (``my_msgs/srv/Detect_Request`` and
    ``..._Response``), as :func:`message_class` makes them. Servers and
    clients take it as rclpy's take a generated service class.

    >>> Echo = service_class("my_msgs/srv/Echo", "string text\n", "string text\n")
    >>> Echo.Request(text="hi").text
    'hi'
    """
    package, kind, name = type_name.split("/") if type_name.count("/") == 2 else ("", "", "")
    if kind != "srv" or not name:
        raise TypeError(f"{type_name!r} is not a service type name, pkg/srv/Name")
    request = message_class(f"{type_name}_Request", request_definition)
    response = message_class(f"{type_name}_Response", response_definition)
    doc = f"``{type_name}``: ``{name}.Request`` is sent, ``{name}.Response`` answers."
    return type(name, (), {"__doc__": doc, "__module__": f"{package}.srv", "Request": request, "Response": response})


def _class_of(native):
    if native.built_in is not None:
        return native.built_in
    known = native.registered()
    if known is not None:
        return known
    # The nested types' classes first: a default value is an instance.
    for nested in native.nested():
        _class_of(nested)
    return native.register(_make_class(native))


def _make_class(native):
    package, kind, name = native.type_name.split("/")
    module = f"{package}.{kind}"
    fields = tuple(native.field_names)
    types = dict(native.field_types())

    def __init__(self, **kwargs):
        native.init(self, kwargs)

    def __setattr__(self, field, value):
        # Checked as a publish checks it, and stored as the constructor
        # stores it (numbers of a fixed-size array as a numpy array).
        _set_attribute(self, field, native.checked(field, value))

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f), getattr(other, f)) for f in fields)

    def __repr__(self):
        shown = ", ".join(f"{f}={getattr(self, f, None)!r}" for f in fields)
        return f"{module}.{name}({shown})"

    def serialize(self):
        """The message in ROS 2 CDR (encapsulation header included)."""
        return native.serialize(self)

    @classmethod
    def deserialize(cls, data):
        """The message from ROS 2 CDR bytes; raises
        ``freight.MalformedMessageError`` for bytes that are not one."""
        return native.deserialize(bytes(data))

    def __reduce__(self):
        return (type(self).deserialize, (self.serialize(),))

    @classmethod
    def get_fields_and_field_types(cls):
        """``{field: ROS type}``, as rclpy's classes have it."""
        return dict(types)

    namespace = {
        "__slots__": fields,
        "__doc__": f"``{native.type_name}``, a type of your package, read from its definition.",
        "__module__": module,
        "__init__": __init__,
        "__setattr__": __setattr__,
        "__eq__": __eq__,
        "__hash__": None,
        "__repr__": __repr__,
        "serialize": serialize,
        "deserialize": deserialize,
        "__reduce__": __reduce__,
        "get_fields_and_field_types": get_fields_and_field_types,
        "_freight_type": native,
    }
    for constant, value in native.constants():
        namespace[constant] = value
    return type(name, (), namespace)


_set_attribute = object.__setattr__


def _same(a, b):
    """Field equality: arrays by their elements, lists item by item."""
    if isinstance(a, _numpy.ndarray) or isinstance(b, _numpy.ndarray):
        a, b = _numpy.asarray(a), _numpy.asarray(b)
        return a.shape == b.shape and bool(_numpy.array_equal(a, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


__all__ = ["message_class", "service_class"]
