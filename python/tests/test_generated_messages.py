"""Every built-in message class, as generated from ``interfaces/*/msg/*.msg``.

``test_messages.py`` covers the classes most used (images, clouds, tensors) in
depth; this file holds every generated class to the same basic contract: its
``.pyi`` stub names exactly its fields, a message with every field set
survives CDR both ways, byte for byte as rosbags (an independent serializer)
writes it, and across processes over shared memory. Then what is new with the
generated classes: fixed-size arrays of numbers as numpy arrays (rclpy's
behaviour), ``string[]`` lists, and the ``.msg`` constants as class attributes.
"""

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from support import TIMEOUT, take, wait_for_subscriptions

import freight.msgs
from freight.msgs import builtin_interfaces, geometry_msgs, sensor_msgs, std_msgs, tensor_msgs
from freight.msgs.geometry_msgs import Pose, PoseStamped, PoseWithCovariance, Quaternion
from freight.msgs.sensor_msgs import Imu, JointState, NavSatStatus, PointField

MODULES = [builtin_interfaces, std_msgs, geometry_msgs, sensor_msgs, tensor_msgs]
MSGS_DIR = pathlib.Path(freight.msgs.__file__).parent


def _classes():
    found = []
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and obj not in found:
                found.append(obj)
    return found


CLASSES = _classes()


def _package(cls):
    return cls.__module__.rsplit(".", 1)[1]


def _stub_fields():
    """``{(package, class name): {field: annotation}}`` from the ``.pyi`` stubs,
    in declaration order (constants, which are ``ClassVar``, left out)."""
    fields = {}
    for stub in MSGS_DIR.glob("*.pyi"):
        package = stub.stem.lstrip("_")
        for node in ast.parse(stub.read_text()).body:
            if isinstance(node, ast.ClassDef):
                fields[(package, node.name)] = {
                    item.target.id: ast.unparse(item.annotation)
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and not ast.unparse(item.annotation).startswith("ClassVar")
                }
    return fields


STUBS = _stub_fields()


def _fields(cls):
    return STUBS[(_package(cls), cls.__name__)]


def _ros_type(cls):
    return repr(cls()).split("(", 1)[0].replace(".", "/")


def _class_named(name, package):
    module = dict((m.__name__.rsplit(".", 1)[1], m) for m in MODULES)[package]
    return getattr(module, name)


def _filled(cls, seed=1):
    """A message of `cls` with every field set to a value that is not its
    default: numbers from `seed`, a fixed array counting up, a buffer of three
    elements, a list of one filled element."""
    msg = cls()
    for field, annotation in _fields(cls).items():
        value = getattr(msg, field)
        if isinstance(value, bool):
            new = True
        elif isinstance(value, int):
            new = seed % 100 + 1
        elif isinstance(value, float):
            new = seed + 0.5
        elif isinstance(value, str):
            new = f"f{seed}é"
        elif isinstance(value, np.ndarray):
            n = len(value) if len(value) else 3
            new = (np.arange(n) + seed).astype(value.dtype)
        elif isinstance(value, list):
            element = annotation[len("list[") : -1]
            if element == "str":
                new = [f"s{seed}", ""]
            elif element in ("int", "float", "bool"):
                new = [{"int": seed, "float": seed + 0.25, "bool": True}[element]]
            else:
                package, _, name = element.rpartition(".")
                new = [_filled(_class_named(name, package or _package(cls)), seed + 1)]
        else:
            new = _filled(type(value), seed + 1)
        setattr(msg, field, new)
    return msg


@pytest.fixture(scope="module")
def rosbags_store():
    typesys = pytest.importorskip("rosbags.typesys", reason="the CDR comparison needs rosbags (pip install rosbags)")
    store = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
    msg = (pathlib.Path(__file__).parents[2] / "interfaces/tensor_msgs/msg/ExperimentalTensor.msg").read_text()
    store.register(typesys.get_types_from_msg(msg, "tensor_msgs/msg/ExperimentalTensor"))
    return store


def test_every_package_module_and_stub_lists_the_same_classes():
    assert len(CLASSES) > 50
    for module in MODULES:
        package = module.__name__.rsplit(".", 1)[1]
        classes = {c.__name__ for c in map(module.__dict__.get, module.__all__) if isinstance(c, type)}
        assert classes == {name for (p, name) in STUBS if p == package}, package


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_stub_names_exactly_the_fields_of_the_class(cls):
    descriptors = {name for name, v in vars(cls).items() if type(v).__name__ == "getset_descriptor"}
    assert set(_fields(cls)) == descriptors
    text = repr(cls())
    for field in _fields(cls):
        assert f"{field}=" in text


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_filled_message_survives_cdr_and_differs_from_the_default(cls):
    msg = _filled(cls)
    assert cls.deserialize(msg.serialize()) == msg
    if _fields(cls):
        assert msg != cls()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_rosbags_reads_and_writes_the_same_bytes(rosbags_store, cls):
    data = _filled(cls).serialize()
    typename = _ros_type(cls)
    theirs = rosbags_store.deserialize_cdr(data, typename)
    assert bytes(rosbags_store.serialize_cdr(theirs, typename)) == data


PUBLISH_ONE = """
import sys, freight
from freight.msgs import {package} as module
cls = getattr(module, sys.argv[1])
msg = cls.deserialize(bytes.fromhex(sys.argv[2]))
ctx = freight.Context(local_only=True)
node = freight.Node("generated_publisher", context=ctx)
pub = node.create_publisher(cls, sys.argv[3], 10)
sys.path.insert(0, sys.argv[4])
from support import wait_for_subscriptions
wait_for_subscriptions(pub, 1)
pub.publish(msg)
sys.stdin.read()
"""


@pytest.mark.parametrize("cls", [Imu, JointState, PoseWithCovariance], ids=lambda c: c.__name__)
def test_a_generated_message_arrives_intact_from_another_process(cls, node, topic):
    msg = _filled(cls)
    sub = node.create_subscription(cls, topic, None, 10)
    code = PUBLISH_ONE.format(package=_package(cls))
    here = str(pathlib.Path(__file__).parent)
    child = subprocess.Popen(
        [sys.executable, "-c", code, cls.__name__, msg.serialize().hex(), topic, here], stdin=subprocess.PIPE
    )
    try:
        got = sub.take(TIMEOUT)
        assert got is not None, "nothing arrived from the publishing process"
        assert got == msg
    finally:
        child.stdin.close()
        assert child.wait(TIMEOUT) == 0


def test_a_generated_message_is_handed_over_in_the_process(node, topic):
    pub = node.create_publisher(Imu, topic, 10)
    sub = node.create_subscription(Imu, topic, None, 10)
    wait_for_subscriptions(pub, 1)
    msg = _filled(Imu)
    pub.publish(msg)
    assert take(sub) == msg


# ------------------------------------------------------------------ fixed arrays


def test_a_fixed_array_is_a_numpy_array_of_its_length_and_dtype():
    imu = Imu()
    assert isinstance(imu.orientation_covariance, np.ndarray)
    assert imu.orientation_covariance.dtype == np.float64
    assert imu.orientation_covariance.shape == (9,)
    assert not imu.orientation_covariance.any()
    assert PoseWithCovariance().covariance.shape == (36,)


def test_a_fixed_array_takes_any_sequence_of_its_length():
    imu = Imu()
    imu.orientation_covariance = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert imu.orientation_covariance.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    imu.orientation_covariance = np.eye(3).reshape(-1)
    assert Imu.deserialize(imu.serialize()).orientation_covariance.tolist() == np.eye(3).reshape(-1).tolist()


def test_changing_a_fixed_array_in_place_changes_the_message():
    imu = Imu()
    imu.orientation_covariance[0] = -1.0
    assert Imu.deserialize(imu.serialize()).orientation_covariance[0] == -1.0


def test_an_assigned_array_is_copied_not_shared():
    values = np.zeros(9)
    imu = Imu(orientation_covariance=values)
    values[0] = 5.0
    assert imu.orientation_covariance[0] == 0.0


@pytest.mark.parametrize(
    "value, exc",
    [
        ([0.0] * 8, ValueError),
        ([0.0] * 10, ValueError),
        (np.zeros((3, 3)), TypeError),
        ("123456789", TypeError),
        (["a"] * 9, ValueError),
        (None, TypeError),
    ],
    ids=["8 elements", "10 elements", "3x3", "a string", "strings", "None"],
)
def test_a_fixed_array_refuses_what_is_not_its_length_of_numbers(value, exc):
    imu = Imu()
    with pytest.raises(exc):
        imu.orientation_covariance = value
    assert imu.orientation_covariance.shape == (9,)


def test_fixed_arrays_compare_by_value():
    a, b = Imu(), Imu()
    assert a == b
    b.angular_velocity_covariance[4] = 1.0
    assert a != b


# ------------------------------------------------------------------ lists, constants


def test_a_string_list_takes_strings_and_refuses_other_items_on_serialize():
    js = JointState(name=["shoulder", "elbow"])
    assert JointState.deserialize(js.serialize()).name == ["shoulder", "elbow"]
    js.name.append(3)
    with pytest.raises(TypeError):
        js.serialize()


def test_msg_constants_are_class_attributes():
    assert PointField.FLOAT32 == 7 and PointField.INT8 == 1
    assert NavSatStatus.STATUS_NO_FIX == -1 and NavSatStatus.SERVICE_GALILEO == 8
    assert tensor_msgs.Tensor.DTYPE_FLOAT == 2
    assert PointField().FLOAT64 == 8


def test_msg_default_values_are_the_defaults_as_in_rclpy():
    # geometry_msgs/Quaternion: `float64 w 1`, the identity rotation.
    q = Quaternion()
    assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0)
    assert Pose().orientation.w == 1.0
    assert PoseStamped().pose.orientation.w == 1.0
    assert Quaternion(w=0.5).w == 0.5
    assert Quaternion.deserialize(Quaternion().serialize()).w == 1.0
