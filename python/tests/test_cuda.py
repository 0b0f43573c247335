"""CUDA memory through freight's Python API: torch tensors from ``loan_tensor``
published without a copy, received as ``DeviceArray`` and imported with
``torch.from_dlpack`` on the reader's own stream, across processes.

These need torch with a CUDA device and freight's ``cuda`` backends; without
them every test is skipped, saying which is missing.
"""

import importlib.util
import warnings

import numpy as np
import pytest

import freight
from freight.msgs import tensor_msgs
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import UInt8MultiArray
from support import PERIOD, peer, take, wait_for_subscriptions

KDL_CUDA = 2


def _gpu_missing():
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    ctx = freight.Context(local_only=True)
    try:
        node = freight.Node("cuda_probe", context=ctx)
        for backend in ("cuda", "cuda-host"):
            node.create_publisher(UInt8MultiArray, f"/cuda_probe_{backend.replace('-', '_')}", 1, backend=backend)
    except freight.BackendUnavailableError as e:
        return f"freight's CUDA backends are unavailable: {e}"
    finally:
        ctx.shutdown()
    return None


MISSING = _gpu_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"GPU tests need torch and CUDA: {MISSING}")

if MISSING is None:
    import torch


def pattern(k, n, device="cuda"):
    """Message ``k``'s bytes: byte i is (k + i) % 251 (as support.fill_pattern)."""
    return ((torch.arange(n, device=device, dtype=torch.int64) + k) % PERIOD).to(torch.uint8)


def cuda_pair(node, topic, backend="cuda", accept=None, msg_type=UInt8MultiArray):
    pub = node.create_publisher(msg_type, topic, 5, backend=backend)
    sub = node.create_subscription(msg_type, topic, None, 5, accepted_backends=accept or [backend])
    return pub, sub


# ------------------------------------------------------------------ loans


def test_loan_tensor_is_a_cuda_tensor_of_the_shape_and_dtype_over_the_pool(node, topic):
    pub, _ = cuda_pair(node, topic)
    t = pub.loan_tensor((3, 5, 7), torch.float32)
    assert t.is_cuda and t.shape == (3, 5, 7) and t.dtype == torch.float32 and t.is_contiguous()
    buf = pub.loan_buffer((4,), torch.int16)
    assert buf.__dlpack_device__()[0] == KDL_CUDA and buf.device.startswith("cuda:")
    assert torch.from_dlpack(buf).data_ptr() == buf.address


def test_a_loan_tensor_written_by_a_kernel_arrives_without_a_copy(node, topic):
    pub, sub = cuda_pair(node, topic)
    t = pub.loan_tensor((1 << 20,), torch.uint8)
    t.copy_(pattern(1, t.numel()))
    pub.publish(UInt8MultiArray(data=t))
    data = take(sub).data
    assert isinstance(data, freight.DeviceArray) and data.backend == "cuda"
    assert data.__dlpack_device__() == (KDL_CUDA, torch.cuda.current_device())
    got = torch.from_dlpack(data)
    assert got.is_cuda and torch.equal(got, pattern(1, 1 << 20))


def test_received_cuda_memory_is_ordered_on_the_readers_stream(node, topic):
    pub, sub = cuda_pair(node, topic)
    writer, reader = torch.cuda.Stream(), torch.cuda.Stream()
    n = 32 << 20
    t = pub.loan_tensor((n,), torch.uint8)
    with torch.cuda.stream(writer):
        torch.cuda._sleep(100_000_000)  # the write lands long after publish returns
        t.copy_(pattern(7, n))
    pub.publish(UInt8MultiArray(data=t), stream=writer)
    data = take(sub).data
    with torch.cuda.stream(reader):
        got = torch.from_dlpack(data)  # passes `reader`: it waits for `writer`, the host does not
        ok = torch.equal(got, pattern(7, n))
    assert ok


def test_publish_records_torchs_current_stream_by_default(node, topic):
    pub, sub = cuda_pair(node, topic)
    side = torch.cuda.Stream()
    n = 16 << 20
    with torch.cuda.stream(side):
        t = pub.loan_tensor((n,), torch.uint8)
        torch.cuda._sleep(100_000_000)
        t.copy_(pattern(9, n))
        pub.publish(UInt8MultiArray(data=t))  # no stream=: torch's current one, `side`
    assert torch.equal(torch.from_dlpack(take(sub).data), pattern(9, n))


def test_a_cuda_tensor_that_is_not_a_loan_is_refused_on_publish(node, topic):
    pub, _ = cuda_pair(node, topic)
    with pytest.raises(TypeError, match="loan_tensor"):
        pub.publish(UInt8MultiArray(data=torch.zeros(8, dtype=torch.uint8, device="cuda")))


def test_a_published_loan_tensor_cannot_be_published_again(node, topic):
    pub, sub = cuda_pair(node, topic)
    t = pub.loan_tensor((8,), torch.uint8)
    t.fill_(1)
    pub.publish(UInt8MultiArray(data=t))
    take(sub)
    with pytest.raises(freight.LoanError):
        pub.publish(UInt8MultiArray(data=t))


def test_loan_tensor_on_the_cpu_from_a_cuda_publisher_raises_backend_error(node, topic):
    pub, _ = cuda_pair(node, topic)
    with pytest.raises(freight.BackendError, match="CPU cannot write"):
        pub.loan_tensor((8,), torch.uint8, device="cpu")
    with pytest.raises(freight.BackendError, match="numpy cannot view"):
        pub.loan(8, np.uint8)


def test_a_subscription_without_cuda_gets_the_bytes_in_host_memory(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5, backend="cuda")
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    t = pub.loan_tensor((4096,), torch.uint8)
    t.copy_(pattern(3, 4096))
    pub.publish(UInt8MultiArray(data=t))
    data = take(sub).data
    assert isinstance(data, np.ndarray)
    assert data.tobytes() == pattern(3, 4096).cpu().numpy().tobytes()


def test_numpy_refuses_cuda_memory_and_to_numpy_copies_it(node, topic):
    pub, sub = cuda_pair(node, topic)
    t = pub.loan_tensor((1000,), torch.uint8)
    t.copy_(pattern(2, 1000))
    pub.publish(UInt8MultiArray(data=t))
    data = take(sub).data
    with pytest.raises(TypeError, match="numpy cannot view"):
        np.asarray(data)
    with pytest.raises(BufferError):
        np.from_dlpack(data)
    assert data.to_numpy().tobytes() == pattern(2, 1000).cpu().numpy().tobytes()


def test_a_tensor_message_round_trips_through_from_torch_and_to_torch(node, topic):
    pub, sub = cuda_pair(node, topic, msg_type=tensor_msgs.Tensor)
    t = pub.loan_tensor((2, 3, 4), torch.float32)
    t.copy_(torch.arange(24, dtype=torch.float32, device="cuda").reshape(2, 3, 4))
    pub.publish(tensor_msgs.from_torch(t))
    got = tensor_msgs.to_torch(take(sub))
    assert got.is_cuda and got.dtype == torch.float32 and got.shape == (2, 3, 4)
    assert torch.equal(got, torch.arange(24, dtype=torch.float32, device="cuda").reshape(2, 3, 4))


def test_an_image_loan_tensor_arrives_as_bgra_pixels(node, topic):
    pub, sub = cuda_pair(node, topic, msg_type=Image)
    h, w = 270, 480
    t = pub.loan_tensor((h, w, 4), torch.uint8)
    t.copy_(pattern(4, h * w * 4).reshape(h, w, 4))
    pub.publish(Image(height=h, width=w, encoding="bgra8", step=w * 4, data=t))
    msg = take(sub)
    assert (msg.height, msg.width, msg.data.nbytes) == (h, w, h * w * 4)
    assert torch.equal(torch.from_dlpack(msg.data).view(h, w, 4), pattern(4, h * w * 4).reshape(h, w, 4))


# ------------------------------------------------------------------ cuda-host


def test_cuda_host_memory_is_a_numpy_view_and_a_cuda_tensor(node, topic):
    pub, sub = cuda_pair(node, topic, backend="cuda-host")
    t = pub.loan_tensor((1 << 16,), torch.uint8)  # the GPU's address of host memory
    t.copy_(pattern(5, 1 << 16))
    pub.publish(UInt8MultiArray(data=t))
    data = take(sub).data
    assert isinstance(data, np.ndarray) and data.base.backend == "cuda-host"
    assert data.tobytes() == pattern(5, 1 << 16).cpu().numpy().tobytes()
    mapped = freight.as_cuda(data)
    assert mapped.host_mapped and mapped.__dlpack_device__()[0] == KDL_CUDA
    assert torch.equal(torch.from_dlpack(mapped), pattern(5, 1 << 16))


def test_a_cuda_host_publisher_lends_cpu_tensors_too(node, topic):
    pub, sub = cuda_pair(node, topic, backend="cuda-host")
    t = pub.loan_tensor((64,), torch.uint8, device="cpu")
    assert t.device.type == "cpu"
    t.copy_(pattern(6, 64, device="cpu"))
    pub.publish(UInt8MultiArray(data=t))
    assert take(sub).data.tobytes() == pattern(6, 64, device="cpu").numpy().tobytes()


# ------------------------------------------------------------------ across processes


@pytest.mark.parametrize("backend", ["cuda", "cuda-host"])
def test_a_kernel_written_loan_from_another_process_is_read_on_this_processes_stream(topic, node, backend):
    sub = node.create_subscription(UInt8MultiArray, topic, None, 10, accepted_backends=[backend])
    reader = torch.cuda.Stream()
    with peer("device_peer.py", "publish", topic, "--backend", backend) as child:
        child.expect("READY")
        child.send("WAIT 1")
        assert " ".join(child.expect("SUBS")) == "SUBS 1"
        for k, n in [(1, 4096), (2, 8 << 20), (3, 33177600)]:
            child.send(f"SEND {k} {n}")
            assert " ".join(child.expect("SENT")) == f"SENT {k}"
            msg = take(sub)
            data = freight.as_cuda(msg.data)
            with torch.cuda.stream(reader):
                ok = torch.equal(torch.from_dlpack(data), pattern(k, n))
            assert ok, f"message {k} of {n} bytes read wrong over {backend}"
            del msg, data


@pytest.mark.parametrize("backend", ["cuda", "cuda-host"])
def test_another_process_reads_this_processes_loan_tensors(topic, node, backend):
    pub = node.create_publisher(UInt8MultiArray, topic, 10, backend=backend)
    side = torch.cuda.Stream()
    with peer("device_peer.py", "subscribe", topic, "--accept", backend, "--torch") as child:
        child.expect("READY")
        wait_for_subscriptions(pub, 1)
        for k, n in [(4, 100), (5, 33177600)]:
            t = pub.loan_tensor((n,), torch.uint8)
            with torch.cuda.stream(side):
                torch.cuda._sleep(50_000_000)
                t.copy_(pattern(k, n))
            msg = UInt8MultiArray(data=t)
            msg.layout.data_offset = k
            pub.publish(msg, stream=side)
            words = child.expect("GOT")
            assert words[1] == str(k) and words[2] == backend and words[-1] == "ok", " ".join(words)


def test_cupy_imports_received_cuda_memory_when_installed(node, topic):
    cupy = pytest.importorskip("cupy")
    pub, sub = cuda_pair(node, topic)
    t = pub.loan_tensor((4096,), torch.uint8)
    t.copy_(pattern(8, 4096))
    pub.publish(UInt8MultiArray(data=t))
    got = cupy.from_dlpack(take(sub).data)
    assert cupy.asnumpy(got).tobytes() == pattern(8, 4096).cpu().numpy().tobytes()


def test_cupy_arrays_over_a_loan_are_published_without_a_copy(node, topic):
    cupy = pytest.importorskip("cupy")
    pub, sub = cuda_pair(node, topic)
    buf = pub.loan_buffer((256,), "uint8")
    arr = cupy.from_dlpack(buf)
    arr[...] = 42
    pub.publish(UInt8MultiArray(data=arr), stream=cupy.cuda.get_current_stream())
    assert buf.published
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (take(sub).data.to_numpy() == 42).all()
