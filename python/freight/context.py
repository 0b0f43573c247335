"""The default context that :func:`freight.init` makes and :class:`freight.Node` uses."""

import threading

from freight._native import Context
from freight.errors import ContextError

_lock = threading.Lock()
_default = None


def init(args=None, *, context=None, domain_id=None, local_only=False):
    """Makes the default context (rclpy's ``init``).

    ``domain_id`` defaults to ``ROS_DOMAIN_ID``; ``local_only=True`` leaves out
    the network plane (DDS): shared memory only. ``context`` installs a context
    made with :class:`freight.Context` instead. ``args`` is accepted for
    rclpy compatibility; freight takes no command-line arguments.
    """
    del args
    global _default
    with _lock:
        if _default is not None and _default.ok():
            raise ContextError("freight.init() was already called; call freight.shutdown() first")
        _default = context if context is not None else Context(domain_id=domain_id, local_only=local_only)
        return _default


def default_context():
    with _lock:
        if _default is None or not _default.ok():
            raise ContextError("freight is not initialized: call freight.init() first, or pass context=")
        return _default


def shutdown(*, context=None):
    """Shuts the context down (the default one without ``context``): executors spinning its nodes stop."""
    global _default
    with _lock:
        target = context if context is not None else _default
        if target is None:
            raise ContextError("freight is not initialized: nothing to shut down")
        target.shutdown()
        if target is _default:
            _default = None


def ok(*, context=None):
    """Whether the context (the default one without ``context``) is initialized and not shut down."""
    with _lock:
        target = context if context is not None else _default
        return target is not None and target.ok()
