"""freight's exceptions.

Each derives from :class:`FreightError` and, where one fits, from the built-in
class Python code already catches for that kind of failure (``ValueError`` for a
request over a limit, ``TypeError`` for a type that does not match, ``OSError``
for the operating system or the network). Messages say what to do.
"""


class FreightError(Exception):
    """Base class of every freight error."""


class ContextError(FreightError):
    """The context could not be created, ``init()`` was called twice, or a node
    was created before ``init()`` or in a context that was shut down."""


class InvalidNameError(FreightError, ValueError):
    """A node, namespace or topic name that ROS 2 does not allow."""


class TypeMismatchError(FreightError, TypeError):
    """A topic already carries another message type (or another layout of one)."""


class LimitError(FreightError, ValueError):
    """A request over a configured limit: queue depth, message size, small-field space."""


class TooManyHeldError(LimitError):
    """A subscription holds as many received messages as it may.

    A received message stays held while it, or any array viewing its data, is
    referenced; drop those references or copy what you keep.
    """


class QueueFullError(FreightError):
    """Reliable keep-all subscriptions of a reliable keep-all publisher kept a
    full queue past ``max_blocking_time``.

    Every other subscription received the message.
    """


class LoanError(FreightError):
    """A loan used the wrong way (published twice, replaced by other memory)."""


class MalformedMessageError(FreightError, ValueError):
    """Bytes that are not a message of the expected type; they were dropped."""


class BackendError(FreightError):
    """A memory backend is unavailable, or a buffer could not be imported."""


class BackendUnavailableError(BackendError):
    """A publisher or subscription asked for a memory backend this process
    cannot use: no GPU or CUDA driver for ``"cuda"`` / ``"cuda-host"``, or a
    device pool that could not be created. The message says why; use
    ``backend="shm"`` (host shared memory) instead, or fix what it names.
    """


class SharedMemoryError(FreightError, OSError):
    """Shared memory (iceoryx2) failed: check that /dev/shm is writable and large enough."""


class NetworkError(FreightError, OSError):
    """The network plane (DDS) failed: check CYCLONEDDS_URI, or use a local-only context."""


class NoServerError(FreightError):
    """A service call found no server: start one, or ``wait_for_service`` first."""


class ServerGoneError(FreightError):
    """Every server of a service went away (its process ended) before it answered the call."""


class BagError(FreightError, OSError):
    """A bag could not be read or written: the message names the file and what
    is wrong (it exists already, it is cut short or damaged, the disk is full)."""


__all__ = [
    "FreightError",
    "ContextError",
    "InvalidNameError",
    "TypeMismatchError",
    "LimitError",
    "TooManyHeldError",
    "QueueFullError",
    "LoanError",
    "MalformedMessageError",
    "BackendError",
    "BackendUnavailableError",
    "SharedMemoryError",
    "NetworkError",
    "NoServerError",
    "ServerGoneError",
    "BagError",
]
