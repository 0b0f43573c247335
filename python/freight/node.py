"""Nodes, with rclpy's ``Node`` API (subclass it as in rclpy)."""

import logging
import sys
import time

from freight import context as _context
from freight.clock import Clock
from freight.graph import GraphMixin
from freight.qos import as_profile
from freight.services import Client, Service


class Timer:
    """Calls ``callback`` every ``timer_period_sec`` from the executor spinning its node."""

    def __init__(self, callback, timer_period_sec):
        if timer_period_sec <= 0:
            raise ValueError(f"timer_period_sec must be positive, not {timer_period_sec}")
        self.callback = callback
        self.timer_period_ns = int(timer_period_sec * 1e9)
        self._next_ns = time.monotonic_ns() + self.timer_period_ns
        self._canceled = False

    def cancel(self):
        self._canceled = True

    def is_canceled(self):
        return self._canceled

    def reset(self):
        self._canceled = False
        self._next_ns = time.monotonic_ns() + self.timer_period_ns

    def time_until_next_call(self):
        """Nanoseconds until the next call (negative when late), ``None`` when canceled."""
        return None if self._canceled else self._next_ns - time.monotonic_ns()

    def is_ready(self):
        return not self._canceled and time.monotonic_ns() >= self._next_ns

    def _call(self):
        # The next call is one period after the one that was due, not after
        # now: a timer does not drift when a call runs late.
        self._next_ns = max(self._next_ns + self.timer_period_ns, time.monotonic_ns() - self.timer_period_ns)
        self.callback()


class Logger:
    """rclpy's node logger: ``node.get_logger().info("...")``, on stderr at INFO and above."""

    def __init__(self, name):
        self._logger = logging.getLogger(f"freight.node.{name.strip('/').replace('/', '.') or 'node'}")
        self.name = name

    def debug(self, msg, *args):
        self._logger.debug(msg, *args)

    def info(self, msg, *args):
        self._logger.info(msg, *args)

    def warning(self, msg, *args):
        self._logger.warning(msg, *args)

    warn = warning

    def error(self, msg, *args):
        self._logger.error(msg, *args)

    def fatal(self, msg, *args):
        self._logger.critical(msg, *args)

    def set_level(self, level):
        self._logger.setLevel(level)


def _configure_logging():
    # As rclpy does, node logs go to stderr at INFO unless the application
    # configured the "freight" logger itself.
    root = logging.getLogger("freight")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(levelname)s] [%(created).6f] [%(name)s]: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False


class Node(GraphMixin):
    """A ROS 2 node: creates publishers, subscriptions and timers.

    ``context`` defaults to the one :func:`freight.init` made. As in rclpy,
    an application may subclass it::

        class Camera(freight.Node):
            def __init__(self):
                super().__init__("camera")
                self.pub = self.create_publisher(Image, "image", 5)
    """

    def __init__(self, node_name, *, context=None, namespace=None):
        self._context = context if context is not None else _context.default_context()
        self._native = self._context._create_node(node_name, namespace)
        self._publishers = []
        self._subscriptions = []
        self._services = []
        self._clients = []
        self._timers = []
        self._clock = Clock()
        _configure_logging()
        self._logger = Logger(self._native.fully_qualified_name)

    @property
    def context(self):
        return self._context

    @property
    def publishers(self):
        return iter(self._publishers)

    @property
    def subscriptions(self):
        return iter(self._subscriptions)

    @property
    def services(self):
        return iter(self._services)

    @property
    def clients(self):
        return iter(self._clients)

    @property
    def timers(self):
        return iter(self._timers)

    def get_name(self):
        return self._native.name

    def get_namespace(self):
        return self._native.namespace

    def get_fully_qualified_name(self):
        return self._native.fully_qualified_name

    def get_logger(self):
        return self._logger

    def get_clock(self):
        return self._clock

    def create_publisher(self, msg_type, topic, qos_profile, *, backend="shm"):
        """A publisher of ``msg_type`` on ``topic`` (relative names resolve in the node's namespace).

        ``backend`` (freight): where its loans live. ``"shm"`` (default): host
        shared memory; ``"cuda"``: CUDA device memory (``loan_tensor`` gives
        torch CUDA tensors); ``"cuda-host"``: page-locked host memory that the
        GPU maps too; ``"fake-device"``: a simulated device, for tests;
        ``"cpu"``: process memory. Subscribers that do not accept it get a
        host copy. A name that is none of these raises ``ValueError``; a
        backend this process cannot use, :class:`freight.BackendUnavailableError`
        saying why.
        """
        if not isinstance(backend, str):
            raise TypeError(f"backend must be a backend name (str), not {type(backend).__name__}")
        publisher = self._native.create_publisher(msg_type, topic, as_profile(qos_profile)._native(), backend)
        self._publishers.append(publisher)
        return publisher

    def create_subscription(self, msg_type, topic, callback, qos_profile, *, accepted_backends=None):
        """A subscription calling ``callback(msg)`` from the executor that spins this node.

        ``callback`` may be ``None`` for a subscription read with ``take()``.
        ``accepted_backends`` (freight): backend names whose memory is viewed in
        place, e.g. ``["cpu"]`` for a private copy of every message.
        """
        subscription = self._native.create_subscription(
            msg_type, topic, as_profile(qos_profile)._native(), callback, accepted_backends
        )
        self._subscriptions.append(subscription)
        return subscription

    def create_service(self, srv_type, srv_name, callback):
        """A service server calling ``callback(request, response)`` for each
        request, from the executor that spins this node; the callback fills
        ``response`` (a fresh ``srv_type.Response()``) and returns it.

        ``srv_type`` is a service class, e.g. ``freight.msgs.std_srvs.SetBool``.
        The QoS is ROS 2's services profile (reliable, volatile, keep last 10).
        """
        service = Service(self, srv_type, srv_name, callback)
        self._services.append(service)
        return service

    def create_client(self, srv_type, srv_name):
        """A client of the service ``srv_name``: ``call`` waits for the
        response itself, ``call_async`` returns a future that an executor
        spinning this node completes."""
        client = Client(self, srv_type, srv_name)
        self._clients.append(client)
        return client

    def create_timer(self, timer_period_sec, callback):
        timer = Timer(callback, timer_period_sec)
        self._timers.append(timer)
        return timer

    def destroy_publisher(self, publisher):
        return _remove(self._publishers, publisher)

    def destroy_subscription(self, subscription):
        return _remove(self._subscriptions, subscription)

    def destroy_service(self, service):
        return _remove(self._services, service)

    def destroy_client(self, client):
        return _remove(self._clients, client)

    def destroy_timer(self, timer):
        timer.cancel()
        return _remove(self._timers, timer)

    def destroy_node(self):
        """Forgets every endpoint; each closes when no other reference holds it
        (a loan or a received array keeps its memory alive until it goes)."""
        for timer in self._timers:
            timer.cancel()
        self._publishers.clear()
        self._subscriptions.clear()
        self._services.clear()
        self._clients.clear()
        self._timers.clear()

    def __repr__(self):
        return f"<freight.Node {self.get_fully_qualified_name()}>"


def _remove(items, item):
    try:
        items.remove(item)
        return True
    except ValueError:
        return False
