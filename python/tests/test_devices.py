"""Choosing a publisher's memory backend, and received device memory in Python,
on any machine: the simulated ``fake-device`` stands in for a GPU.

A buffer received in device memory is a ``freight.DeviceArray``, not a numpy
array: numpy cannot view it (``TypeError`` naming the fix), ``to_numpy()``
copies it byte for byte, and DLPack describes it as the device it is on
(``kDLExtDev`` for the simulated device, which no consumer can address, so
only a host copy is exported).
"""

import collections
import time

import numpy as np
import pytest

import freight
from freight.msgs import tensor_msgs
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import UInt8MultiArray, UInt64MultiArray
from support import fill_pattern, first_mismatch, peer, take, wait_for_subscriptions

KDL_EXT_DEV = 12


def device_pair(node, topic, msg_type=UInt8MultiArray):
    pub = node.create_publisher(msg_type, topic, 5, backend="fake-device")
    sub = node.create_subscription(msg_type, topic, None, 5, accepted_backends=["fake-device"])
    return pub, sub


def pattern(n, k=3):
    data = np.empty(n, np.uint8)
    fill_pattern(data, k)
    return data


# ------------------------------------------------------------------ the backend argument


@pytest.mark.parametrize("name", ["gpu", "CUDA", "", "shm "])
def test_an_unknown_backend_name_raises_value_error_listing_the_names(node, topic, name):
    with pytest.raises(ValueError, match='"cuda", .*"shm"'):
        node.create_publisher(UInt8MultiArray, topic, 5, backend=name)


def test_a_backend_that_is_not_a_string_raises_type_error(node, topic):
    with pytest.raises(TypeError, match="backend"):
        node.create_publisher(UInt8MultiArray, topic, 5, backend=None)


@pytest.mark.parametrize("name", ["cuda", "cuda-host"])
def test_a_cuda_backend_without_a_gpu_raises_backend_unavailable_naming_it(node, topic, name):
    try:
        pub = node.create_publisher(UInt8MultiArray, topic, 5, backend=name)
    except freight.BackendUnavailableError as e:
        assert isinstance(e, freight.BackendError) and isinstance(e, freight.FreightError)
        assert name in str(e)
        return
    assert pub.backend == name
    pytest.skip(f"this machine can use the {name} backend (the GPU tests cover it)")


@pytest.mark.parametrize("name", ["shm", "cpu", "fake-device"])
def test_a_publisher_reports_the_backend_it_was_created_with(node, topic, name):
    assert node.create_publisher(UInt8MultiArray, topic, 5, backend=name).backend == name


def test_the_default_backend_is_shared_memory(node, topic):
    assert node.create_publisher(UInt8MultiArray, topic, 5).backend == "shm"


# ------------------------------------------------------------------ received device memory


def test_device_memory_is_received_as_a_device_array_not_a_numpy_view(node, topic):
    pub, sub = device_pair(node, topic)
    pub.publish(UInt8MultiArray(data=pattern(1000)))
    data = take(sub).data
    assert isinstance(data, freight.DeviceArray) and not isinstance(data, np.ndarray)
    assert (data.backend, data.device, data.device_ptr, data.host_mapped) == ("fake-device", "fake-device", None, False)
    assert (data.shape, data.ndim, data.size, len(data), data.nbytes) == ((1000,), 1, 1000, 1000, 1000)
    assert data.dtype == np.uint8


def test_numpy_refuses_device_memory_with_a_type_error_naming_the_fix(node, topic):
    pub, sub = device_pair(node, topic)
    pub.publish(UInt8MultiArray(data=pattern(64)))
    data = take(sub).data
    with pytest.raises(TypeError, match=r"numpy cannot view.*to_numpy\(\)"):
        np.asarray(data)
    with pytest.raises(TypeError, match="to_numpy"):
        np.array(data)


def test_to_numpy_copies_device_memory_byte_for_byte_into_a_writable_array(node, topic):
    pub, sub = device_pair(node, topic)
    sent = pattern(3 * 1024 * 1024 + 7, k=11)
    pub.publish(UInt8MultiArray(data=sent))
    data = take(sub).data
    host = data.to_numpy()
    assert host.dtype == np.uint8 and host.flags.writeable and host.flags.owndata is False
    assert first_mismatch(host, 11) is None and host.tobytes() == sent.tobytes()
    host[0] ^= 0xFF  # a copy: the device memory is untouched
    assert data.to_numpy()[0] == sent[0]


def test_to_numpy_keeps_the_fields_element_type(node, topic):
    pub, sub = device_pair(node, topic, UInt64MultiArray)
    words = np.arange(10, dtype=np.uint64) * (1 << 40)
    pub.publish(UInt64MultiArray(data=words))
    data = take(sub).data
    assert data.dtype == np.uint64 and data.shape == (10,) and data.nbytes == 80
    np.testing.assert_array_equal(data.to_numpy(), words)


def test_dlpack_device_of_the_simulated_device_is_kdl_ext_dev(node, topic):
    pub, sub = device_pair(node, topic)
    pub.publish(UInt8MultiArray(data=pattern(16)))
    assert take(sub).data.__dlpack_device__() == (KDL_EXT_DEV, 0)


def test_dlpack_export_in_place_of_the_simulated_device_raises_buffer_error(node, topic):
    pub, sub = device_pair(node, topic)
    pub.publish(UInt8MultiArray(data=pattern(16)))
    data = take(sub).data
    with pytest.raises(BufferError, match="no consumer can address"):
        data.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError):
        np.from_dlpack(data)
    with pytest.raises(BufferError, match="copy=False"):
        data.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="device"):
        data.__dlpack__(max_version=(1, 0), dl_device=(2, 0))


def test_numpy_from_dlpack_to_the_cpu_with_copy_is_byte_exact(node, topic):
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1):
        pytest.skip("numpy >= 2.1 is the first to pass device= and copy= to __dlpack__")
    pub, sub = device_pair(node, topic)
    sent = pattern(4099, k=5)
    pub.publish(UInt8MultiArray(data=sent))
    data = take(sub).data
    copy = np.from_dlpack(data, device="cpu", copy=True)
    assert copy.tobytes() == sent.tobytes()


def test_a_message_with_device_data_serializes_compares_and_republishes_by_copy(node, topic):
    pub, sub = device_pair(node, topic)
    sent = pattern(500, k=9)
    pub.publish(UInt8MultiArray(data=sent))
    msg = take(sub)
    assert msg == UInt8MultiArray(data=sent)
    assert UInt8MultiArray.deserialize(msg.serialize()).data.tobytes() == sent.tobytes()
    pub.publish(msg)  # device memory of another sample: copied through the host
    assert take(sub).data.to_numpy().tobytes() == sent.tobytes()


def test_a_subscription_that_does_not_accept_the_device_gets_a_host_copy(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5, backend="fake-device")
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    sent = pattern(2048)
    pub.publish(UInt8MultiArray(data=sent))
    data = take(sub).data
    assert isinstance(data, np.ndarray) and data.base.backend in ("cpu", "shm")
    assert data.tobytes() == sent.tobytes()


def test_tensor_to_numpy_of_device_data_raises_type_error(node, topic):
    pub, sub = device_pair(node, topic, tensor_msgs.Tensor)
    pub.publish(tensor_msgs.from_numpy(np.ones((2, 3), np.float32)))
    with pytest.raises(TypeError, match="to_numpy"):
        tensor_msgs.to_numpy(take(sub))


def test_as_cuda_of_host_memory_no_gpu_maps_raises_backend_error(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    pub.publish(UInt8MultiArray(data=pattern(8)))
    data = take(sub).data
    with pytest.raises(freight.BackendError, match="cuda-host"):
        freight.as_cuda(data)
    with pytest.raises(TypeError, match="received buffer"):
        freight.as_cuda(np.zeros(3))


# ------------------------------------------------------------------ across processes


def test_device_memory_from_another_process_is_a_device_array_copied_byte_exact(topic, node):
    sub = node.create_subscription(UInt8MultiArray, topic, None, 10, accepted_backends=["fake-device"])
    with peer("device_peer.py", "publish", topic, "--backend", "fake-device") as child:
        child.expect("READY")
        child.send("WAIT 1")
        assert " ".join(child.expect("SUBS")) == "SUBS 1"
        for k, n in [(1, 1), (2, 4096), (3, 1 << 20)]:
            child.send(f"SEND {k} {n}")
            assert " ".join(child.expect("SENT")) == f"SENT {k}"
            msg = take(sub)
            data = msg.data
            assert msg.layout.data_offset == k
            assert isinstance(data, freight.DeviceArray) and data.backend == "fake-device" and data.nbytes == n
            assert first_mismatch(data.to_numpy(), k) is None
            with pytest.raises(TypeError):
                np.asarray(data)
            del msg, data


def test_another_process_receives_this_processes_device_memory(topic, node):
    pub = node.create_publisher(UInt8MultiArray, topic, 10, backend="fake-device")
    with peer("device_peer.py", "subscribe", topic, "--accept", "fake-device") as child:
        child.expect("READY")
        wait_for_subscriptions(pub, 1)
        for k, n in [(4, 100), (5, 3 << 20)]:
            msg = UInt8MultiArray(data=pattern(n, k))
            msg.layout.data_offset = k
            pub.publish(msg)
            assert " ".join(child.expect("GOT")) == f"GOT {k} fake-device DeviceArray ok"


def flood_keep_last_subscriber(topic, node, size, seconds, pause=0.0):
    """A fake-device publisher floods a keep-last subscription of depth 2 with
    messages of ``size`` bytes for ``seconds``; the subscription takes each
    (pausing ``pause`` s after each) and checks every byte. Returns how many
    messages were sent and a count of what the received ones' data was."""
    qos = freight.QoSProfile(depth=2, reliability=freight.ReliabilityPolicy.RELIABLE)
    sub = node.create_subscription(UInt8MultiArray, topic, None, qos, accepted_backends=["fake-device"])
    kinds = collections.Counter()
    with peer("device_peer.py", "publish", topic, "--backend", "fake-device") as child:
        child.expect("READY")
        child.send("WAIT 1")
        assert " ".join(child.expect("SUBS")) == "SUBS 1"
        child.send(f"FLOOD {size} {seconds}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = sub.take(timeout_sec=0.5)
            if msg is None:
                if child.lines.qsize():
                    break  # FLOODED: the publisher is done, and the queue is empty
                continue
            k, data = msg.layout.data_offset, msg.data  # a stale block raises here
            on_device = isinstance(data, freight.DeviceArray)
            kinds[type(data).__name__ + (f" {data.device}" if on_device else "")] += 1
            host = data.to_numpy() if on_device else data
            assert first_mismatch(host, k) is None, f"message {sum(kinds.values())} (pattern {k}) is wrong"
            del msg, data, host
            time.sleep(pause)
        sent = int(child.expect("FLOODED")[1])
    return sent, kinds


def test_a_keep_last_subscriber_behind_a_fast_device_publisher_never_gets_a_freed_block(topic, node):
    # The publisher does not wait for a keep-last subscriber with a full
    # queue, yet iceoryx2 tries its queue once more after giving up on it: a
    # frame the subscriber made room for meanwhile arrives. Its device holds
    # must stay (the GPU demo's display once got "block 3 is stale").
    sent, kinds = flood_keep_last_subscriber(topic, node, 1 << 20, 4)
    got = sum(kinds.values())
    assert got > 10, f"received {got} of {sent}"
    assert got < sent, f"the subscriber kept up with all {sent} messages: no queue was full, nothing was tested"


def test_a_slow_keep_last_subscriber_keeps_getting_device_memory_from_a_fast_publisher(topic, node):
    # Every frame the publisher sends while the one subscriber's queue is full
    # misses it, and `send`'s count of recipients says so: its holds go back at
    # once. Kept as suspects instead, they piled up past the subscriber's share
    # of the pool (8 MiB frames, a 256 MiB pool), and it got host copies, or a
    # stale block (the GPU demo's 4K transport-only view fell to host copies).
    sent, kinds = flood_keep_last_subscriber(topic, node, 8 << 20, 3, pause=0.01)
    got = sum(kinds.values())
    assert got > 20 and got * 2 < sent, f"received {got} of {sent}: the subscriber was not the slower side"
    assert kinds == {"DeviceArray fake-device": got}, f"received {dict(kinds)}"


# ------------------------------------------------------------------ loans and their errors


def test_a_device_publisher_lends_no_numpy_array(node, topic):
    pub, _ = device_pair(node, topic)
    with pytest.raises(freight.BackendError, match="numpy cannot view"):
        pub.loan(10, np.uint8)


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_loan_buffer_on_the_gpu_from_a_host_publisher_raises_backend_error_naming_cuda(node, topic, device):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    with pytest.raises(freight.BackendError, match='backend="cuda"'):
        pub.loan_buffer(16, np.uint8, device=device)


def test_loan_buffer_on_the_cpu_from_a_device_publisher_raises_backend_error(node, topic):
    pub, _ = device_pair(node, topic)
    with pytest.raises(freight.BackendError, match="CPU cannot write"):
        pub.loan_buffer(16, np.uint8, device="cpu")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda0", ""])
def test_an_unknown_device_raises_value_error(node, topic, device):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    with pytest.raises(ValueError, match="device"):
        pub.loan_buffer(16, np.uint8, device=device)


def test_a_host_loan_buffer_exports_its_shape_and_dtype_and_is_published_in_place(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    buf = pub.loan_buffer((3, 4), "float32", device="cpu")
    assert (buf.shape, buf.nbytes, buf.device, buf.__dlpack_device__()) == ([3, 4], 48, "cpu", (1, 0))
    arr = np.from_dlpack(buf)
    assert arr.shape == (3, 4) and arr.dtype == np.float32 and arr.flags.writeable
    arr[...] = np.arange(12, dtype=np.float32).reshape(3, 4)
    pub.publish(UInt8MultiArray(data=buf))
    data = take(sub).data
    assert buf.published and data.base.address == buf.address  # the loan itself: no copy
    np.testing.assert_array_equal(data.view(np.float32), np.arange(12, dtype=np.float32))
    with pytest.raises(freight.LoanError):
        pub.publish(UInt8MultiArray(data=buf))


@pytest.mark.parametrize(
    "dtype, numpy_dtype", [("float16", np.float16), ("int32", np.int32), (np.uint16, np.uint16), ("bool", np.bool_)]
)
def test_loan_buffer_takes_numpy_and_string_dtypes(node, topic, dtype, numpy_dtype):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    arr = np.from_dlpack(pub.loan_buffer(5, dtype, device="cpu"))
    assert arr.dtype == numpy_dtype and arr.shape == (5,)


def test_loan_buffer_takes_torch_dtypes_by_name(node, topic):
    class TorchLikeDtype:  # what str(torch.float64) gives, without torch
        def __str__(self):
            return "torch.float64"

    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    assert np.from_dlpack(pub.loan_buffer((2, 2), TorchLikeDtype(), device="cpu")).dtype == np.float64


def test_loan_buffer_refuses_a_dtype_dlpack_cannot_describe(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    with pytest.raises(TypeError, match="DLPack"):
        pub.loan_buffer(5, "U3", device="cpu")


def test_a_uint64_field_loans_64_bit_integers_only(node, topic):
    pub = node.create_publisher(UInt64MultiArray, topic, 5)
    with pytest.raises(TypeError, match="64-bit integer"):
        pub.loan_buffer(4, "float64", device="cpu")
    assert np.from_dlpack(pub.loan_buffer(4, "int64", device="cpu")).dtype == np.int64


def test_loan_tensor_without_torch_raises_import_error_naming_torch(node, topic):
    try:
        import torch  # noqa: F401
    except ImportError:
        pub = node.create_publisher(Image, topic, 5)
        with pytest.raises(ImportError, match="torch"):
            pub.loan_tensor((2, 2, 4), "uint8", device="cpu")
    else:
        pytest.skip("torch is installed")


@pytest.mark.parametrize("stream, error", [("default", TypeError), (-3, ValueError), (1.5, TypeError)])
def test_publish_refuses_a_stream_that_is_not_one(node, topic, stream, error):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    with pytest.raises(error, match="stream"):
        pub.publish(UInt8MultiArray(data=b"abc"), stream=stream)


def test_a_stream_given_for_host_memory_is_accepted_and_ignored(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    arr = pub.loan(3, np.uint8)
    arr[:] = 7
    pub.publish(UInt8MultiArray(data=arr), stream=2)
    assert take(sub).data.tolist() == [7, 7, 7]


def test_a_dropped_loan_buffer_goes_back_to_the_publisher(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    for _ in range(64):
        pub.loan_buffer(1 << 16, "uint8", device="cpu")  # dropped at once
    buf = pub.loan_buffer(4, "uint8", device="cpu")
    np.from_dlpack(buf)[:] = 1
    pub.publish(UInt8MultiArray(data=buf))
    assert take(sub).data.tolist() == [1, 1, 1, 1]
