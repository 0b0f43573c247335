"""Services and clients, with rclpy's API, and rclpy's ``Future``.

A service callback takes ``(request, response)`` and returns the response,
as in rclpy; an executor spinning the node runs it. A client's
``call_async`` returns a :class:`Future` that an executor spinning the
client's node completes (``spin_until_future_complete``); ``call`` waits for
the reply itself, with no executor needed.

Requests and replies are messages: their numpy fields travel as any
message's do (by pointer in one process, shared memory between processes).
A call whose every server went away fails with
:class:`freight.ServerGoneError` as soon as the client's node is spun (or
within ``call``); one made with no server at all, with
:class:`freight.NoServerError`.
"""

import threading
import time

from freight._native import ServiceClient as _NativeClient
from freight._native import ServiceServer as _NativeServer
from freight.errors import ServerGoneError

# How often ``wait_for_service`` looks again.
_POLL = 0.005
# How long ``call`` waits for a reply before it looks at the servers.
_SLICE = 0.05


class Future:
    """The outcome of an asynchronous call (rclpy's ``rclpy.task.Future``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result = None
        self._exception = None
        self._cancelled = False
        self._callbacks = []

    def done(self):
        """Whether a result or an exception was set, or the future was cancelled."""
        return self._done.is_set()

    def cancelled(self):
        return self._cancelled

    def result(self):
        """The result (``None`` while not done); raises the exception if one was set."""
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        return self._exception

    def set_result(self, result):
        self._finish(result=result)

    def set_exception(self, exception):
        self._finish(exception=exception)

    def cancel(self):
        """Gives up on the call; its reply, if it comes, is dropped."""
        self._finish(cancelled=True)

    def add_done_callback(self, callback):
        """Calls ``callback(future)`` when done (at once if it is)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def _finish(self, result=None, exception=None, cancelled=False):
        with self._lock:
            if self._done.is_set():
                return
            self._result, self._exception, self._cancelled = result, exception, cancelled
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self):
        state = "cancelled" if self._cancelled else "done" if self.done() else "pending"
        return f"<freight.Future {state}>"


class Service:
    """A service server (rclpy's ``Service``); made by ``Node.create_service``."""

    def __init__(self, node, srv_type, srv_name, callback):
        self._native = _NativeServer(node._native, srv_type, srv_name)
        self.srv_type = srv_type
        self.callback = callback

    @property
    def service_name(self):
        return self._native.service_name

    def _take(self):
        """The next ``(request, request_id)``, or ``None``."""
        return self._native.take_request()

    def _handle(self, request, request_id):
        """Runs the callback and sends its response."""
        response = self.callback(request, self.srv_type.Response())
        if not isinstance(response, self.srv_type.Response):
            raise TypeError(
                f"the callback of service {self.service_name} returned {type(response).__name__}, "
                f"not a {self.srv_type.Response.__name__}"
            )
        self._native.send_response(request_id, response)

    def send_response(self, response, request_id):
        """Answers the call ``request_id`` (what ``take_request`` gave), for a
        server that answers outside its callback."""
        self._native.send_response(request_id, response)

    def take_request(self):
        """The next ``(request, request_id)`` without running the callback, or ``None``."""
        return self._take()

    def __repr__(self):
        return f"<freight.Service {self.service_name}>"


class Client:
    """A service client (rclpy's ``Client``); made by ``Node.create_client``."""

    def __init__(self, node, srv_type, srv_name):
        self._native = _NativeClient(node._native, srv_type, srv_name)
        self.srv_type = srv_type
        self._lock = threading.Lock()
        self._pending = {}  # sequence -> Future

    @property
    def service_name(self):
        return self._native.service_name

    def service_is_ready(self):
        """Whether a server is there."""
        return self._native.server_count() > 0

    def wait_for_service(self, timeout_sec=None):
        """Waits up to ``timeout_sec`` (``None``: as long as it takes) for a
        server; returns whether one is there."""
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        while not self.service_is_ready():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        return True

    def call_async(self, request):
        """Sends ``request``; the returned :class:`Future` gets the response
        when an executor spins this client's node. Raises
        :class:`freight.NoServerError` when no server is there."""
        sequence = self._native.call_async(request)
        future = Future()
        with self._lock:
            self._pending[sequence] = future
        future.add_done_callback(lambda f: self._forget(sequence) if f.cancelled() else None)
        return future

    def call(self, request, timeout_sec=None):
        """Sends ``request`` and waits up to ``timeout_sec`` (``None``: as long
        as it takes) for the response; ``None`` if it did not come in time, as
        rclpy's ``call``. Needs no executor."""
        future = self.call_async(request)
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        looked = time.monotonic()
        while not future.done():
            now = time.monotonic()
            left = _SLICE if deadline is None else min(_SLICE, deadline - now)
            if left <= 0:
                future.cancel()
                return None
            # After a slice without the reply (other clients' replies may
            # have come), look at the servers too.
            look = now - looked >= _SLICE
            if look:
                looked = now
            # Waits for a reply in Rust (GIL released); an executor in another
            # thread may complete the future meanwhile.
            self._collect(wait=left, look=look)
        return future.result()

    def remove_pending_request(self, future):
        """Forgets the call of ``future`` (rclpy's name): its reply is dropped."""
        future.cancel()

    def _has_pending(self):
        with self._lock:
            return bool(self._pending)

    def _collect(self, wait=0.0, look=False):
        """Completes the futures whose replies came (after waiting up to
        ``wait`` seconds for one); with ``look``, fails the pending ones when
        none came and every server went away (looking scans the host's
        processes: callers do it once a slice, not once a reply)."""
        replies = self._native.take_responses(wait)
        with self._lock:
            done = [(self._pending.pop(seq, None), response) for seq, response in replies]
            gone = []
            if look and self._pending and not replies and self._native.server_count() == 0:
                # A reply that came just before its server went away is taken first.
                replies = self._native.take_responses()
                done += [(self._pending.pop(seq, None), response) for seq, response in replies]
                gone, self._pending = list(self._pending.items()), {}
        for future, response in done:
            if future is not None:
                future.set_result(response)
        for sequence, future in gone:
            self._native.forget(sequence)
            future.set_exception(
                ServerGoneError(f"every server of {self.service_name} went away before it answered")
            )

    def _forget(self, sequence):
        with self._lock:
            self._pending.pop(sequence, None)
        self._native.forget(sequence)

    def __repr__(self):
        return f"<freight.Client {self.service_name}>"
