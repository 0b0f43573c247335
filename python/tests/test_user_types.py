"""Message and service types of a user's own package from Python: the
modules ``freight msg python`` generates (classes made from the types'
definitions), their CDR against the built-in types' (generated Rust), the
checks a publish makes, and messages and calls across processes with the
C++ API's types of the same files (which its own tests hold to the Rust ones).
"""

import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import freight
from conftest import FREIGHT_BIN, REPO
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import MultiArrayDimension, MultiArrayLayout, UInt8MultiArray
from support import TIMEOUT, Child, array_address, take, wait_for_subscriptions

PACKAGE = REPO / "crates" / "freight-msg-gen" / "tests" / "msgs" / "freight_test_msgs"
CPP_PROGRAM = REPO / "crates" / "freight-c" / "tests" / "cpp" / "user_types.cpp"
LIBRARY_DIR = REPO / "target" / "release"


def _generate(kind, out):
    done = subprocess.run(
        [FREIGHT_BIN, "msg", kind, "--out", out, PACKAGE], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"freight msg {kind}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def user_msgs(tmp_path_factory):
    """The generated package ``freight_test_msgs``, imported as a user would."""
    out = tmp_path_factory.mktemp("python_msgs")
    printed = _generate("python", out)
    assert f"{out}/freight_test_msgs/msg.py" in printed, printed
    sys.path.insert(0, str(out))
    try:
        import freight_test_msgs.msg
        import freight_test_msgs.srv

        yield freight_test_msgs
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def cpp_program(tmp_path_factory):
    """cpp/user_types.cpp of the C++ API's tests, built against the header
    ``freight msg cpp`` generates from the same package."""
    out = tmp_path_factory.mktemp("cpp_msgs")
    _generate("cpp", out)
    exe = out / "user_types"
    compiler = shutil.which("c++")
    assert compiler, "no C++ compiler (`make deps` installs one)"
    built = subprocess.run(
        [compiler, "-std=c++17", "-O1", f"-I{REPO / 'crates/freight-c/include'}", f"-I{out}", CPP_PROGRAM,
         "-o", exe, f"-L{LIBRARY_DIR}", "-lfreight_c", f"-Wl,-rpath,{LIBRARY_DIR}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return exe


def _everything(msgs, k):
    """Message k, as ``everything(k)`` in cpp/user_types.cpp makes it."""
    Everything, Inner = msgs.msg.Everything, msgs.msg.Inner
    m = Everything()
    m.header.frame_id = f"frame-{k}"
    m.header.stamp.sec = k
    m.inner = Inner(value=k, label="in")
    m.inners = [Inner(value=1, label="a"), Inner(value=2, label="b")]
    m.fixed_inners[1] = Inner(value=9, label="nine")
    m.data = ((np.arange(1 << 20) * 7 + k) % 256).astype(np.uint8)
    m.floats = np.array([0.5, 1.5 * k], dtype=np.float32)
    m.chars = np.frombuffer(b"hi", dtype=np.uint8)
    m.flags = [True, False, True]
    m.names = ["x", "y"]
    m.fixed[2] = 3.5
    m.covariance[35] = float(k)
    m.bounded = np.array([-1, 2], dtype=np.int16)
    m.type = "kind"
    m.loop = 7
    m.pose.pose.position.x = 1.25
    return m


def _summary(k):
    """What cpp/user_types.cpp prints of ``everything(k)``."""
    total = int((((np.arange(1 << 20) * 7 + k) % 256)).sum())
    return (
        f"frame-{k} inner={k} inners=2 fixed_inner=nine data=1048576/{total} floats={1.5 * k:.6f} chars=hi "
        f"names=y covariance={float(k):.6f} bounded=-1 type=kind x=1.250000"
    )


def test_generated_classes_hold_the_fields_defaults_and_constants_of_the_msg_files(user_msgs):
    Everything, Inner = user_msgs.msg.Everything, user_msgs.msg.Inner
    m = Everything()
    assert type(m.header) is freight.msgs.std_msgs.Header, "a built-in type's field holds the built-in class"
    assert type(m.inner) is Inner and m.inner.label == ""
    assert m.with_default == 42 and m.pair_default.tolist() == [1.5, -2.0]
    assert m.covariance.shape == (36,) and m.data.dtype == np.uint8 and m.floats.dtype == np.float32
    assert m.bounded == [] and m.inners == [], "other sequences are lists, as in the built-in classes"
    assert m.pose.pose.orientation.w == 1.0, "the built-in Quaternion's default"
    assert (Everything.NEG, Everything.BIG, Everything.GREETING) == (-3, 2**64 - 1, "hello # not a comment")
    assert Everything.get_fields_and_field_types()["short_names"] == "string<=4[<=2]"
    assert repr(Inner(value=3, label="x")) == "freight_test_msgs.msg.Inner(value=3, label='x')"
    detect = user_msgs.srv.Detect
    assert type(detect.Request().image) is Image and detect.Request().min_score == 0.5
    assert freight.msgs.message_class("freight_test_msgs/msg/Inner", "int32 value\nstring<=8 label\n") is Inner
    with pytest.raises(TypeError, match="has no field colour"):
        Inner(colour=1)


def test_cdr_is_the_built_in_types_and_round_trips(user_msgs):
    # A type of one's own with UInt8MultiArray's fields writes what the
    # built-in (generated Rust) type writes, byte for byte, and reads it.
    layout_def = "\n".join(
        ["std_msgs/MultiArrayLayout layout", "uint8[] data", "=" * 80, "MSG: std_msgs/MultiArrayLayout",
         "std_msgs/MultiArrayDimension[] dim", "uint32 data_offset", "=" * 80, "MSG: std_msgs/MultiArrayDimension",
         "string label", "uint32 size", "uint32 stride", ""]
    )  # fmt: skip
    Blob = freight.msgs.message_class("freight_pytest_msgs/msg/Blob", layout_def)
    dims = [MultiArrayDimension(label="rows", size=2, stride=6), MultiArrayDimension(label="cols", size=3, stride=3)]
    built_in = UInt8MultiArray(layout=MultiArrayLayout(dim=dims, data_offset=1), data=np.arange(6, dtype=np.uint8))
    mine = Blob(layout=MultiArrayLayout(dim=dims, data_offset=1), data=bytes(range(6)))
    assert mine.serialize() == built_in.serialize()
    back = Blob.deserialize(built_in.serialize())
    assert back == mine and back.layout.dim[1].label == "cols" and back.data.tolist() == list(range(6))

    everything = _everything(user_msgs, 4)
    again = user_msgs.msg.Everything.deserialize(everything.serialize())
    assert again == everything
    assert pickle.loads(pickle.dumps(everything)) == everything
    with pytest.raises(freight.MalformedMessageError):
        user_msgs.msg.Everything.deserialize(everything.serialize()[:100])


def test_values_the_types_and_bounds_do_not_allow_are_refused_where_they_are_set(user_msgs, node, topic):
    Everything, Inner = user_msgs.msg.Everything, user_msgs.msg.Inner
    pub = node.create_publisher(Everything, topic, 5)
    # Given to the constructor or assigned, as rclpy's setters check them.
    cases = [
        ("short_names", lambda: ["a", "b", "c"], ValueError, r"field `short_names`: a sequence \[<=2\] holds at most 2"),
        ("short_names", lambda: ["toolong"], ValueError, r"field `short_names\[0\]`: a string<=4"),
        ("loop", lambda: 256, ValueError, "Everything: field `loop`: 256 is out of the range of uint8"),
        ("inner", freight.msgs.std_msgs.Header, TypeError, "Everything: field `inner`: takes a freight_test_msgs/msg/Inner"),
        ("fixed", lambda: [1.0, 2.0], ValueError, "takes 3 elements, not 2"),
        ("floats", lambda: np.zeros(4, dtype=np.float64), TypeError, "convert it with arr.astype"),
        ("names", lambda: "xy", TypeError, "takes a sequence, not str"),
    ]
    for field, value, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            Everything(**{field: value()})
        msg = Everything()
        before = repr(getattr(msg, field))
        with pytest.raises(error, match=pattern):
            setattr(msg, field, value())
        assert repr(getattr(msg, field)) == before, f"a refused {field} was stored"
    for label, pattern in (("nine char", "holds at most 8 bytes, not 9"), ("é" * 5, "holds at most 8 bytes, not 10")):
        with pytest.raises(ValueError, match="Inner: field `label`: a string<=8 " + pattern):
            Inner(label=label)
        with pytest.raises(ValueError, match="Inner: field `label`: a string<=8 " + pattern):
            Everything().inner.label = label
    with pytest.raises(AttributeError, match="Everything has no field colour; its fields are header, stamp"):
        Everything().colour = 1
    # Stored as the constructor stores it: a fixed-size array of numbers as numpy.
    msg = Everything()
    msg.fixed = [1.0, 2.0, 3.0]
    assert msg.fixed.dtype == np.float64 and list(msg.fixed) == [1.0, 2.0, 3.0]
    # Changed in place, past the setters: refused when published or serialized.
    in_place = [
        (lambda m: m.short_names.extend(["a", "b", "c"]), ValueError, r"field `short_names`: a sequence \[<=2\]"),
        (lambda m: m.short_names.append("toolong"), ValueError, r"field `short_names\[0\]`: a string<=4"),
        (lambda m: m.names.append(7), TypeError, r"Everything: field `names\[0\]`"),
        (lambda m: m.inners.append(freight.msgs.std_msgs.Header()), TypeError, r"field `inners\[0\]`: takes a"),
        (lambda m: m.few_inners.extend([Inner()] * 4), ValueError, r"field `few_inners`: a sequence \[<=3\]"),
        (lambda m: object.__setattr__(m.fixed_inners[1], "label", "nine char"), ValueError, r"`fixed_inners\[1\]\.label`"),
    ]
    for change, error, pattern in in_place:
        msg = Everything()
        change(msg)
        with pytest.raises(error, match=pattern):
            pub.publish(msg)
        with pytest.raises(error, match=pattern):
            msg.serialize()
    with pytest.raises(TypeError, match="this publisher sends freight_test_msgs/msg/Everything"):
        pub.publish(Inner())
    with pytest.raises(TypeError, match="has 4 buffer fields; loan"):
        pub.loan(16, np.uint8)


def test_a_loan_of_a_users_type_is_sent_without_a_copy(node, topic):
    Frame = freight.msgs.message_class("freight_pytest_msgs/msg/Frame", "uint32 id\nfloat32[] data\n")
    pub = node.create_publisher(Frame, topic, 5)
    sub = node.create_subscription(Frame, topic, None, 5)
    arr = pub.loan((32, 32), np.float32)
    arr[:] = np.arange(1024, dtype=np.float32).reshape(32, 32)
    pub.publish(Frame(id=3, data=arr))
    assert arr.flags.writeable is False and arr.base.published
    got = take(sub)
    assert got.id == 3 and got.data.tolist() == list(range(1024))
    assert array_address(got.data) == arr.base.address, "the subscriber views the loan itself"
    with pytest.raises(TypeError, match="loan it with dtype numpy.float32"):
        pub.loan(8, np.float64)

    # A loan under a built-in type's field (sensor_msgs/Image's data) too.
    Shot = freight.msgs.message_class(
        "freight_pytest_msgs/msg/Shot",
        "uint32 id\nsensor_msgs/Image image\n" + _IMAGE_DEFINITIONS,
    )
    pub = node.create_publisher(Shot, f"{topic}_shot", 5)
    sub = node.create_subscription(Shot, f"{topic}_shot", None, 5)
    pixels = pub.loan(4 * 640 * 480, np.uint8)
    pixels[:] = 7
    pub.publish(Shot(id=1, image=Image(width=640, height=480, encoding="bgra8", data=pixels)))
    got = take(sub)
    assert got.image.encoding == "bgra8" and array_address(got.image.data) == pixels.base.address
    assert int(got.image.data.sum()) == 7 * 4 * 640 * 480


_IMAGE_DEFINITIONS = "\n".join(
    ["=" * 80, "MSG: sensor_msgs/Image", "std_msgs/Header header", "uint32 height", "uint32 width", "string encoding",
     "uint8 is_bigendian", "uint32 step", "uint8[] data", "=" * 80, "MSG: std_msgs/Header",
     "builtin_interfaces/Time stamp", "string frame_id", "=" * 80, "MSG: builtin_interfaces/Time", "int32 sec",
     "uint32 nanosec", ""]
)  # fmt: skip


def test_another_definition_of_a_known_type_is_refused(user_msgs):
    with pytest.raises(TypeError, match="another definition"):
        freight.msgs.message_class("freight_test_msgs/msg/Inner", "int64 value\n")
    with pytest.raises(TypeError, match="differs from freight's built-in one"):
        freight.msgs.message_class("std_msgs/msg/Header", "uint8 changed\n")
    assert freight.msgs.message_class("std_msgs/msg/Empty", "") is freight.msgs.std_msgs.Empty
    with pytest.raises(TypeError, match="freight_test_msgs/msg/Missing"):
        freight.msgs.message_class("freight_test_msgs/msg/Holder", "Missing m\n")


def test_messages_go_both_ways_between_python_and_the_cpp_types_of_the_same_files(user_msgs, cpp_program, node, topic):
    Everything = user_msgs.msg.Everything
    # C++ publishes, Python takes: every field as sent, the data in place.
    sub = node.create_subscription(Everything, f"{topic}_to_python", None, 10)
    with Child([cpp_program, "pub", f"{topic}_to_python", "3"], name="user_types pub") as cpp:
        for k in (1, 2, 3):
            cpp.expect(f"sent {k}")
            got = take(sub)
            assert got == _everything(user_msgs, k), f"message {k}"
            assert not got.data.flags.writeable, "a received buffer field views shared memory"
    # Python publishes, C++ takes and prints what it holds.
    pub = node.create_publisher(Everything, f"{topic}_to_cpp", 10)
    with Child([cpp_program, "sub", f"{topic}_to_cpp", "3"], name="user_types sub") as cpp:
        cpp.expect("ready")
        wait_for_subscriptions(pub, 1)
        for k in (1, 2, 3):
            pub.publish(_everything(user_msgs, k))
            assert " ".join(cpp.expect("got shm")[2:]) == _summary(k)


def test_services_of_a_users_srv_answer_and_call_cpp(user_msgs, cpp_program, node, topic):
    Detect = user_msgs.srv.Detect
    # A Python client of the C++ server: an image in the request, masks back.
    client = node.create_client(Detect, f"{topic}_cpp_server")
    with Child([cpp_program, "serve", f"{topic}_cpp_server"], name="user_types serve") as cpp:
        cpp.expect("ready")
        assert client.wait_for_service(timeout_sec=TIMEOUT)
        pixels = (np.arange(1 << 20) % 253).astype(np.uint8)
        reply = client.call(Detect.Request(image=Image(width=640, data=pixels)), timeout_sec=TIMEOUT)
        assert reply.count == 640 and np.array_equal(reply.masks, pixels[::-1])

    # A C++ client of a Python server.
    def detect(request, response):
        response.count = request.image.width * 10
        response.masks = np.full(5, request.image.data[2], dtype=np.uint8)
        return response

    node.create_service(Detect, f"{topic}_py_server", detect)
    executor = freight.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        with Child([cpp_program, "call", f"{topic}_py_server", "2"], name="user_types call") as cpp:
            for k in (1, 2):
                assert cpp.expect("reply") == ["reply", str(k * 10), "5", str(k)]
            assert cpp.wait() == 0
    finally:
        executor.shutdown()
        spinner.join(TIMEOUT)


def test_the_generated_modules_import_in_a_fresh_interpreter(user_msgs, tmp_path):
    # What a user's script does: the generated folder on PYTHONPATH, nothing else.
    out = pathlib.Path(user_msgs.__file__).parents[1]
    script = (
        "from freight_test_msgs.msg import Everything\n"
        "from freight_test_msgs.srv import Detect\n"
        "print(Everything(loop=3).loop, Detect.Request().min_score)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "0.5"]
