"""``builtin_interfaces``: time and duration."""

from freight._native import Duration, Time

__all__ = ["Duration", "Time"]
