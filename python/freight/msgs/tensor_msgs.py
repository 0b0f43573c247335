"""``tensor_msgs``: n-dimensional tensors (ROS 2's ``ExperimentalTensor`` fields).

:func:`from_numpy` fills a :class:`Tensor` from an array; :func:`to_numpy`
views a received tensor's data as an array of its dtype and shape, without a
copy::

    pub.publish(tensor_msgs.from_numpy(np.zeros((3, 224, 224), np.float32)))
    arr = tensor_msgs.to_numpy(sub.take())     # float32, (3, 224, 224), read-only
"""

import numpy as np

from freight._native import Tensor

# DLPack type codes, as Tensor.dtype_code holds them.
_CODES = {"i": 0, "u": 1, "f": 2}
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


__all__ = ["Tensor", "from_numpy", "to_numpy"]
