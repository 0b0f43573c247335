"""``tensor_msgs``: n-dimensional tensors (ROS 2's ``ExperimentalTensor`` fields).

:class:`Tensor` is the generated class ``ExperimentalTensor`` (see
``_tensor_msgs.pyi`` for its fields and constants).

:func:`from_numpy` fills a :class:`Tensor` from an array; :func:`to_numpy`
views a received tensor's data as an array of its dtype and shape, without a
copy::

    pub.publish(tensor_msgs.from_numpy(np.zeros((3, 224, 224), np.float32)))
    arr = tensor_msgs.to_numpy(sub.take())     # float32, (3, 224, 224), read-only

On the GPU, :func:`from_torch` describes a tensor (a publisher's
``loan_tensor``, published without a copy) and :func:`to_torch` imports a
received one where its data is (a CUDA tensor for ``cuda`` memory)::

    t = pub.loan_tensor((3, 224, 224), torch.float32)   # CUDA memory of the publisher
    t.copy_(batch)
    pub.publish(tensor_msgs.from_torch(t))
    x = tensor_msgs.to_torch(sub.take())                 # float32, (3, 224, 224), on cuda
"""

import warnings

import numpy as np

from freight.msgs._tensor_msgs import ExperimentalTensor

#: The name freight's APIs use for ``ExperimentalTensor``.
Tensor = ExperimentalTensor

# DLPack type codes, as Tensor.dtype_code holds them.
_CODES = {"i": Tensor.DTYPE_INT, "u": Tensor.DTYPE_UINT, "f": Tensor.DTYPE_FLOAT}
_KINDS = {code: kind for kind, code in _CODES.items()}


def from_numpy(array, *, data=None):
    """A Tensor describing ``array`` (dtype, shape, contiguous strides).

    ``data`` defaults to ``array`` itself (copied once on publish); pass a
    publisher's loan holding the same bytes to publish without a copy.
    """
    array = np.asarray(array)
    if array.dtype.kind not in _CODES:
        raise TypeError(f"a Tensor holds integers or floats, not {array.dtype}")
    return Tensor(
        dtype_code=_CODES[array.dtype.kind],
        dtype_bits=array.dtype.itemsize * 8,
        dtype_lanes=1,
        shape=list(array.shape),
        strides=[],
        byte_offset=0,
        data=np.ascontiguousarray(array).reshape(-1).view(np.uint8) if data is None else data,
    )


def to_numpy(tensor):
    """``tensor``'s data as an array of its dtype and shape (a view: no copy)."""
    kind = _KINDS.get(tensor.dtype_code)
    # The widths numpy gives the same meaning as DLPack on every platform
    # (numpy's 128-bit float is x86's 80-bit long double, not IEEE quad).
    widths = (16, 32, 64) if kind == "f" else (8, 16, 32, 64)
    if kind is None or tensor.dtype_lanes != 1 or tensor.dtype_bits not in widths:
        raise TypeError(
            f"no numpy dtype for DLPack code {tensor.dtype_code}, {tensor.dtype_bits} bits, {tensor.dtype_lanes} lanes"
        )
    dtype = np.dtype(f"{kind}{tensor.dtype_bits // 8}")
    data = np.asarray(tensor.data).reshape(-1).view(np.uint8)
    strides = [s * dtype.itemsize for s in tensor.strides] if tensor.strides else None
    # ndarray() checks that shape, strides and offset stay inside the data: a
    # tensor from the network cannot make the view reach past its buffer.
    try:
        return np.ndarray(tuple(tensor.shape), dtype, buffer=data, offset=tensor.byte_offset, strides=strides)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(
            f"tensor of shape {list(tensor.shape)} and {dtype} does not fit its {data.nbytes} data bytes: {e}"
        ) from None


# DLPack (code, bits) of torch's dtypes, by name.
_TORCH_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4, "complex": 5}


def _dl_type_of_torch(dtype):
    name = str(dtype).removeprefix("torch.")
    if name == "bool":
        return 6, 8
    kind = name.rstrip("0123456789")
    bits = name[len(kind):]
    if kind not in _TORCH_CODES or not bits:
        raise TypeError(f"a Tensor holds integers, floats, complex numbers or bools, not {dtype}")
    return _TORCH_CODES[kind], int(bits)


def _torch_dtype(torch, code, bits, lanes):
    kinds = {code: kind for kind, code in _TORCH_CODES.items()}
    name = "bool" if (code, bits) == (6, 8) else f"{kinds.get(code, '?')}{bits}"
    dtype = getattr(torch, name, None)
    if lanes != 1 or not isinstance(dtype, torch.dtype):
        raise TypeError(f"no torch dtype for DLPack code {code}, {bits} bits, {lanes} lanes")
    return dtype


def from_torch(tensor, *, data=None):
    """A Tensor describing a torch ``tensor`` (dtype, shape, contiguous strides).

    ``data`` defaults to ``tensor`` itself: a tensor from the publisher's
    ``loan_tensor`` is published without a copy, any other CPU tensor is
    copied once (a CUDA tensor that is not a loan is refused on publish).
    """
    code, bits = _dl_type_of_torch(tensor.dtype)
    if data is None:
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        data = tensor
    return Tensor(
        dtype_code=code,
        dtype_bits=bits,
        dtype_lanes=1,
        shape=list(tensor.shape),
        strides=[],
        byte_offset=0,
        data=data,
    )


def to_torch(tensor):
    """``tensor``'s data as a torch tensor of its dtype and shape, without a copy.

    Data in host memory gives a CPU tensor (read-only memory: do not write
    it); data in ``cuda`` memory a CUDA tensor on the current stream, which
    DLPack has already ordered after the publisher's writes. Raises
    ``ValueError`` for a shape, stride or offset that reaches past the data.
    """
    import torch  # noqa: PLC0415 (torch is optional)

    dtype = _torch_dtype(torch, tensor.dtype_code, tensor.dtype_bits, tensor.dtype_lanes)
    data = tensor.data
    if isinstance(data, np.ndarray):
        with warnings.catch_warnings():
            # Received memory is read-only; torch warns that it has no such flag.
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.from_numpy(data.reshape(-1).view(np.uint8))
    else:
        flat = torch.from_dlpack(data).reshape(-1).view(torch.uint8)
    itemsize = torch.empty((), dtype=dtype).element_size()
    shape = list(tensor.shape)
    strides = list(tensor.strides) if tensor.strides else _contiguous_strides(shape)
    offset = tensor.byte_offset
    count = 1
    for n in shape:
        count *= n
    # The furthest byte the view reaches, checked as to_numpy's ndarray() checks.
    reach = offset + (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize if count else offset
    if (
        offset % itemsize
        or any(n < 0 for n in shape)
        or any(s < 0 for s in strides)
        or len(strides) != len(shape)
        or reach > flat.numel()
    ):
        raise ValueError(
            f"tensor of shape {shape} and {dtype} (strides {list(tensor.strides)}, offset {offset}) "
            f"does not fit its {flat.numel()} data bytes"
        )
    usable = flat.numel() - flat.numel() % itemsize
    return flat[:usable].view(dtype).as_strided(shape, strides, offset // itemsize)


def _contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]


__all__ = ["ExperimentalTensor", "Tensor", "from_numpy", "to_numpy", "from_torch", "to_torch"]
