"""Executors: run subscription, service and timer callbacks, and complete
service clients' futures (rclpy's executors).

The wait for messages happens in Rust with the GIL released, so other Python
threads run meanwhile, and an executor can spin in a background thread.
Ctrl-C raises ``KeyboardInterrupt`` out of ``spin`` within 0.1 s.

A malformed message (bytes from the network that are not the subscription's
type: a hostile or broken DDS participant) does not stop a spinning executor:
it is dropped, the :class:`freight.MalformedMessageError` is logged as a warning
on the ``freight`` logger, and the next message is taken. ``Subscription.take``
called directly raises it instead.
"""

import concurrent.futures
import logging
import threading
import time

from freight import context as _context
from freight._native import wait
from freight.errors import MalformedMessageError

_log = logging.getLogger("freight")

# Longest single wait: how soon an executor notices new entities, a shutdown,
# or a call to its own shutdown() from another thread.
_MAX_WAIT = 0.2
# How often the multi-threaded executor looks at entities whose callback runs.
_BUSY_POLL = 0.001


class Executor:
    """Runs the callbacks of its nodes on the thread that calls ``spin``."""

    def __init__(self, *, context=None):
        self._context = context
        self._nodes = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._next = 0  # round-robin start among ready subscriptions

    @property
    def context(self):
        return self._context if self._context is not None else _context.default_context()

    def add_node(self, node):
        with self._lock:
            if node in self._nodes:
                return False
            self._nodes.append(node)
            return True

    def remove_node(self, node):
        with self._lock:
            if node in self._nodes:
                self._nodes.remove(node)

    def get_nodes(self):
        with self._lock:
            return list(self._nodes)

    def shutdown(self, timeout_sec=None):
        """Makes ``spin`` return after the callback in progress."""
        del timeout_sec
        self._stop.set()
        return True

    def _ok(self):
        return not self._stop.is_set() and self._nodes_ok()

    def _nodes_ok(self):
        nodes = self.get_nodes()
        return all(node.context.ok() for node in nodes) if nodes else self.context.ok()

    def spin(self):
        """Runs callbacks until ``shutdown()``, the context's shutdown, or Ctrl-C."""
        while self._ok():
            self.spin_once(timeout_sec=_MAX_WAIT)

    def spin_once(self, timeout_sec=None):
        """Waits up to ``timeout_sec`` (``None``: as long as it takes) and runs at most one callback."""
        if self._stop.is_set():
            return
        work = self._wait_for_work(timeout_sec)
        if work is not None and not self._stop.is_set():
            self._run(*work)

    def spin_until_shutdown(self):
        self.spin()

    def spin_until_future_complete(self, future, timeout_sec=None):
        """Runs callbacks until ``future`` is done, ``timeout_sec`` passes
        (``None``: no limit), or the executor or context shuts down."""
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        while not future.done() and self._ok():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            self.spin_once(timeout_sec=_MAX_WAIT if left is None else min(left, _MAX_WAIT))

    def _run(self, entity, callback, args):
        del entity
        callback(*args)

    def _entities(self):
        subscriptions, services, clients, timers = [], [], [], []
        for node in self.get_nodes():
            subscriptions.extend(s for s in node.subscriptions if s.callback is not None and self._may_take(s))
            services.extend(s for s in node.services if self._may_take(s))
            # A client is waited on while it has calls pending.
            clients.extend(c for c in node.clients if c._has_pending() and self._may_take(c))
            timers.extend(t for t in node.timers if not t.is_canceled() and self._may_take(t))
        return subscriptions, services, clients, timers

    def _may_take(self, entity):
        """Whether the entity's callback may run now (the multi-threaded executor runs one per entity)."""
        del entity
        return True

    def _max_wait(self):
        """The longest single wait now."""
        return _MAX_WAIT

    def _wait_for_work(self, timeout_sec):
        """The next `(entity, callback, args)` to run, or None when none came in time."""
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        while True:
            subscriptions, services, clients, timers = self._entities()
            for timer in timers:
                if timer.is_ready():
                    return timer, timer._call, ()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            until_timer = min((t.time_until_next_call() / 1e9 for t in timers), default=None)
            wait_for = min(x for x in (left, until_timer, self._max_wait()) if x is not None)
            entities = subscriptions + services + clients
            waitables = subscriptions + [s._native for s in services] + [c._native for c in clients]
            if waitables:
                ready = wait(waitables, max(0.0, wait_for))
            else:
                time.sleep(max(0.0, wait_for))
                ready = []
            if ready:
                self._next = (self._next + 1) % len(ready)
                kinds = [0] * len(subscriptions) + [1] * len(services) + [2] * len(clients)
                for i in ready[self._next :] + ready[: self._next]:
                    work = self._work_of(entities[i], kinds[i])
                    if work is not None:
                        return work
            # A pending call whose servers all went away sends no reply to
            # wake the wait: look at the servers when a wait brought nothing
            # (a look scans the host's processes; not one per message).
            for client in clients:
                if not client.service_is_ready():
                    return client, client._collect, (0.0, True)
            if any(t.is_ready() for t in timers):
                continue
            if (deadline is not None and time.monotonic() >= deadline) or not self._ok():
                return None

    def _work_of(self, entity, kind):
        """What a ready entity asks to run (kind 0: a subscription's callback
        with its message, 1: a service's with its request, 2: a client's
        completion of its futures); None when there was nothing to take after all."""
        if kind == 2:
            return entity, entity._collect, ()
        try:
            taken = entity.take(0) if kind == 0 else entity._take()
        except MalformedMessageError as e:
            # Dropped; the stream goes on (nothing accepted before is lost).
            name = entity.topic_name if kind == 0 else entity.service_name
            _log.warning("dropped a malformed %s on %s: %s", "message" if kind == 0 else "request", name, e)
            return None
        if taken is None:
            return None
        return (entity, entity.callback, (taken,)) if kind == 0 else (entity, entity._handle, taken)


class SingleThreadedExecutor(Executor):
    """Every callback on the spinning thread, one at a time."""


class MultiThreadedExecutor(Executor):
    """Callbacks on a pool of ``num_threads`` threads; each subscription or
    timer runs one callback at a time. Useful when callbacks release the GIL
    (numpy, torch, I/O). A callback's exception is raised from ``spin``."""

    def __init__(self, num_threads=None, *, context=None):
        super().__init__(context=context)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="freight-exec")
        self._busy = set()
        self._busy_lock = threading.Lock()
        self._failures = []

    def _may_take(self, entity):
        with self._busy_lock:
            return id(entity) not in self._busy

    def _max_wait(self):
        # A busy entity is left out of the wait; look again soon, when its
        # callback may have finished with messages queued behind it.
        with self._busy_lock:
            return _BUSY_POLL if self._busy else _MAX_WAIT

    def spin_once(self, timeout_sec=None):
        self._raise_failure()
        super().spin_once(timeout_sec)
        self._raise_failure()

    def _raise_failure(self):
        if self._failures:
            raise self._failures.pop(0)

    def _run(self, entity, callback, args):
        with self._busy_lock:
            self._busy.add(id(entity))

        def run():
            try:
                callback(*args)
            except BaseException as e:  # raised again from spin/spin_once
                self._failures.append(e)
            finally:
                with self._busy_lock:
                    self._busy.discard(id(entity))

        try:
            self._pool.submit(run)
        except RuntimeError:
            # shutdown() from another thread closed the pool since spin_once
            # looked: the message goes unhandled, as it would a moment later.
            with self._busy_lock:
                self._busy.discard(id(entity))

    def shutdown(self, timeout_sec=None):
        super().shutdown(timeout_sec)
        self._pool.shutdown(wait=timeout_sec is None or timeout_sec > 0)
        return True
