"""DLPack export of received and loaned buffers (`np.from_dlpack`, `torch.from_dlpack`).

A received buffer is read-only memory other subscribers read too: it is exported
only to consumers that understand DLPack 1.0's read-only flag. A loan is
writable until it is published. Exports never copy unless asked to.
"""

import ctypes
import gc
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight.msgs.std_msgs import UInt8MultiArray, UInt64MultiArray
from support import RemoteSubscriber, array_address, take, wait_for_subscriptions


needs_numpy_dlpack_1 = pytest.mark.skipif(
    tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1),
    reason="numpy >= 2.1 is the first to import read-only DLPack 1.0 tensors and take copy=/device=",
)

# ------------------------------------------------------------------ DLPack structs, read through ctypes

DL_CPU = 1
READ_ONLY = 1 << 0
IS_COPIED = 1 << 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid.restype = ctypes.c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p


def capsule_is(capsule, name):
    return _capsule_is_valid(capsule, name.encode()) == 1


def read_versioned(capsule):
    """The DLManagedTensorVersioned a `dltensor_versioned` capsule points at (a view: keep the capsule alive)."""
    assert capsule_is(capsule, "dltensor_versioned")
    return DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))


def read_legacy(capsule):
    """The DLManagedTensor a `dltensor` capsule points at (a view: keep the capsule alive)."""
    assert capsule_is(capsule, "dltensor")
    return DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))


# ------------------------------------------------------------------ helpers


@pytest.fixture(params=["intra", "shm"])
def route(request):
    """How messages travel: `intra` (in-process, by pointer) or `shm` (shared
    memory, forced by a subscription in a child process)."""
    return request.param


@pytest.fixture
def channel(request, node, topic, route):
    """`make(msg_type)`: a publisher and a subscription on the topic, over `route`."""
    remotes = []

    def make(msg_type):
        pub = node.create_publisher(msg_type, topic, 5)
        sub = node.create_subscription(msg_type, topic, None, 5)
        if route == "shm":
            remotes.append(RemoteSubscriber(msg_type, topic))
            wait_for_subscriptions(pub, 2)
        return pub, sub

    yield make
    for r in remotes:
        r.close()


def received_bytes(channel, values=(1, 2, 3, 250)):
    pub, sub = channel(UInt8MultiArray)
    pub.publish(UInt8MultiArray(data=np.array(values, np.uint8)))
    return take(sub)


# ------------------------------------------------------------------ received buffers


@needs_numpy_dlpack_1
def test_from_dlpack_of_received_data_shares_its_memory_read_only(channel, route):
    msg = received_bytes(channel)
    assert msg.data.base.backend == ("shm" if route == "shm" else "cpu")
    for source in (msg.data, msg.data.base):
        view = np.from_dlpack(source)
        assert array_address(view) == array_address(msg.data) == msg.data.base.address
        assert view.ctypes.data == msg.data.ctypes.data
        assert view.flags.writeable is False
        assert view.tolist() == [1, 2, 3, 250]
        with pytest.raises(ValueError):
            view[0] = 0


@needs_numpy_dlpack_1
def test_from_dlpack_of_received_uint64_data_keeps_its_dtype(channel):
    pub, sub = channel(UInt64MultiArray)
    pub.publish(UInt64MultiArray(data=np.array([1, 2**64 - 1], np.uint64)))
    msg = take(sub)
    view = np.from_dlpack(msg.data.base)
    assert view.dtype == np.uint64
    assert view.tolist() == [1, 2**64 - 1]
    assert array_address(view) == array_address(msg.data)
    assert msg.data.base.nbytes == 16


def test_legacy_dlpack_export_of_received_memory_raises_buffer_error(channel):
    base = received_bytes(channel).data.base
    with pytest.raises(BufferError, match="read-only"):
        base.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        base.__dlpack__(max_version=(0, 8))


def test_versioned_dlpack_export_describes_the_received_memory_as_read_only(channel):
    msg = received_bytes(channel)
    capsule = msg.data.base.__dlpack__(max_version=(1, 0))
    assert capsule_is(capsule, "dltensor_versioned")
    managed = read_versioned(capsule)
    assert (managed.major, managed.minor) == (1, 0)
    assert managed.flags & READ_ONLY
    assert not managed.flags & IS_COPIED
    tensor = managed.dl_tensor
    assert tensor.data == msg.data.base.address
    assert (tensor.device.device_type, tensor.device.device_id) == (DL_CPU, 0)
    assert tensor.ndim == 1 and tensor.shape[0] == 4
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (1, 8, 1)  # kDLUInt, 8 bits
    assert tensor.byte_offset == 0
    del capsule  # never consumed: its destructor frees it


def test_dlpack_device_is_the_cpu(channel):
    base = received_bytes(channel).data.base
    assert base.__dlpack_device__() == (1, 0)


def test_export_to_another_device_raises_buffer_error(channel):
    base = received_bytes(channel).data.base
    with pytest.raises(BufferError, match="device"):
        base.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    assert capsule_is(base.__dlpack__(max_version=(1, 0), dl_device=(1, 0)), "dltensor_versioned")


@needs_numpy_dlpack_1
def test_copy_true_exports_a_private_copy_of_the_same_bytes(channel):
    msg = received_bytes(channel)
    base = msg.data.base
    capsule = base.__dlpack__(max_version=(1, 0), copy=True)
    managed = read_versioned(capsule)
    assert managed.flags & IS_COPIED
    assert managed.dl_tensor.data != base.address
    del capsule

    copied = np.from_dlpack(base, copy=True)
    assert array_address(copied) != array_address(msg.data)
    assert copied.tolist() == msg.data.tolist()
    copied[0] = 99  # a private copy: writing to it leaves the message alone
    assert msg.data[0] == 1

    same = np.from_dlpack(base, copy=False)
    assert array_address(same) == array_address(msg.data)


@needs_numpy_dlpack_1
def test_numpy_refuses_another_device_for_a_received_buffer(channel):
    base = received_bytes(channel).data.base
    with pytest.raises((BufferError, ValueError)):
        np.from_dlpack(base, device=(2, 0))


@needs_numpy_dlpack_1
def test_a_dlpack_view_keeps_the_received_sample_alive(channel):
    msg = received_bytes(channel, values=range(100, 164))
    view = np.from_dlpack(msg.data.base)
    del msg
    gc.collect()
    assert view.tolist() == list(range(100, 164))


def test_len_and_nbytes_of_a_received_buffer(channel):
    base = received_bytes(channel, values=range(10)).data.base
    assert len(base) == base.nbytes == 10


# ------------------------------------------------------------------ loans


@needs_numpy_dlpack_1
def test_dlpack_of_a_loan_is_a_writable_view_of_it(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    arr = pub.loan(8, np.uint8)
    view = np.from_dlpack(arr.base)
    assert view.flags.writeable is True
    assert array_address(view) == array_address(arr) == arr.base.address
    view[:] = np.arange(8)
    assert arr.tolist() == list(range(8))
    # The export, still alive, could write after publish: the loan goes by copy, and says why.
    with pytest.warns(RuntimeWarning, match="1 more place"):
        pub.publish(UInt8MultiArray(data=arr))
    view[:] = 0
    assert take(sub).data.tolist() == list(range(8))
    del view
    pub.publish(UInt8MultiArray(data=arr))  # now without a copy
    msg = take(sub)
    assert msg.data.tolist() == [0] * 8 and array_address(msg.data) == arr.base.address


def test_a_loan_exports_legacy_and_versioned_capsules_as_writable(node, topic):
    pub = node.create_publisher(UInt64MultiArray, topic, 5)
    arr = pub.loan(3, np.uint64)
    legacy_capsule = arr.base.__dlpack__()
    legacy = read_legacy(legacy_capsule)
    assert legacy.dl_tensor.data == array_address(arr)
    assert (legacy.dl_tensor.dtype.code, legacy.dl_tensor.dtype.bits) == (1, 64)
    assert legacy.dl_tensor.shape[0] == 3
    versioned_capsule = arr.base.__dlpack__(max_version=(1, 0))
    versioned = read_versioned(versioned_capsule)
    assert not versioned.flags & READ_ONLY
    assert versioned.dl_tensor.data == array_address(arr)
    assert arr.base.__dlpack_device__() == (1, 0)


def test_a_published_loan_can_no_longer_be_exported(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    node.create_subscription(UInt8MultiArray, topic, None, 5)
    arr = pub.loan(4, np.uint8)
    arr[:] = 0
    pub.publish(UInt8MultiArray(data=arr))
    for kwargs in ({}, {"max_version": (1, 0)}):
        with pytest.raises((BufferError, ValueError), match="published"):
            arr.base.__dlpack__(**kwargs)


# A consumer that frees a tensor without the GIL while this thread is inside
# freight (torch does, freeing a loan tensor held by a message freight frees):
# the export's last reference must be released under the GIL all the same.
# In a child process: before the fix it died with SIGSEGV.
DELETER_WITHOUT_THE_GIL = """
import ctypes, sys
import freight
from freight.msgs.std_msgs import UInt8MultiArray

versioned = sys.argv[1] == "versioned"
name = b"dltensor_versioned" if versioned else b"dltensor"
ctx = freight.Context(local_only=True)
pub = freight.Node("dlpack_gil", context=ctx).create_publisher(UInt8MultiArray, sys.argv[2], 1)
buf = pub.loan_buffer((16,), "uint8", device="cpu")
capsule = buf.__dlpack__(max_version=(1, 0)) if versioned else buf.__dlpack__()
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
managed = api.PyCapsule_GetPointer(capsule, name)
api.PyCapsule_SetName(capsule, b"used_" + name)  # taken, as a consumer does
del capsule, buf  # the export holds the loan's last reference
# The deleter: after (version, manager_ctx) in a versioned tensor, after (DLTensor, manager_ctx) in a legacy one.
at = managed + (16 if versioned else 56)
deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.c_void_p.from_address(at).value)


class Consumer:
    def __dlpack_device__(self):
        deleter(managed)  # a CFUNCTYPE call releases the GIL
        return (2, 0)


UInt8MultiArray(data=Consumer())
ctx.shutdown()
print("survived")
"""


@pytest.mark.parametrize("kind", ["versioned", "legacy"])
def test_a_deleter_called_without_the_gil_inside_a_freight_call_releases_the_loan_safely(topic, kind):
    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", DELETER_WITHOUT_THE_GIL, kind, topic],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode, run.stdout.strip()) == (0, "survived"), run.stderr[-2000:]


# ------------------------------------------------------------------ torch


def test_torch_from_dlpack_views_received_data_without_a_copy(channel):
    torch = pytest.importorskip("torch", reason="torch is not installed (it is optional; CI does not have it)")
    msg = received_bytes(channel)
    try:
        tensor = torch.from_dlpack(msg.data.base)
    except (BufferError, RuntimeError) as e:
        # torch has no read-only tensors: a version that asks for DLPack < 1.0,
        # or refuses the read-only flag, cannot take a received buffer.
        pytest.skip(f"torch {torch.__version__} does not import read-only DLPack tensors: {e}")
    assert tensor.data_ptr() == msg.data.base.address
    assert tensor.tolist() == [1, 2, 3, 250]
    assert tensor.device.type == "cpu"


def test_torch_from_dlpack_writes_into_a_loan(node, topic):
    torch = pytest.importorskip("torch", reason="torch is not installed (it is optional; CI does not have it)")
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    arr = pub.loan(4, np.uint8)
    tensor = torch.from_dlpack(arr.base)
    assert tensor.data_ptr() == array_address(arr)
    tensor.fill_(7)
    pub.publish(UInt8MultiArray(data=arr))
    assert take(sub).data.tolist() == [7, 7, 7, 7]


def test_freight_exports_its_buffer_classes():
    assert freight.ReceivedBuffer.__name__ == "ReceivedBuffer"
    assert freight.LoanedBuffer.__name__ == "LoanedBuffer"


# ------------------------------------------------------------------ array metadata from other libraries


class CudaArrayLike:
    """An object that describes device memory through
    ``__cuda_array_interface__`` (as CuPy and Numba arrays do), with whatever
    the test puts in it."""

    def __init__(self, interface, device=(2, 0)):
        self.__cuda_array_interface__ = interface
        self._device = device

    def __dlpack_device__(self):
        return self._device


class TensorLike:
    """A torch-like tensor whose methods answer what the test says."""

    def __init__(self, ptr, numel, element_size, contiguous, device=(2, 0)):
        self._answers = (ptr, numel, element_size, contiguous)
        self._device = device

    def __dlpack_device__(self):
        return self._device

    def data_ptr(self):
        return self._answers[0]

    def numel(self):
        return self._answers[1]

    def element_size(self):
        return self._answers[2]

    def is_contiguous(self):
        return self._answers[3]


def test_metadata_whose_size_wraps_to_a_loans_is_refused_and_the_loan_stays_unpublished(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    loan = pub.loan(64, np.uint8)
    loan[:] = 7
    address = array_address(loan)
    # (2**62 + 16) * 4 bytes is 64 modulo 2**64: the loan's size, were it not checked.
    wraps = [
        CudaArrayLike({"data": (address, False), "shape": (2**62 + 16, 4), "typestr": "|u1", "version": 3}),
        TensorLike(address, 2**62 + 16, 4, True),
    ]
    for obj in wraps:
        with pytest.raises(ValueError, match="too large"):
            pub.publish(UInt8MultiArray(data=obj))
    pub.publish(UInt8MultiArray(data=loan))
    assert take(sub).data.tolist() == [7] * 64


def test_random_array_metadata_is_a_typed_error_never_a_crash(node, topic):
    """A seeded fuzz of the metadata freight reads from buffer-field values it
    did not make (``__cuda_array_interface__``, torch's methods): extents,
    strides and sizes at the edges of every integer width, addresses inside
    and around a live loan, malformed entries. Each publish raises a Python
    exception (none of these is host memory or a loan); the loan is neither
    published nor damaged by any."""
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 16)
    loan = pub.loan(64, np.uint8)
    loan[:] = 9
    address = array_address(loan)
    rng = np.random.default_rng(20261125)
    edges = [0, 1, 2, 3, 4, 63, 64, 65, 2**31 - 1, 2**31, 2**32, 2**62 + 16, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]

    def number():
        return int(rng.choice(edges)) if rng.random() < 0.7 else int(rng.integers(-(2**63), 2**63 - 1))

    def address_near():
        # Never the loan's own address: metadata that describes exactly the
        # loan is a view of it, which publish rightly takes as the loan (the
        # test above covers sizes that only wrap to the loan's).
        inside_or_around = address + int(rng.integers(1, 64)) * int(rng.choice([-1, 1]))
        return [inside_or_around, 0, number()][int(rng.integers(3))]

    def device():
        return [(2, 0), (2, 0), (2, 0), (1, 0), (2, -1), "cuda", (2**70, 0)][int(rng.integers(7))]

    def interface():
        shape = tuple(number() for _ in range(int(rng.integers(0, 4))))
        meta = {"data": (address_near(), bool(rng.integers(2))), "shape": shape, "version": 3}
        meta["typestr"] = str(rng.choice(["|u1", "<f8", "<i4", "", "x", "<u99999999999999999999", "|V0"]))
        if rng.random() < 0.5:
            meta["strides"] = tuple(number() for _ in range(int(rng.integers(0, 4))))
        for key in ("data", "shape", "typestr"):
            if rng.random() < 0.05:
                del meta[key]
        if rng.random() < 0.05:
            meta["shape"] = "not a shape"
        return CudaArrayLike(meta, device())

    outcomes = {}
    for _ in range(3000):
        if rng.random() < 0.5:
            obj = interface()
        else:
            obj = TensorLike(address_near(), number(), number(), bool(rng.integers(2)), device())
        try:
            pub.publish(UInt8MultiArray(data=obj))
            outcome = "published"
        except (TypeError, ValueError, OverflowError, BufferError, freight.FreightError) as e:
            outcome = type(e).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert "published" not in outcomes, outcomes
    assert loan.tolist() == [9] * 64
    pub.publish(UInt8MultiArray(data=loan))
    got = [m.data.tolist() for m in iter(lambda: sub.take(timeout_sec=0), None)]
    assert got and got[-1] == [9] * 64, outcomes
