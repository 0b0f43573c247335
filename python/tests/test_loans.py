"""`Publisher.loan()`: memory lent by a publisher, written in place, published without a copy.

Everything here runs in one process, where a loan is heap memory handed to the
subscriptions by pointer: a zero-copy publish shows as the received array having
the loan's address.
"""

import gc
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import Header, MultiArrayDimension, UInt8MultiArray, UInt64MultiArray
from freight.msgs.tensor_msgs import Tensor
from support import array_address, take


@pytest.fixture
def pubsub(node, topic):
    """A publisher and a subscription of UInt8MultiArray on one topic."""
    return node.create_publisher(UInt8MultiArray, topic, 10), node.create_subscription(UInt8MultiArray, topic, None, 10)


@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((4, 5), np.uint8),
        ((2, 3, 4), np.float32),
        ((7,), np.int16),
        ((3, 1, 2), np.float64),
        ((5,), np.dtype([("x", "<f4"), ("id", "<u2")])),
    ],
    ids=["u8_2d", "f32_3d", "i16_1d", "f64_3d", "structured"],
)
def test_a_loan_is_a_writable_c_contiguous_array_of_the_shape_and_dtype(pubsub, shape, dtype):
    pub, _ = pubsub
    arr = pub.loan(shape, dtype)
    assert isinstance(arr, np.ndarray)
    assert arr.shape == shape
    assert arr.dtype == np.dtype(dtype)
    assert arr.flags.c_contiguous
    assert arr.flags.writeable
    assert isinstance(arr.base, freight.LoanedBuffer)
    assert arr.base.published is False
    assert arr.base.nbytes == arr.nbytes == len(arr.base)
    assert arr.base.address == array_address(arr)
    arr[...] = np.ones(shape, dtype)  # every byte is writable
    assert (arr == np.ones(shape, dtype)).all()


def test_a_shape_given_as_an_int_is_one_dimensional(pubsub):
    pub, _ = pubsub
    arr = pub.loan(12, np.uint8)
    assert arr.shape == (12,)
    assert pub.loan(3, "float32").shape == (3,)


def test_a_loan_published_is_received_without_a_copy_and_turns_read_only(pubsub):
    pub, sub = pubsub
    arr = pub.loan((4, 5), np.uint8)
    arr[:] = np.arange(20, dtype=np.uint8).reshape(4, 5)
    pub.publish(UInt8MultiArray(data=arr))

    assert arr.flags.writeable is False
    assert arr.base.published is True
    with pytest.raises(ValueError):
        arr[0, 0] = 1

    msg = take(sub)
    assert msg.data.tolist() == list(range(20))
    assert array_address(msg.data) == arr.base.address  # the subscriber views the loan itself
    assert msg.data.flags.writeable is False


def test_an_image_loan_keeps_its_pixels_and_small_fields(node, topic):
    pub = node.create_publisher(Image, topic, 5)
    sub = node.create_subscription(Image, topic, None, 5)
    frame = pub.loan((2, 3, 4), np.uint8)
    frame[:] = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    stamp_header = Header(frame_id="cam")
    stamp_header.stamp.sec = 42
    pub.publish(Image(header=stamp_header, height=2, width=3, encoding="rgba8", step=12, data=frame))
    msg = take(sub)
    assert (msg.height, msg.width, msg.encoding, msg.step) == (2, 3, "rgba8", 12)
    assert (msg.header.frame_id, msg.header.stamp.sec) == ("cam", 42)
    assert msg.data.reshape(2, 3, 4).tolist() == np.arange(24).reshape(2, 3, 4).tolist()
    assert array_address(msg.data) == frame.base.address


def test_a_loan_of_another_dtype_is_received_as_its_bytes(pubsub):
    pub, sub = pubsub
    arr = pub.loan((2, 2), np.float32)
    arr[:] = [[1.5, -2.0], [3.25, 0.0]]
    pub.publish(UInt8MultiArray(data=arr))
    msg = take(sub)
    assert msg.data.dtype == np.uint8 and msg.data.shape == (16,)
    assert msg.data.view(np.float32).tolist() == [1.5, -2.0, 3.25, 0.0]


def test_a_tensor_loan_round_trips_with_its_description(node, topic):
    from freight.msgs import tensor_msgs

    pub = node.create_publisher(Tensor, topic, 5)
    sub = node.create_subscription(Tensor, topic, None, 5)
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = pub.loan(values.shape, values.dtype)
    data[:] = values
    pub.publish(tensor_msgs.from_numpy(values, data=data))
    received = tensor_msgs.to_numpy(take(sub))
    np.testing.assert_array_equal(received, values)
    assert received.flags.writeable is False
    assert data.base.published is True


def test_a_uint64_loan_is_received_as_uint64(node, topic):
    pub = node.create_publisher(UInt64MultiArray, topic, 5)
    sub = node.create_subscription(UInt64MultiArray, topic, None, 5)
    words = pub.loan(3, np.uint64)
    words[:] = [0, 2**63, 2**64 - 1]
    pub.publish(UInt64MultiArray(data=words))
    msg = take(sub)
    assert msg.data.dtype == np.uint64
    assert msg.data.tolist() == [0, 2**63, 2**64 - 1]
    assert array_address(msg.data) == words.base.address


def test_publishing_the_same_loan_twice_raises_loan_error(pubsub):
    pub, sub = pubsub
    arr = pub.loan(4, np.uint8)
    arr[:] = 1
    msg = UInt8MultiArray(data=arr)
    pub.publish(msg)
    with pytest.raises(freight.LoanError, match="already published"):
        pub.publish(msg)
    with pytest.raises(freight.LoanError):
        pub.publish(UInt8MultiArray(data=arr))
    assert take(sub).data.tolist() == [1, 1, 1, 1]
    assert sub.take(timeout_sec=0) is None  # the refused publishes sent nothing


def test_loan_error_is_a_freight_error():
    assert issubclass(freight.LoanError, freight.FreightError)


@pytest.mark.parametrize(
    "part",
    [lambda a: a[2:], lambda a: a[::2], lambda a: a.reshape(2, 4), lambda a: a[:], lambda a: a.reshape(2, 4).T],
    ids=["tail", "strided", "reshaped", "full_slice", "transposed"],
)
def test_a_view_of_a_loan_is_published_by_copy_and_the_loan_stays_usable(pubsub, part):
    pub, sub = pubsub
    arr = pub.loan(8, np.uint8)
    arr[:] = np.arange(8, dtype=np.uint8)
    view = part(arr)
    pub.publish(UInt8MultiArray(data=view))
    msg = take(sub)
    assert msg.data.tobytes() == np.ascontiguousarray(view).tobytes()
    assert array_address(msg.data) != array_address(arr)  # a copy
    # The loan itself was not published: still writable, and publishable once.
    assert arr.base.published is False
    assert arr.flags.writeable
    arr[:] = 9
    del view  # else it could write after publish, and the loan would go by copy
    pub.publish(UInt8MultiArray(data=arr))
    again = take(sub)
    assert again.data.tolist() == [9] * 8
    assert array_address(again.data) == arr.base.address


def test_another_publishers_loan_is_published_by_copy(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 10)
    other = node.create_publisher(UInt8MultiArray, topic, 10)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 10)
    arr = other.loan(6, np.uint8)
    arr[:] = 5
    pub.publish(UInt8MultiArray(data=arr))
    msg = take(sub)
    assert msg.data.tolist() == [5] * 6
    assert array_address(msg.data) != array_address(arr)
    assert arr.base.published is False and arr.flags.writeable
    other.publish(UInt8MultiArray(data=arr))  # its own publisher still sends it without a copy
    assert array_address(take(sub).data) == arr.base.address


def test_a_loan_for_another_message_type_is_published_by_copy(node, topic):
    images = node.create_publisher(Image, topic + "_image", 5)
    arrays = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    frame = images.loan(4, np.uint8)
    frame[:] = 3
    arrays.publish(UInt8MultiArray(data=frame))
    assert take(sub).data.tolist() == [3] * 4
    assert frame.base.published is False


def test_a_uint64_loan_refuses_another_dtype_naming_uint64(node, topic):
    pub = node.create_publisher(UInt64MultiArray, topic, 5)
    for dtype in (np.float32, np.int64, np.uint8, np.dtype(">u8")):
        with pytest.raises(TypeError, match="uint64"):
            pub.loan(3, dtype)


@pytest.mark.parametrize("dtype", [object, np.dtype([("x", "<f4"), ("o", object)])], ids=["object", "with_object"])
def test_a_loan_of_python_objects_is_refused(pubsub, dtype):
    pub, _ = pubsub
    with pytest.raises(TypeError, match="Python objects"):
        pub.loan(3, dtype)


def test_a_loan_of_a_dtype_without_size_is_refused(pubsub):
    pub, _ = pubsub
    with pytest.raises(TypeError, match="size"):
        pub.loan(3, "V0")


@pytest.mark.parametrize(
    "shape",
    [-1, (-1,), (2, -3), (2**62, 2**62), (2**32, 2**32, 2**32)],
    ids=["negative_int", "negative", "negative_second", "overflow", "overflow3"],
)
def test_a_negative_or_overflowing_shape_raises_value_error(pubsub, shape):
    pub, _ = pubsub
    with pytest.raises(ValueError, match="negative|too large"):
        pub.loan(shape, np.uint8)


@pytest.mark.parametrize("shape", [2**63, (2**64,)], ids=["int", "tuple"])
def test_an_extent_beyond_int64_raises_value_error(pubsub, shape):
    pub, _ = pubsub
    with pytest.raises(ValueError):
        pub.loan(shape, np.uint8)


@pytest.mark.parametrize("shape", ["12", 2.0, None, (2, "3")], ids=["str", "float", "none", "str_extent"])
def test_a_shape_that_is_not_ints_raises_type_error(pubsub, shape):
    pub, _ = pubsub
    with pytest.raises(TypeError, match="shape"):
        pub.loan(shape, np.uint8)


def test_a_loan_over_the_message_size_limit_raises_limit_error(pubsub):
    # The default context limit is 4 GiB per message (not configurable from Python);
    # the request is refused before any memory is reserved.
    pub, _ = pubsub
    with pytest.raises(freight.LimitError, match="exceeds the limit"):
        pub.loan(8 << 30, np.uint8)
    with pytest.raises(ValueError):  # LimitError is a ValueError
        pub.loan((1 << 20, 1 << 20), np.float64)
    small = pub.loan(4, np.uint8)  # the publisher still works
    assert small.shape == (4,)


def test_a_zero_size_loan_publishes_an_empty_buffer(pubsub):
    pub, sub = pubsub
    for shape in (0, (0,), (3, 0)):
        arr = pub.loan(shape, np.uint8)
        assert arr.size == 0 and arr.base.nbytes == 0
        pub.publish(UInt8MultiArray(data=arr))
        msg = take(sub)
        assert msg.data.shape == (0,)
        assert msg.data.dtype == np.uint8


def test_a_zero_size_loan_is_consumed_by_publish(pubsub):
    pub, sub = pubsub
    arr = pub.loan(0, np.uint8)
    pub.publish(UInt8MultiArray(data=arr))
    assert take(sub).data.shape == (0,)
    assert arr.base.published is True
    assert arr.flags.writeable is False
    with pytest.raises(freight.LoanError):
        pub.publish(UInt8MultiArray(data=arr))


def test_loans_dropped_without_publishing_do_not_break_the_next_ones(pubsub):
    pub, sub = pubsub
    for i in range(200):
        arr = pub.loan(1024, np.uint8)
        arr[:] = i % 256
        del arr
    gc.collect()
    kept = [pub.loan(64, np.uint8) for _ in range(8)]  # several outstanding at once
    last = pub.loan(16, np.uint8)
    last[:] = 77
    pub.publish(UInt8MultiArray(data=last))
    msg = take(sub)
    assert msg.data.tolist() == [77] * 16
    assert array_address(msg.data) == last.base.address
    for k in range(len(kept)):
        arr = kept.pop(0)  # referred to by this variable only: sent without a copy
        arr[:] = k
        pub.publish(UInt8MultiArray(data=arr))
        msg = take(sub)
        assert msg.data.tolist() == [k] * 64 and array_address(msg.data) == arr.base.address


def test_a_loan_outlives_its_publisher_object(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    arr = pub.loan(8, np.uint8)
    node.destroy_publisher(pub)
    del pub
    gc.collect()
    arr[:] = 4  # the loan keeps its publisher (and memory) alive
    assert arr.tolist() == [4] * 8
    assert sub.take(timeout_sec=0) is None


@pytest.mark.parametrize("msg_type", [Header, MultiArrayDimension], ids=lambda c: c.__name__)
def test_loan_on_a_message_without_a_buffer_field_raises_type_error(node, topic, msg_type):
    pub = node.create_publisher(msg_type, topic, 5)
    with pytest.raises(TypeError, match="buffer fields"):
        pub.loan(4, np.uint8)


def test_a_loan_is_writable_by_numpy_functions_in_place(pubsub):
    pub, sub = pubsub
    arr = pub.loan((3, 3), np.uint8)
    np.copyto(arr, np.eye(3, dtype=np.uint8))
    np.multiply(arr, 7, out=arr)
    pub.publish(UInt8MultiArray(data=arr))
    assert take(sub).data.reshape(3, 3).tolist() == (np.eye(3) * 7).astype(int).tolist()


CRASH_SCRIPT = """
import numpy as np, freight
from freight.msgs.std_msgs import UInt8MultiArray
freight.init(local_only=True)
node = freight.create_node("kept_loans")
pub = node.create_publisher(UInt8MultiArray, "/kept_loans", 16)
sub = node.create_subscription(UInt8MultiArray, "/kept_loans", None, 16)
kept = []
for k in range(8):
    arr = pub.loan(1 << 20, np.uint8)
    arr[:] = k + 1
    pub.publish(UInt8MultiArray(data=arr))
    kept.append(arr)
for _ in range(8):
    assert sub.take(timeout_sec=2.0) is not None
# The frames went back to the publisher's pool; the next, larger loan reuses or frees them.
pub.loan(4 << 20, np.uint8)
print(sorted({int(a.max()) for a in kept}), all(not a.flags.writeable for a in kept))
"""


def test_published_loan_arrays_kept_after_their_memory_went_back_read_zeros_not_freed_memory():
    # Before, reading these arrays read memory the pool had freed: SIGSEGV (rc 139).
    out = subprocess.run([sys.executable, "-c", CRASH_SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"rc {out.returncode}\n{out.stdout}\n{out.stderr}"
    assert out.stdout.split() == ["[0]", "True"], out.stdout


def test_a_loan_with_another_view_alive_is_published_by_copy_with_a_warning(pubsub):
    pub, sub = pubsub
    arr = pub.loan(8, np.uint8)
    image = arr.reshape(2, 4)  # written through, and still alive at publish
    image[:] = 7
    with pytest.warns(RuntimeWarning, match="1 more place"):
        pub.publish(UInt8MultiArray(data=arr))
    image[:] = 9  # may write: the subscribers got a copy
    msg = take(sub)
    assert msg.data.tolist() == [7] * 8 and array_address(msg.data) != arr.base.address
    assert arr.base.published is False and arr.flags.writeable


def test_a_view_of_a_published_loan_reads_zeros_and_is_not_published_again(pubsub):
    pub, sub = pubsub
    arr = pub.loan(8, np.uint8)
    arr[:] = 5
    pub.publish(UInt8MultiArray(data=arr))
    later = arr.reshape(2, 4)
    assert later.tolist() == [[0] * 4] * 2 and not later.flags.writeable
    with pytest.raises(freight.LoanError, match="already published"):
        pub.publish(UInt8MultiArray(data=later))
    assert take(sub).data.tolist() == [5] * 8
