"""``std_msgs``: header and multi-arrays."""

from freight._native import (
    Header,
    MultiArrayDimension,
    MultiArrayLayout,
    UInt8MultiArray,
    UInt64MultiArray,
)

__all__ = ["Header", "MultiArrayDimension", "MultiArrayLayout", "UInt8MultiArray", "UInt64MultiArray"]
