"""freight's built-in message classes, without any transport.

Construction, defaults and type-checked fields (rclpy's behaviour), equality and
repr, what a buffer field accepts, ROS 2 CDR (byte for byte against rosbags, an
independent serializer, in both directions), malformed input, pickling, and the
tensor helpers of `freight.msgs.tensor_msgs`.
"""

import array
import copy
import pickle
import random
import struct

import numpy as np
import pytest

import freight
from freight.msgs import tensor_msgs
from freight.msgs.builtin_interfaces import Duration, Time
from freight.msgs.sensor_msgs import Image, PointCloud2, PointField
from freight.msgs.std_msgs import (
    Header,
    MultiArrayDimension,
    MultiArrayLayout,
    UInt8MultiArray,
    UInt64MultiArray,
)
from freight.msgs.tensor_msgs import Tensor

# ------------------------------------------------------------------ the classes

#: Each class with the ROS 2 type name rosbags knows it by. freight's Tensor has
#: the fields of ROS 2's (not yet released) ExperimentalTensor, which rosbags
#: does not ship: it is registered from its .msg text below, as the Rust CDR
#: test (crates/freight-msg/tests/ros2_cdr/vectors.py) does.
ROS_TYPES = {
    Time: "builtin_interfaces/msg/Time",
    Duration: "builtin_interfaces/msg/Duration",
    Header: "std_msgs/msg/Header",
    MultiArrayDimension: "std_msgs/msg/MultiArrayDimension",
    MultiArrayLayout: "std_msgs/msg/MultiArrayLayout",
    UInt8MultiArray: "std_msgs/msg/UInt8MultiArray",
    UInt64MultiArray: "std_msgs/msg/UInt64MultiArray",
    Image: "sensor_msgs/msg/Image",
    PointField: "sensor_msgs/msg/PointField",
    PointCloud2: "sensor_msgs/msg/PointCloud2",
    Tensor: "tensor_msgs/msg/ExperimentalTensor",
}
CLASSES = list(ROS_TYPES)
CLASS_OF = {name: cls for cls, name in ROS_TYPES.items()}

TENSOR_MSG = """
uint8 dtype_code
uint8 dtype_bits
uint16 dtype_lanes
int64[] shape
int64[] strides
uint64 byte_offset
uint8[] data
"""

#: Every field of every class, with its value in a default-constructed message.
DEFAULTS = {
    Time: {"sec": 0, "nanosec": 0},
    Duration: {"sec": 0, "nanosec": 0},
    Header: {"stamp": Time(), "frame_id": ""},
    MultiArrayDimension: {"label": "", "size": 0, "stride": 0},
    MultiArrayLayout: {"dim": [], "data_offset": 0},
    UInt8MultiArray: {"layout": MultiArrayLayout(), "data": np.zeros(0, np.uint8)},
    UInt64MultiArray: {"layout": MultiArrayLayout(), "data": np.zeros(0, np.uint64)},
    Image: {
        "header": Header(),
        "height": 0,
        "width": 0,
        "encoding": "",
        "is_bigendian": 0,
        "step": 0,
        "data": np.zeros(0, np.uint8),
    },
    PointField: {"name": "", "offset": 0, "datatype": 0, "count": 0},
    PointCloud2: {
        "header": Header(),
        "height": 0,
        "width": 0,
        "fields": [],
        "is_bigendian": False,
        "point_step": 0,
        "row_step": 0,
        "data": np.zeros(0, np.uint8),
        "is_dense": False,
    },
    Tensor: {
        "dtype_code": 0,
        "dtype_bits": 0,
        "dtype_lanes": 0,
        "shape": [],
        "strides": [],
        "byte_offset": 0,
        "data": np.zeros(0, np.uint8),
    },
}


def header(frame_id="camera", sec=1700000000, nanosec=123456789):
    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id)


def layout(*dims, data_offset=0):
    return MultiArrayLayout(
        dim=[MultiArrayDimension(label=label, size=size, stride=stride) for label, size, stride in dims],
        data_offset=data_offset,
    )


def xyzi():
    return [
        PointField(name="x", offset=0, datatype=7, count=1),
        PointField(name="y", offset=4, datatype=7, count=1),
        PointField(name="z", offset=8, datatype=7, count=1),
        PointField(name="intensity", offset=12, datatype=7, count=1),
    ]


#: Messages to round-trip and compare with rosbags: ordinary values, empty
#: ones, non-ASCII strings, extremes, and odd lengths that misalign what follows.
#: Functions, since messages are mutable.
SAMPLES = {
    "time": lambda: Time(sec=1700000000, nanosec=123456789),
    "time_extremes": lambda: Time(sec=-(2**31), nanosec=2**32 - 1),
    "time_max": lambda: Time(sec=2**31 - 1, nanosec=0),
    "duration": lambda: Duration(sec=-5, nanosec=999999999),
    "header": lambda: header("camera_optical_frame"),
    "header_empty": lambda: Header(),
    "header_umlaut": lambda: header("kamera-\u00fc"),
    "header_emoji": lambda: header("\U0001f680robot"),
    "dimension": lambda: MultiArrayDimension(label="height", size=480, stride=921600),
    "layout": lambda: layout(("height", 480, 921600), ("width", 640, 1920), ("channel", 3, 3), data_offset=7),
    "layout_empty": lambda: MultiArrayLayout(),
    "uint8_multi_array": lambda: UInt8MultiArray(layout=layout(("x", 7, 7)), data=np.arange(7, dtype=np.uint8) * 7),
    "uint8_multi_array_empty": lambda: UInt8MultiArray(),
    "uint64_multi_array": lambda: UInt64MultiArray(
        layout=layout(("\u00fc", 4, 4), data_offset=1), data=np.array([0, 1, 2**64 - 1, 2**63], np.uint64)
    ),
    "uint64_multi_array_odd_label": lambda: UInt64MultiArray(
        layout=layout(("abc", 3, 1)), data=np.array([5, 6, 7], np.uint64)
    ),
    "uint64_multi_array_empty": lambda: UInt64MultiArray(layout=layout(("a", 0, 0), ("bcd", 0, 0))),
    "image_rgb8": lambda: Image(
        header=header("camera"),
        height=2,
        width=4,
        encoding="rgb8",
        step=12,
        data=(np.arange(24, dtype=np.uint8) * 7),
    ),
    "image_empty": lambda: Image(),
    "image_odd": lambda: Image(
        header=header("\u65e5\u672c"), height=1, width=3, encoding="mono8", is_bigendian=1, step=3, data=b"\x01\x02\x03"
    ),
    "image_float_pixels": lambda: Image(
        header=header("depth"),
        height=2,
        width=3,
        encoding="32FC1",
        step=12,
        data=np.linspace(0.5, 3.0, 6, dtype=np.float32).reshape(2, 3),
    ),
    "point_field": lambda: PointField(name="intensity", offset=12, datatype=7, count=1),
    "point_field_umlaut": lambda: PointField(name="\u00fc", offset=3, datatype=2, count=3),
    "point_cloud2": lambda: PointCloud2(
        header=header("lidar"),
        height=1,
        width=3,
        fields=xyzi(),
        is_bigendian=False,
        point_step=16,
        row_step=48,
        data=((np.arange(48, dtype=np.uint16) * 13 + 5) % 251).astype(np.uint8),
        is_dense=True,
    ),
    "point_cloud2_empty": lambda: PointCloud2(),
    "point_cloud2_odd": lambda: PointCloud2(
        header=header("l"),
        height=1,
        width=1,
        fields=[PointField(name="i", offset=0, datatype=2, count=1)],
        is_bigendian=True,
        point_step=1,
        row_step=1,
        data=[42],
        is_dense=False,
    ),
    "tensor_float32": lambda: tensor_msgs.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)),
    "tensor_strided": lambda: Tensor(
        dtype_code=2, dtype_bits=32, dtype_lanes=1, shape=[3, 2], strides=[1, 3], data=bytes(range(24))
    ),
    "tensor_scalar": lambda: Tensor(dtype_code=0, dtype_bits=8, dtype_lanes=1, shape=[], data=[42]),
    "tensor_empty": lambda: Tensor(),
    "tensor_odd_offset": lambda: Tensor(
        dtype_code=1, dtype_bits=8, dtype_lanes=1, shape=[7], byte_offset=2**40, data=np.arange(7, dtype=np.uint8) * 3
    ),
    "tensor_extremes": lambda: Tensor(
        dtype_code=255,
        dtype_bits=255,
        dtype_lanes=65535,
        shape=[-(2**63), 2**63 - 1],
        strides=[0],
        byte_offset=2**64 - 1,
        data=b"\xff",
    ),
}


def sample_ids(cls):
    return [name for name, make in SAMPLES.items() if type(make()) is cls]


# ------------------------------------------------------------------ rosbags


@pytest.fixture(scope="module")
def rosbags_store():
    typesys = pytest.importorskip("rosbags.typesys", reason="the CDR comparison needs rosbags (pip install rosbags)")
    store = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
    store.register(typesys.get_types_from_msg(TENSOR_MSG, "tensor_msgs/msg/ExperimentalTensor"))
    return store


def _nodetype():
    from rosbags.interfaces import Nodetype

    return Nodetype


NUMPY_OF_ROS = {
    "bool": np.bool_,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


def to_rosbags(store, typename, msg):
    """The rosbags message with the field values of freight's `msg`."""
    nodetype = _nodetype()
    _, fields = store.fielddefs[typename]
    kwargs = {}
    for name, (kind, detail) in fields:
        value = getattr(msg, name)
        if kind == nodetype.NAME:
            kwargs[name] = to_rosbags(store, detail, value)
        elif kind == nodetype.BASE:
            kwargs[name] = value
        else:
            (sub_kind, sub_detail), _ = detail
            if sub_kind == nodetype.NAME:
                kwargs[name] = [to_rosbags(store, sub_detail, v) for v in value]
            else:
                dtype = NUMPY_OF_ROS[sub_detail[0]]
                if isinstance(value, np.ndarray):
                    # A buffer field sends the array's bytes, whatever its dtype.
                    kwargs[name] = np.ascontiguousarray(value).reshape(-1).view(np.uint8).view(dtype)
                else:
                    kwargs[name] = np.array(value, dtype=dtype)
    return store.types[typename](**kwargs)


def from_rosbags(store, typename, ros_msg):
    """freight's message with the field values of the rosbags message."""
    nodetype = _nodetype()
    cls = CLASS_OF[typename]
    defaults = cls()
    _, fields = store.fielddefs[typename]
    kwargs = {}
    for name, (kind, detail) in fields:
        value = getattr(ros_msg, name)
        if kind == nodetype.NAME:
            kwargs[name] = from_rosbags(store, detail, value)
        elif kind == nodetype.BASE:
            kwargs[name] = value if detail[0] in ("string", "bool") else int(value)
        else:
            (sub_kind, sub_detail), _ = detail
            if sub_kind == nodetype.NAME:
                kwargs[name] = [from_rosbags(store, sub_detail, v) for v in value]
            elif isinstance(getattr(defaults, name), np.ndarray):
                kwargs[name] = np.asarray(value)
            else:
                kwargs[name] = [int(v) for v in value]
    return cls(**kwargs)


# ------------------------------------------------------------------ construction


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_defaults_to_its_zero_value(cls):
    msg = cls()
    for field, expected in DEFAULTS[cls].items():
        value = getattr(msg, field)
        if isinstance(expected, np.ndarray):
            assert isinstance(value, np.ndarray), field
            assert value.dtype == expected.dtype and value.shape == (0,), field
        else:
            assert type(value) is type(expected), field
            assert value == expected, field
    assert msg == cls(**DEFAULTS[cls])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_default_nested_messages_are_not_shared_between_instances(cls):
    a, b = cls(), cls()
    for field, default in DEFAULTS[cls].items():
        if type(default) in CLASSES:
            assert getattr(a, field) is not getattr(b, field), field


def test_keyword_construction_sets_nested_fields():
    msg = Image(
        header=Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"),
        height=480,
        width=640,
        encoding="rgb8",
        is_bigendian=1,
        step=1920,
        data=b"\x01\x02\x03",
    )
    assert msg.header.stamp.sec == 1
    assert msg.header.stamp.nanosec == 2
    assert msg.header.frame_id == "cam"
    assert (msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step) == (480, 640, "rgb8", 1, 1920)
    assert msg.data.tolist() == [1, 2, 3]

    cloud = PointCloud2(fields=[PointField(name="x", offset=0, datatype=7, count=1)], is_dense=True)
    assert [f.name for f in cloud.fields] == ["x"]
    assert cloud.is_dense is True

    arr = UInt8MultiArray(layout=layout(("rows", 2, 6), ("cols", 3, 3), data_offset=4), data=[1, 2])
    assert [(d.label, d.size, d.stride) for d in arr.layout.dim] == [("rows", 2, 6), ("cols", 3, 3)]
    assert arr.layout.data_offset == 4


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_positional_arguments_are_refused(cls):
    first = next(iter(DEFAULTS[cls].values()))
    with pytest.raises(TypeError, match="positional"):
        cls(first)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_unknown_keyword_arguments_are_refused(cls):
    with pytest.raises(TypeError, match="no_such_field"):
        cls(no_such_field=1)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_unknown_attributes_cannot_be_set(cls):
    msg = cls()
    with pytest.raises(AttributeError):
        msg.no_such_field = 1


# (class, field, value, exception): every kind of field refuses a value of the wrong type.
WRONG_TYPES = [
    (Time, "sec", "1", TypeError),
    (Time, "sec", 1.5, TypeError),
    (Time, "nanosec", [1], TypeError),
    (Header, "stamp", 5, TypeError),
    (Header, "stamp", Duration(), TypeError),
    (Header, "frame_id", 5, TypeError),
    (Header, "frame_id", b"cam", TypeError),
    (Image, "header", Time(), TypeError),
    (Image, "encoding", ["rgb8"], TypeError),
    (Image, "data", np.array([object()]), TypeError),
    (Image, "data", "text", TypeError),
    (PointCloud2, "fields", [Header()], TypeError),
    (PointCloud2, "fields", PointField(), TypeError),
    (PointCloud2, "is_dense", 1, TypeError),
    (PointCloud2, "is_bigendian", "yes", TypeError),
    (MultiArrayLayout, "dim", [MultiArrayLayout()], TypeError),
    (Tensor, "shape", [1.5], TypeError),
    (Tensor, "shape", "12", TypeError),
    (UInt64MultiArray, "data", np.arange(3, dtype=np.int64), TypeError),
]


@pytest.mark.parametrize(
    "cls,field,value,exc", WRONG_TYPES, ids=[f"{c.__name__}.{f}={v!r}"[:60] for c, f, v, _ in WRONG_TYPES]
)
def test_assigning_a_wrong_type_raises_type_error(cls, field, value, exc):
    msg = cls()
    before = copy.deepcopy(msg)
    with pytest.raises(exc):
        setattr(msg, field, value)
    assert msg == before  # a refused assignment changes nothing
    with pytest.raises(exc):
        cls(**{field: value})


# (class, field, lowest, highest) of every integer field.
INTEGER_RANGES = [
    (Time, "sec", -(2**31), 2**31 - 1),
    (Time, "nanosec", 0, 2**32 - 1),
    (Duration, "sec", -(2**31), 2**31 - 1),
    (MultiArrayDimension, "size", 0, 2**32 - 1),
    (MultiArrayLayout, "data_offset", 0, 2**32 - 1),
    (Image, "height", 0, 2**32 - 1),
    (Image, "is_bigendian", 0, 255),
    (PointField, "datatype", 0, 255),
    (PointCloud2, "row_step", 0, 2**32 - 1),
    (Tensor, "dtype_bits", 0, 255),
    (Tensor, "dtype_lanes", 0, 2**16 - 1),
    (Tensor, "byte_offset", 0, 2**64 - 1),
]


@pytest.mark.parametrize(
    "cls,field,low,high", INTEGER_RANGES, ids=[f"{c.__name__}.{f}" for c, f, _, _ in INTEGER_RANGES]
)
def test_integer_fields_take_their_whole_range_and_refuse_the_rest(cls, field, low, high):
    msg = cls()
    for good in (low, high):
        setattr(msg, field, good)
        assert getattr(msg, field) == good
        assert cls.deserialize(msg.serialize()) == msg
    for bad in (low - 1, high + 1):
        with pytest.raises(OverflowError):
            setattr(msg, field, bad)
        with pytest.raises(OverflowError):
            cls(**{field: bad})
    assert getattr(msg, field) == high


def test_int64_list_fields_refuse_values_outside_int64():
    with pytest.raises(OverflowError):
        Tensor(shape=[2**63])
    with pytest.raises(OverflowError):
        Tensor(strides=[-(2**63) - 1])


def test_integer_fields_take_numpy_integers():
    msg = Image(height=np.uint32(7), width=np.int64(9))
    assert (msg.height, msg.width) == (7, 9)


def test_nested_mutation_changes_the_message_in_place():
    msg = Image(header=header("cam", sec=1))
    msg.header.stamp.sec = 5
    msg.header.frame_id = "other"
    assert msg.header.stamp.sec == 5
    assert msg.header.frame_id == "other"
    assert msg == Image(header=header("other", sec=5))
    assert Image.deserialize(msg.serialize()).header.stamp.sec == 5

    cloud = PointCloud2(fields=[PointField(name="x")])
    cloud.fields[0].name = "y"
    assert cloud.fields[0].name == "y"
    assert PointCloud2.deserialize(cloud.serialize()).fields[0].name == "y"


def test_a_nested_message_set_on_two_parents_is_shared_like_a_python_object():
    stamp = Time(sec=1)
    a, b = Header(stamp=stamp), Header(stamp=stamp)
    stamp.sec = 9
    assert a.stamp.sec == 9 and b.stamp.sec == 9


def test_appending_to_a_list_field_changes_the_message():
    lay = MultiArrayLayout()
    lay.dim.append(MultiArrayDimension(label="x", size=3, stride=3))
    tensor = Tensor(shape=[1])
    tensor.shape.append(2)
    assert len(lay.dim) == 1
    assert tensor.shape == [1, 2]


# ------------------------------------------------------------------ equality and repr


@pytest.mark.parametrize("name", list(SAMPLES))
def test_equal_fields_compare_equal(name):
    a, b = SAMPLES[name](), SAMPLES[name]()
    assert a == b
    assert not (a != b)


MODIFICATIONS = [
    ("time", lambda m: setattr(m, "nanosec", m.nanosec + 1)),
    ("header", lambda m: setattr(m.stamp, "sec", 2)),
    ("header", lambda m: setattr(m, "frame_id", m.frame_id + "x")),
    ("layout", lambda m: setattr(m, "dim", m.dim[:2])),
    ("layout", lambda m: setattr(m.dim[1], "stride", 1)),
    ("image_rgb8", lambda m: setattr(m, "data", np.zeros(24, np.uint8))),
    ("image_rgb8", lambda m: setattr(m, "data", m.data[:-1])),
    ("image_rgb8", lambda m: setattr(m, "is_bigendian", 1)),
    ("point_cloud2", lambda m: setattr(m.fields[3], "datatype", 8)),
    ("point_cloud2", lambda m: setattr(m, "is_dense", False)),
    ("uint64_multi_array", lambda m: setattr(m, "data", m.data[::-1].copy())),
    ("tensor_float32", lambda m: setattr(m, "strides", [3, 1])),
]


@pytest.mark.parametrize("name,change", MODIFICATIONS, ids=[n for n, _ in MODIFICATIONS])
def test_messages_differing_in_one_field_compare_unequal(name, change):
    a, b = SAMPLES[name](), SAMPLES[name]()
    change(b)
    assert a != b
    assert not (a == b)


def test_messages_of_different_classes_compare_unequal():
    assert Time() != Duration()
    assert not (Time() == Duration())
    assert Header() != "std_msgs.msg.Header()"
    assert Image() != None  # noqa: E711 (the operator is what is tested)


def test_buffer_fields_compare_by_their_bytes():
    assert Image(data=b"ab") == Image(data=np.array([97, 98], np.uint8))
    assert Image(data=b"\x01\x00\x02\x00") == Image(data=np.array([1, 2], np.uint16))
    assert Image(data=b"ab") != Image(data=np.array([97, 98], np.uint16))
    strided = np.arange(10, dtype=np.uint8)[::2]
    assert Image(data=strided) == Image(data=[0, 2, 4, 6, 8])


def test_messages_are_unhashable_because_they_are_mutable():
    with pytest.raises(TypeError):
        hash(Header())


def test_repr_is_rclpy_style_with_nested_messages():
    msg = Image(header=Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"), height=1, width=2, data=b"ab")
    assert repr(Time(sec=1, nanosec=2)) == "builtin_interfaces.msg.Time(sec=1, nanosec=2)"
    assert repr(msg) == (
        "sensor_msgs.msg.Image(header=std_msgs.msg.Header(stamp=builtin_interfaces.msg.Time(sec=1, nanosec=2), "
        "frame_id='cam'), height=1, width=2, encoding='', is_bigendian=0, step=0, "
        "data=array([97, 98], dtype=uint8))"
    )
    cloud = PointCloud2(fields=[PointField(name="x")])
    assert "fields=[sensor_msgs.msg.PointField(name='x', offset=0, datatype=0, count=0)]" in repr(cloud)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_repr_names_the_ros_type_and_every_field(cls):
    package, _, name = ROS_TYPES[cls].split("/")
    text = repr(cls())
    assert text.startswith(f"{package}.msg.{name}(")
    for field in DEFAULTS[cls]:
        assert f"{field}=" in text


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_classes_live_in_their_ros_package_module(cls):
    package = ROS_TYPES[cls].split("/")[0]
    assert cls.__module__ == f"freight.msgs.{package}"


# ------------------------------------------------------------------ buffer fields


@pytest.mark.parametrize(
    "dtype",
    [
        np.uint8,
        np.int8,
        np.uint16,
        np.int32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
        np.complex64,
        np.bool_,
        np.dtype([("x", "<f4"), ("i", "<u2")]),
        np.dtype(">u4"),
    ],
    ids=str,
)
@pytest.mark.parametrize("cls", [Image, UInt8MultiArray, PointCloud2, Tensor], ids=lambda c: c.__name__)
def test_a_byte_field_takes_a_numpy_array_of_any_dtype_and_sends_its_bytes(cls, dtype):
    values = np.arange(12).reshape(3, 4).astype(dtype)
    msg = cls(data=values)
    assert msg.data is values  # kept as it is, not converted
    received = cls.deserialize(msg.serialize())
    assert received.data.dtype == np.uint8
    assert received.data.tobytes() == values.tobytes()
    assert received == msg


def test_a_byte_field_sends_a_non_contiguous_array_in_c_order():
    base = np.arange(24, dtype=np.uint16).reshape(4, 6)
    for view in (base[::2, 1::2], base.T, np.asfortranarray(base)):
        received = Image.deserialize(Image(data=view).serialize())
        assert received.data.tobytes() == np.ascontiguousarray(view).tobytes()


@pytest.mark.parametrize(
    "value,expected",
    [
        (b"\x00\x01\xff", [0, 1, 255]),
        (bytearray(b"ab"), [97, 98]),
        (memoryview(b"xyz")[1:], [121, 122]),
        (array.array("B", [3, 4]), [3, 4]),
        (array.array("H", [1, 258]), [1, 0, 2, 1]),  # the items' bytes, little-endian
        ([1, 2, 255], [1, 2, 255]),
        ((9, 8), [9, 8]),
        (range(3), [0, 1, 2]),
        ([], []),
        (b"", []),
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_byte_field_takes_bytes_like_objects_and_sequences(value, expected):
    msg = UInt8MultiArray(data=value)
    assert msg.data.dtype == np.uint8
    assert msg.data.tolist() == expected
    assert UInt8MultiArray.deserialize(msg.serialize()).data.tolist() == expected


def test_a_byte_field_views_a_bytearray_without_copying_it():
    backing = bytearray(b"abc")
    msg = Image(data=backing)
    backing[0] = ord("z")
    assert msg.data.tobytes() == b"zbc"


@pytest.mark.parametrize("value", [[256], [-1], [1, 2, 1000]])
def test_a_byte_field_refuses_numbers_that_are_not_bytes(value):
    with pytest.raises((OverflowError, TypeError, ValueError), match="out of bounds"):
        Image(data=value)


def test_a_uint64_field_keeps_a_uint64_array_as_it_is():
    values = np.array([0, 1, 2**64 - 1], np.uint64)
    msg = UInt64MultiArray(data=values)
    assert msg.data is values
    assert UInt64MultiArray.deserialize(msg.serialize()).data.tolist() == [0, 1, 2**64 - 1]


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.uint32, np.float64, np.dtype(">u8"), np.bool_], ids=str)
def test_a_uint64_field_refuses_arrays_of_another_dtype_naming_uint64(dtype):
    with pytest.raises(TypeError, match="uint64"):
        UInt64MultiArray(data=np.zeros(3, dtype))
    msg = UInt64MultiArray()
    with pytest.raises(TypeError, match=r"astype\(numpy.uint64\)"):
        msg.data = np.zeros(3, dtype)


def test_a_uint64_field_takes_python_integers_and_bytes_of_whole_words():
    assert UInt64MultiArray(data=[0, 2**64 - 1]).data.tolist() == [0, 2**64 - 1]
    assert UInt64MultiArray(data=array.array("Q", [5, 6])).data.tolist() == [5, 6]
    assert UInt64MultiArray(data=struct.pack("<QQ", 7, 2**63)).data.tolist() == [7, 2**63]
    with pytest.raises(ValueError, match="multiple of element size"):
        UInt64MultiArray(data=b"1234567")
    with pytest.raises((OverflowError, TypeError, ValueError)):
        UInt64MultiArray(data=[-1])
    with pytest.raises((OverflowError, TypeError, ValueError)):
        UInt64MultiArray(data=[2**64])


def test_received_buffer_fields_are_read_only():
    msg = Image.deserialize(Image(data=b"abc").serialize())
    assert msg.data.flags.writeable is False
    with pytest.raises(ValueError):
        msg.data[0] = 1
    msg.data = b"new"  # the message itself stays mutable
    assert msg.data.tobytes() == b"new"


# ------------------------------------------------------------------ CDR


@pytest.mark.parametrize("name", list(SAMPLES))
def test_serialize_then_deserialize_gives_an_equal_message(name):
    msg = SAMPLES[name]()
    data = msg.serialize()
    assert isinstance(data, bytes)
    assert data[:4] == b"\x00\x01\x00\x00"  # CDR little-endian encapsulation
    back = type(msg).deserialize(data)
    assert type(back) is type(msg)
    assert back == msg
    assert back.serialize() == data


@pytest.mark.parametrize("name", list(SAMPLES))
def test_deserialize_accepts_bytes_like_objects(name):
    msg = SAMPLES[name]()
    data = msg.serialize()
    cls = type(msg)
    for form in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert cls.deserialize(form) == msg


@pytest.mark.parametrize("name", list(SAMPLES))
def test_serialize_is_byte_exact_with_rosbags(rosbags_store, name):
    msg = SAMPLES[name]()
    typename = ROS_TYPES[type(msg)]
    expected = bytes(rosbags_store.serialize_cdr(to_rosbags(rosbags_store, typename, msg), typename))
    assert msg.serialize() == expected


@pytest.mark.parametrize("name", list(SAMPLES))
def test_rosbags_bytes_deserialize_to_the_same_message(rosbags_store, name):
    msg = SAMPLES[name]()
    typename = ROS_TYPES[type(msg)]
    theirs = bytes(rosbags_store.serialize_cdr(to_rosbags(rosbags_store, typename, msg), typename))
    assert type(msg).deserialize(theirs) == msg
    # DDS delivers a message padded to a multiple of 4 bytes.
    padded = theirs + b"\x00" * (-len(theirs) % 4)
    assert type(msg).deserialize(padded) == msg


@pytest.mark.parametrize("name", list(SAMPLES))
def test_rosbags_reads_freight_bytes_back_to_the_same_fields(rosbags_store, name):
    msg = SAMPLES[name]()
    typename = ROS_TYPES[type(msg)]
    theirs = rosbags_store.deserialize_cdr(msg.serialize(), typename)
    assert from_rosbags(rosbags_store, typename, theirs) == msg


def test_the_samples_cover_every_class():
    assert {type(make()) for make in SAMPLES.values()} == set(CLASSES)


# ------------------------------------------------------------------ malformed CDR


def test_malformed_message_error_is_a_value_error_and_a_freight_error():
    assert issubclass(freight.MalformedMessageError, ValueError)
    assert issubclass(freight.MalformedMessageError, freight.FreightError)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_deserialize_refuses_empty_input_and_a_foreign_encapsulation(cls):
    good = cls().serialize()
    with pytest.raises(freight.MalformedMessageError, match=ROS_TYPES[cls].split("/")[-1]):
        cls.deserialize(b"")
    with pytest.raises(freight.MalformedMessageError, match="encapsulation"):
        cls.deserialize(b"XCDR" + good[4:])


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_truncation_of_a_message_is_refused(name):
    msg = SAMPLES[name]()
    data = msg.serialize()
    cls = type(msg)
    for end in range(len(data)):
        with pytest.raises(freight.MalformedMessageError):
            cls.deserialize(data[:end])


def test_trailing_bytes_beyond_padding_are_refused():
    data = Image(data=b"abc").serialize()
    with pytest.raises(freight.MalformedMessageError, match="after the message"):
        Image.deserialize(data + b"\x00" * 8)


CDR_LE = b"\x00\x01\x00\x00"
EMPTY_HEADER = struct.pack("<iiI", 0, 0, 1) + b"\x00" + b"\x00" * 3  # stamp, frame_id "", padding

#: Length prefixes that promise far more than the input holds: a decoder that
#: trusted them would allocate gigabytes (or overflow computing the size).
HUGE_LENGTHS = [
    ("header_frame_id", Header, CDR_LE + struct.pack("<iiI", 0, 0, 0xFFFFFFFF) + b"ab"),
    (
        "image_data",
        Image,
        CDR_LE
        + EMPTY_HEADER
        + struct.pack("<III", 0, 0, 1)
        + b"\x00\x00\x00\x00"
        + struct.pack("<II", 0, 0xFFFFFFF0)
        + b"abcd",
    ),
    ("layout_dims", MultiArrayLayout, CDR_LE + struct.pack("<I", 0xFFFFFFFF) + b"\x00" * 16),
    ("uint64_words", UInt64MultiArray, CDR_LE + struct.pack("<III", 0, 0, 0x20000001) + b"\x00" * 12),
    ("uint64_words_max", UInt64MultiArray, CDR_LE + struct.pack("<III", 0, 0, 0xFFFFFFFF) + b"\x00" * 12),
    ("cloud_fields", PointCloud2, CDR_LE + EMPTY_HEADER + struct.pack("<III", 0, 0, 0x7FFFFFFF) + b"\x00" * 64),
    ("tensor_shape", Tensor, CDR_LE + struct.pack("<BBHI", 0, 0, 0, 0xFFFFFFFF) + b"\x00" * 64),
    ("tensor_shape_large", Tensor, CDR_LE + struct.pack("<BBHI", 0, 0, 0, 0x10000000) + b"\x00" * 64),
]


@pytest.mark.parametrize("cls,data", [(c, d) for _, c, d in HUGE_LENGTHS], ids=[n for n, _, _ in HUGE_LENGTHS])
def test_a_huge_length_prefix_is_refused_without_allocating_it(cls, data):
    with pytest.raises(freight.MalformedMessageError, match="length"):
        cls.deserialize(data)


@pytest.mark.parametrize(
    "cls,data,what",
    [
        (Header, CDR_LE + struct.pack("<iiI", 0, 0, 2) + b"a\x01", "NUL"),
        (Header, CDR_LE + struct.pack("<iiI", 0, 0, 3) + b"\xff\xfe\x00", "UTF-8"),
        (PointCloud2, CDR_LE + EMPTY_HEADER + struct.pack("<III", 0, 0, 0) + b"\x02" + b"\x00" * 15, "boolean"),
    ],
    ids=["string_without_nul", "string_not_utf8", "bool_not_0_or_1"],
)
def test_invalid_values_are_refused(cls, data, what):
    with pytest.raises(freight.MalformedMessageError, match=what):
        cls.deserialize(data)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_random_bytes_never_crash_deserialize(cls):
    rng = random.Random(f"freight-{cls.__name__}")
    valid = [make().serialize() for make in SAMPLES.values() if type(make()) is cls]
    for i in range(300):
        if i % 2:
            data = CDR_LE + rng.randbytes(rng.randrange(0, 96))
        else:
            # A valid message with a few bytes flipped: lengths and bools go wrong.
            data = bytearray(rng.choice(valid))
            for _ in range(rng.randrange(1, 4)):
                if len(data) > 4:
                    data[rng.randrange(4, len(data))] = rng.randrange(256)
            data = bytes(data)
        try:
            msg = cls.deserialize(data)
        except freight.MalformedMessageError:
            continue
        # What decodes is a message that encodes again.
        assert type(msg).deserialize(msg.serialize()) == msg


def test_deserialize_refuses_a_str_with_a_type_error():
    with pytest.raises(TypeError):
        Header.deserialize("not bytes")


# ------------------------------------------------------------------ pickling and copying


@pytest.mark.parametrize("name", list(SAMPLES))
def test_pickle_round_trip(name):
    msg = SAMPLES[name]()
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(msg, protocol=protocol))
        assert type(back) is type(msg)
        assert back == msg


def test_pickle_round_trip_of_a_received_message():
    received = Image.deserialize(SAMPLES["image_rgb8"]().serialize())
    assert pickle.loads(pickle.dumps(received)) == received


def test_deepcopy_is_independent_of_the_original():
    msg = SAMPLES["point_cloud2"]()
    clone = copy.deepcopy(msg)
    assert clone == msg
    clone.header.frame_id = "changed"
    clone.fields[0].name = "changed"
    assert msg.header.frame_id == "lidar"
    assert msg.fields[0].name == "x"


# ------------------------------------------------------------------ tensors


def received(tensor):
    """`tensor` as a subscriber gets it: decoded from its CDR, data read-only."""
    return Tensor.deserialize(tensor.serialize())


@pytest.mark.parametrize(
    "dtype",
    [
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
    ],
    ids=lambda d: np.dtype(d).name,
)
def test_from_numpy_then_to_numpy_gives_the_array_back(dtype):
    values = (np.arange(24) - 5).astype(dtype).reshape(2, 3, 4)
    tensor = tensor_msgs.from_numpy(values)
    kind_code = {"i": 0, "u": 1, "f": 2}[values.dtype.kind]
    assert (tensor.dtype_code, tensor.dtype_bits, tensor.dtype_lanes) == (kind_code, values.itemsize * 8, 1)
    assert tensor.shape == [2, 3, 4]
    assert tensor.strides == [] and tensor.byte_offset == 0
    view = tensor_msgs.to_numpy(received(tensor))
    assert view.dtype == values.dtype
    assert view.shape == values.shape
    np.testing.assert_array_equal(view, values)


def test_to_numpy_of_a_received_tensor_is_a_read_only_view_of_its_data():
    tensor = received(tensor_msgs.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)))
    view = tensor_msgs.to_numpy(tensor)
    assert view.flags.writeable is False
    assert np.shares_memory(view, tensor.data)
    with pytest.raises(ValueError):
        view[0, 0] = 1


def test_from_numpy_of_a_non_contiguous_array_sends_it_in_c_order():
    values = np.arange(12, dtype=np.int32).reshape(3, 4).T
    view = tensor_msgs.to_numpy(received(tensor_msgs.from_numpy(values)))
    np.testing.assert_array_equal(view, values)


def test_from_numpy_with_data_uses_the_given_buffer():
    values = np.ones((2, 2), np.float32)
    backing = np.zeros(16, np.uint8)
    tensor = tensor_msgs.from_numpy(values, data=backing)
    assert tensor.data is backing
    assert tensor.shape == [2, 2]


@pytest.mark.parametrize("dtype", [np.bool_, np.complex64, object, "U3"], ids=str)
def test_from_numpy_refuses_dtypes_without_a_dlpack_integer_or_float_code(dtype):
    with pytest.raises(TypeError):
        tensor_msgs.from_numpy(np.zeros(3, dtype))


def test_to_numpy_follows_element_strides_and_offset():
    data = np.arange(8, dtype=np.float32)
    tensor = Tensor(dtype_code=2, dtype_bits=32, dtype_lanes=1, shape=[3, 2], strides=[1, 3], byte_offset=8, data=data)
    view = tensor_msgs.to_numpy(received(tensor))
    np.testing.assert_array_equal(view, data[2:].reshape(2, 3).T)


def test_to_numpy_of_a_scalar_and_of_an_empty_tensor():
    scalar = tensor_msgs.to_numpy(
        received(Tensor(dtype_code=0, dtype_bits=16, dtype_lanes=1, shape=[], data=np.array([-3], np.int16)))
    )
    assert scalar.shape == () and scalar == -3
    empty = tensor_msgs.to_numpy(received(Tensor(dtype_code=2, dtype_bits=64, dtype_lanes=1, shape=[0, 5])))
    assert empty.shape == (0, 5) and empty.dtype == np.float64


def float32_tensor(**fields):
    base = {
        "dtype_code": 2,
        "dtype_bits": 32,
        "dtype_lanes": 1,
        "shape": [2, 3],
        "strides": [],
        "byte_offset": 0,
        "data": bytes(24),
    }
    base.update(fields)
    return received(Tensor(**base))


#: Tensors whose shape, strides or offset reach outside their 24 data bytes, as
#: a hostile or broken peer could send them.
HOSTILE_TENSORS = {
    "shape_too_big": {"shape": [3, 3]},
    "negative_extent": {"shape": [-1, 6]},
    "shape_product_overflows": {"shape": [2**62, 2**62]},
    "shape_int64_max": {"shape": [2**63 - 1]},
    "offset_past_end": {"shape": [6], "byte_offset": 4},
    "offset_far_past_end": {"shape": [1], "byte_offset": 2**40},
    "empty_data_scalar": {"shape": [], "data": b""},
    "empty_shape_far_offset": {"shape": [0], "data": b"", "byte_offset": 2**40},
    "stride_past_end": {"strides": [4, 1]},
    "stride_huge": {"strides": [2**62, 1]},
    "stride_int64_max": {"strides": [2**63 - 1, 1]},
    "negative_stride_before_start": {"strides": [-3, 1]},
    "strides_shorter_than_shape": {"strides": [1]},
}


@pytest.mark.parametrize("fields", list(HOSTILE_TENSORS.values()), ids=list(HOSTILE_TENSORS))
def test_to_numpy_refuses_tensors_that_reach_outside_their_data(fields):
    with pytest.raises(ValueError, match="does not fit"):
        tensor_msgs.to_numpy(float32_tensor(**fields))


@pytest.mark.parametrize("offset", [2**63, 2**64 - 1])
def test_to_numpy_refuses_an_offset_beyond_int64_with_value_error(offset):
    with pytest.raises(ValueError, match="does not fit"):
        tensor_msgs.to_numpy(float32_tensor(byte_offset=offset))


def test_to_numpy_accepts_a_negative_stride_that_stays_inside_the_data():
    data = np.arange(6, dtype=np.float32)
    view = tensor_msgs.to_numpy(float32_tensor(shape=[6], strides=[-1], byte_offset=20, data=data))
    np.testing.assert_array_equal(view, data[::-1])


@pytest.mark.parametrize(
    "fields",
    [{"dtype_code": 2, "dtype_lanes": 2}, {"dtype_code": 4}, {"dtype_code": 6}, {"dtype_bits": 7}],
    ids=["two_lanes", "bfloat", "bool", "seven_bits"],
)
def test_to_numpy_refuses_dtypes_numpy_has_no_equivalent_for(fields):
    with pytest.raises(TypeError):
        tensor_msgs.to_numpy(float32_tensor(**fields))


def test_to_numpy_never_misreads_a_128_bit_float():
    quad_one = (0x3FFF << 112).to_bytes(16, "little")  # 1.0 in IEEE binary128
    tensor = float32_tensor(dtype_bits=128, shape=[1], data=quad_one)
    try:
        view = tensor_msgs.to_numpy(tensor)
    except TypeError:
        return  # refusing is fine
    assert view[0] == 1.0
