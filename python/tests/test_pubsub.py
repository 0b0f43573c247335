"""Publish/subscribe in one process: endpoints and QoS, `take`, callbacks through
executors and timers, the `init`/`ok`/`shutdown` lifecycle, the limit on held
samples, and the lifetime of received memory.

In one process messages travel by pointer (the *intra* route). A few tests start
a subscription in a child process, which makes the publisher send through shared
memory (iceoryx2) to every subscription, so that what only shared memory does
(the held-sample limit) is tested from here too.
"""

import gc
import threading
import time
import uuid

import numpy as np
import pytest

import freight
from freight.msgs.sensor_msgs import Image
from freight.msgs.std_msgs import Header, UInt8MultiArray, UInt64MultiArray
from freight.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from support import RemoteSubscriber, TAKE_TIMEOUT, array_address, take

#: Generous bound for "it returned at all"; never a performance figure.
RETURNS_WITHIN = 5.0


def wait_until(condition, what, timeout=RETURNS_WITHIN):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.fixture
def remote_subscriber(topic):
    """`start(msg_type)`: a subscription on `topic` in a child process, closed after the test."""
    started = []

    def start(msg_type):
        started.append(RemoteSubscriber(msg_type, topic))
        return started[-1]

    yield start
    for r in started:
        r.close()


@pytest.fixture
def default_context():
    """Leaves freight's default context as it found it (uninitialised)."""
    assert not freight.ok(), "a test left freight initialised"
    yield
    if freight.ok():
        freight.shutdown()


def spin_in_thread(executor):
    """Runs `executor.spin()` on a thread; returns the thread and a list that gets its exception."""
    failures = []

    def run():
        try:
            executor.spin()
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            failures.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failures


def stop(executor, thread):
    started = time.monotonic()
    executor.shutdown()
    thread.join(RETURNS_WITHIN)
    assert not thread.is_alive(), "spin did not return after executor.shutdown()"
    return time.monotonic() - started


# ------------------------------------------------------------------ endpoints and QoS


@pytest.mark.parametrize(
    "qos",
    [
        5,
        QoSProfile(depth=3),
        freight.qos_profile_sensor_data,
        freight.qos_profile_system_default,
        QoSProfile(history=HistoryPolicy.KEEP_ALL),
        QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE),
        QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL),
    ],
    ids=["int", "depth3", "sensor_data", "system_default", "keep_all", "best_effort", "transient_local"],
)
def test_endpoints_take_an_int_depth_or_a_qos_profile(node, topic, qos):
    pub = node.create_publisher(Header, topic, qos)
    sub = node.create_subscription(Header, topic, None, qos)
    assert pub.topic_name == sub.topic_name == topic
    assert pub.msg_type is Header and sub.msg_type is Header
    assert sub.callback is None
    pub.publish(Header(frame_id="qos"))
    assert take(sub).frame_id == "qos"


def test_endpoints_count_each_other(node, topic):
    pub = node.create_publisher(Header, topic, 5)
    assert pub.get_subscription_count() == 0
    subs = [node.create_subscription(Header, topic, None, 5) for _ in range(3)]
    assert pub.get_subscription_count() == 3
    assert subs[0].get_publisher_count() == 1


@pytest.mark.parametrize("qos", [True, "5", 2.0, None, -1], ids=["bool", "str", "float", "none", "negative"])
def test_a_qos_that_is_neither_a_profile_nor_a_depth_is_refused(node, topic, qos):
    with pytest.raises((TypeError, ValueError)):
        node.create_subscription(Header, topic, None, qos)


def test_a_qos_profile_needs_a_depth_or_a_history():
    with pytest.raises(TypeError, match="depth"):
        QoSProfile()
    assert QoSProfile(history=HistoryPolicy.KEEP_LAST).depth == 10


def test_a_depth_over_the_context_limit_raises_limit_error(node, topic):
    with pytest.raises(freight.LimitError, match="16"):
        node.create_subscription(Header, topic, None, 17)
    with pytest.raises(ValueError):  # LimitError is a ValueError
        node.create_publisher(Header, topic, QoSProfile(depth=1000))
    # Transient-local history is kept in shared memory: one message by default.
    with pytest.raises(freight.LimitError, match="transient-local"):
        node.create_publisher(Header, topic, QoSProfile(depth=2, durability=DurabilityPolicy.TRANSIENT_LOCAL))


def test_a_class_that_is_not_a_message_is_refused(node, topic):
    for not_a_message in (int, dict, freight.Node):
        with pytest.raises(TypeError, match="not a freight message class"):
            node.create_publisher(not_a_message, topic, 5)
        with pytest.raises(TypeError, match="not a freight message class"):
            node.create_subscription(not_a_message, topic, None, 5)


def test_publishing_a_message_of_the_wrong_type_raises_type_error(node, topic):
    pub = node.create_publisher(Image, topic, 5)
    sub = node.create_subscription(Image, topic, None, 5)
    for wrong in (Header(), UInt8MultiArray(), "image", None, b"\x00\x01\x00\x00"):
        with pytest.raises(TypeError, match="sensor_msgs/msg/Image"):
            pub.publish(wrong)
    assert sub.take(timeout_sec=0) is None


@pytest.mark.parametrize("first", ["publisher", "subscription"])
@pytest.mark.parametrize("second", ["publisher", "subscription"])
def test_an_endpoint_of_another_type_on_a_topic_raises_type_mismatch(node, topic, first, second):
    create = {
        "publisher": lambda t: node.create_publisher(t, topic, 5),
        "subscription": lambda t: node.create_subscription(t, topic, None, 5),
    }
    create[first](Image)
    with pytest.raises(freight.TypeMismatchError, match="sensor_msgs/msg/Image") as info:
        create[second](Header)
    assert isinstance(info.value, TypeError)
    create[second](Image)  # the same type is still fine


def test_a_context_of_ones_own_makes_nodes_with_rclpys_api_only(topic):
    # The native node under freight.Node takes internal arguments (a QoS
    # tuple): a Context must not hand it out.
    ctx = freight.Context(local_only=True)
    try:
        assert not hasattr(ctx, "create_node")
        publisher = freight.Node("own_context", context=ctx).create_publisher(UInt8MultiArray, topic, 10)
        assert publisher.topic_name == topic
    finally:
        ctx.shutdown()


def test_type_mismatch_holds_across_contexts_of_one_process(node, topic):
    node.create_publisher(UInt8MultiArray, topic, 5)
    other = freight.Context(local_only=True)
    try:
        other_node = freight.Node("other", context=other)
        with pytest.raises(freight.TypeMismatchError):
            other_node.create_subscription(UInt64MultiArray, topic, None, 5)
    finally:
        other.shutdown()


@pytest.mark.parametrize(
    "name",
    ["bad name!", "", "/a//b", "/1abc", "trailing/", "a-b", "/topic?", "caf\u00e9"],
    ids=["space", "empty", "double_slash", "digit_first", "trailing_slash", "dash", "question", "non_ascii"],
)
def test_an_invalid_topic_name_raises_invalid_name_error(node, name):
    with pytest.raises(freight.InvalidNameError) as info:
        node.create_publisher(Header, name, 5)
    assert isinstance(info.value, ValueError)
    assert repr(name) in str(info.value) or f'"{name}"' in str(info.value)
    with pytest.raises(freight.InvalidNameError):
        node.create_subscription(Header, name, None, 5)


def test_invalid_node_names_and_namespaces_raise_invalid_name_error(ctx):
    with pytest.raises(freight.InvalidNameError, match="node name"):
        freight.Node("bad name", context=ctx)
    with pytest.raises(freight.InvalidNameError, match="namespace"):
        freight.Node("fine", context=ctx, namespace="bad ns")


def test_relative_topic_names_resolve_in_the_node_namespace(ctx):
    ns = f"/ns_{uuid.uuid4().hex[:8]}"
    node = freight.Node("talker", context=ctx, namespace=ns)
    assert node.get_fully_qualified_name() == f"{ns}/talker"
    assert node.create_publisher(Header, "chatter", 5).topic_name == f"{ns}/chatter"
    assert node.create_publisher(Header, "~/private", 5).topic_name == f"{ns}/talker/private"
    absolute = f"/abs_{uuid.uuid4().hex[:8]}"
    assert node.create_publisher(Header, absolute, 5).topic_name == absolute


# ------------------------------------------------------------------ take


def test_take_with_zero_timeout_returns_none_at_once_when_empty(node, topic):
    sub = node.create_subscription(Header, topic, None, 5)
    node.create_publisher(Header, topic, 5)
    started = time.monotonic()
    assert sub.take(timeout_sec=0) is None
    assert sub.take(0) is None
    assert time.monotonic() - started < RETURNS_WITHIN


def test_take_with_a_timeout_returns_none_after_about_that_long(node, topic):
    sub = node.create_subscription(Header, topic, None, 5)
    started = time.monotonic()
    assert sub.take(timeout_sec=0.2) is None
    elapsed = time.monotonic() - started
    assert 0.19 <= elapsed < 0.2 + RETURNS_WITHIN


def test_take_returns_a_queued_message_without_waiting(node, topic):
    pub = node.create_publisher(Header, topic, 5)
    sub = node.create_subscription(Header, topic, None, 5)
    pub.publish(Header(frame_id="queued"))
    assert sub.take(timeout_sec=0).frame_id == "queued"
    assert sub.take(timeout_sec=0) is None


def test_take_wakes_up_for_a_message_published_from_another_thread(node, topic):
    pub = node.create_publisher(Header, topic, 5)
    sub = node.create_subscription(Header, topic, None, 5)
    timer = threading.Timer(0.1, lambda: pub.publish(Header(frame_id="late")))
    timer.start()
    try:
        msg = sub.take()  # no timeout: waits (with the GIL released) as long as it takes
        assert msg.frame_id == "late"
    finally:
        timer.join()


def test_take_refuses_an_infinite_timeout_with_value_error(node, topic):
    sub = node.create_subscription(Header, topic, None, 5)
    with pytest.raises(ValueError, match="timeout_sec"):
        sub.take(timeout_sec=float("inf"))


def test_messages_arrive_in_publish_order(node, topic):
    pub = node.create_publisher(Header, topic, 10)
    sub = node.create_subscription(Header, topic, None, 10)
    for i in range(10):
        pub.publish(Header(frame_id=str(i)))
    assert [take(sub).frame_id for _ in range(10)] == [str(i) for i in range(10)]
    assert sub.take(timeout_sec=0) is None


def test_every_subscription_gets_an_equal_message_over_the_same_memory(node, topic):
    pub = node.create_publisher(Image, topic, 5)
    subs = [node.create_subscription(Image, topic, None, 5) for _ in range(3)]
    sent = Image(header=Header(frame_id="cam"), height=2, width=2, encoding="mono8", step=2, data=b"\x01\x02\x03\x04")
    pub.publish(sent)
    got = [take(s) for s in subs]
    assert all(m == sent for m in got)
    assert len({array_address(m.data) for m in got}) == 1  # in one process: one copy, shared by all
    assert all(m.data.base.backend == "cpu" for m in got)
    assert got[0] is not got[1]  # but each gets its own message object
    got[0].header.frame_id = "changed"
    assert got[1].header.frame_id == "cam"


def test_a_subscription_created_later_does_not_get_earlier_volatile_messages(node, topic):
    pub = node.create_publisher(Header, topic, 5)
    early = node.create_subscription(Header, topic, None, 5)
    pub.publish(Header(frame_id="before"))
    late = node.create_subscription(Header, topic, None, 5)
    assert take(early).frame_id == "before"
    assert late.take(timeout_sec=0) is None


def test_a_transient_local_subscription_gets_the_latest_message_published_before_it(node, topic):
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    pub = node.create_publisher(Header, topic, latched)
    pub.publish(Header(frame_id="old"))
    pub.publish(Header(frame_id="latest"))
    late = node.create_subscription(Header, topic, None, latched)
    assert take(late).frame_id == "latest"


def test_a_full_best_effort_queue_drops_messages_without_blocking(node, topic):
    pub = node.create_publisher(Header, topic, freight.qos_profile_sensor_data)
    sub = node.create_subscription(Header, topic, None, freight.qos_profile_sensor_data)
    for i in range(8):
        pub.publish(Header(frame_id=str(i)))  # never raises
    got = []
    while (msg := sub.take(timeout_sec=0)) is not None:
        got.append(int(msg.frame_id))
    assert len(got) == freight.qos_profile_sensor_data.depth
    assert got == sorted(got)


def test_a_full_keep_last_queue_keeps_the_newest_and_never_blocks_a_reliable_publisher(node, topic):
    # rclpy's default profile on both sides, as with Fast DDS.
    pub = node.create_publisher(Header, topic, QoSProfile(depth=2))
    sub = node.create_subscription(Header, topic, None, QoSProfile(depth=2))
    started = time.monotonic()
    for i in range(20):
        pub.publish(Header(frame_id=str(i)))  # never raises
    assert time.monotonic() - started < RETURNS_WITHIN
    assert [take(sub).frame_id for _ in range(2)] == ["18", "19"]


def test_a_full_keep_all_queue_raises_queue_full_after_max_blocking_time(node, topic):
    keep_all = QoSProfile(history=HistoryPolicy.KEEP_ALL, max_blocking_time=0.05)
    pub = node.create_publisher(Header, topic, keep_all)
    sub = node.create_subscription(Header, topic, None, keep_all)
    depth = 16  # what KEEP_ALL means: the context's longest queue (Rust's Limits::max_depth)
    for i in range(depth):
        pub.publish(Header(frame_id=str(i)))
    started = time.monotonic()
    with pytest.raises(freight.QueueFullError, match="full queue"):
        pub.publish(Header(frame_id="late"))
    assert time.monotonic() - started < RETURNS_WITHIN
    assert [take(sub).frame_id for _ in range(depth)] == [str(i) for i in range(depth)]
    pub.publish(Header(frame_id="again"))  # room again
    assert take(sub).frame_id == "again"


def test_a_received_message_can_be_published_again(node, topic):
    pub = node.create_publisher(UInt8MultiArray, topic, 5)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 5)
    pub.publish(UInt8MultiArray(data=b"relay"))
    first = take(sub)
    pub.publish(first)
    second = take(sub)
    assert second == first
    assert second.data.tobytes() == b"relay"


# ------------------------------------------------------------------ callbacks and executors


def test_spin_once_runs_one_callback_per_call(node, topic):
    got = []
    node.create_subscription(Header, topic, lambda m: got.append(m.frame_id), 5)
    pub = node.create_publisher(Header, topic, 5)
    pub.publish(Header(frame_id="a"))
    pub.publish(Header(frame_id="b"))
    freight.spin_once(node, timeout_sec=TAKE_TIMEOUT)
    assert got == ["a"]
    freight.spin_once(node, timeout_sec=TAKE_TIMEOUT)
    assert got == ["a", "b"]


def test_spin_once_without_work_returns_after_its_timeout(node, topic):
    got = []
    node.create_subscription(Header, topic, got.append, 5)
    started = time.monotonic()
    freight.spin_once(node, timeout_sec=0.1)
    assert 0.09 <= time.monotonic() - started < 0.1 + RETURNS_WITHIN
    assert got == []


def test_a_callback_exception_propagates_out_of_spin_once(node, topic):
    seen = []

    def callback(msg):
        seen.append(msg.frame_id)
        if msg.frame_id == "bad":
            raise RuntimeError("callback failed on purpose")

    node.create_subscription(Header, topic, callback, 5)
    pub = node.create_publisher(Header, topic, 5)
    pub.publish(Header(frame_id="bad"))
    pub.publish(Header(frame_id="good"))
    with pytest.raises(RuntimeError, match="on purpose"):
        freight.spin_once(node, timeout_sec=TAKE_TIMEOUT)
    freight.spin_once(node, timeout_sec=TAKE_TIMEOUT)  # the executor goes on with the next message
    assert seen == ["bad", "good"]


def test_subscriptions_without_a_callback_are_left_to_take(node, topic):
    got = []
    node.create_subscription(Header, topic, got.append, 5)
    manual = node.create_subscription(Header, topic, None, 5)
    node.create_publisher(Header, topic, 5).publish(Header(frame_id="x"))
    freight.spin_once(node, timeout_sec=TAKE_TIMEOUT)
    assert [m.frame_id for m in got] == ["x"]
    assert take(manual).frame_id == "x"


@pytest.mark.parametrize("executor_class", [freight.SingleThreadedExecutor, freight.MultiThreadedExecutor])
def test_an_executor_spinning_in_a_thread_runs_every_callback(ctx, node, topic, executor_class):
    got = []
    lock = threading.Lock()

    def callback(msg):
        with lock:
            got.append(int(msg.frame_id))

    node.create_subscription(Header, topic, callback, QoSProfile(depth=16))
    # The executor may fall behind: a publisher that waits rather than fails.
    pub = node.create_publisher(Header, topic, QoSProfile(depth=16, max_blocking_time=RETURNS_WITHIN))
    executor = executor_class(context=ctx)
    executor.add_node(node)
    thread, failures = spin_in_thread(executor)
    try:
        count = 8
        for i in range(count):
            pub.publish(Header(frame_id=str(i)))
        wait_until(lambda: len(got) == count, f"{count} callbacks", timeout=2 * RETURNS_WITHIN)
    finally:
        stop(executor, thread)
    assert failures == []
    assert sorted(got) == list(range(8))
    if executor_class is freight.SingleThreadedExecutor:
        assert got == list(range(8))  # one thread: in order


@pytest.mark.parametrize("executor_class", [freight.SingleThreadedExecutor, freight.MultiThreadedExecutor])
def test_executor_shutdown_stops_spin(ctx, node, topic, executor_class):
    node.create_subscription(Header, topic, lambda m: None, 5)
    executor = executor_class(context=ctx)
    executor.add_node(node)
    thread, failures = spin_in_thread(executor)
    time.sleep(0.05)
    assert thread.is_alive()
    assert stop(executor, thread) < RETURNS_WITHIN
    assert failures == []


def test_spin_returns_when_the_context_shuts_down(node, topic):
    node.create_subscription(Header, topic, lambda m: None, 5)
    thread = threading.Thread(target=freight.spin, args=(node,), daemon=True)
    thread.start()
    time.sleep(0.05)
    assert thread.is_alive()
    node.context.shutdown()
    thread.join(RETURNS_WITHIN)
    assert not thread.is_alive()


def test_a_callback_exception_ends_multi_threaded_spin(ctx, node, topic):
    def callback(msg):
        raise RuntimeError(f"failed on {msg.frame_id}")

    node.create_subscription(Header, topic, callback, 5)
    pub = node.create_publisher(Header, topic, QoSProfile(depth=5, max_blocking_time=RETURNS_WITHIN))
    executor = freight.MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    thread, failures = spin_in_thread(executor)
    try:
        # The failure surfaces in spin no later than the next callback it dispatches.
        deadline = time.monotonic() + RETURNS_WITHIN
        while thread.is_alive() and time.monotonic() < deadline:
            pub.publish(Header(frame_id="x"))
            thread.join(0.05)
        assert not thread.is_alive(), "spin did not raise the callback's exception"
    finally:
        stop(executor, thread)
    assert len(failures) == 1 and isinstance(failures[0], RuntimeError)
    assert "failed on x" in str(failures[0])


def test_a_callback_exception_ends_multi_threaded_spin_without_further_messages(ctx, node, topic):
    def callback(msg):
        time.sleep(0.05)
        raise RuntimeError("failed on purpose")

    node.create_subscription(Header, topic, callback, 5)
    pub = node.create_publisher(Header, topic, 5)
    executor = freight.MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    thread, failures = spin_in_thread(executor)
    try:
        pub.publish(Header())
        thread.join(2.0)
        assert not thread.is_alive()
    finally:
        stop(executor, thread)
    assert failures and isinstance(failures[0], RuntimeError)


def test_multi_threaded_executor_keeps_up_with_a_short_burst(ctx, node, topic):
    got = []
    node.create_subscription(Header, topic, got.append, QoSProfile(depth=16))
    pub = node.create_publisher(Header, topic, QoSProfile(depth=16, max_blocking_time=RETURNS_WITHIN))
    executor = freight.MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    thread, _ = spin_in_thread(executor)
    try:
        for _ in range(15):
            pub.publish(Header())
        # 15 empty callbacks take microseconds each; 2 s is a bound for "at all".
        deadline = time.monotonic() + 2.0
        while len(got) < 15 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(got) == 15
    finally:
        stop(executor, thread)


def test_executors_know_their_nodes(ctx, node):
    executor = freight.SingleThreadedExecutor(context=ctx)
    assert executor.add_node(node) is True
    assert executor.add_node(node) is False
    assert executor.get_nodes() == [node]
    executor.remove_node(node)
    assert executor.get_nodes() == []


# ------------------------------------------------------------------ timers


def test_a_timer_fires_from_spin_once(node):
    ticks = []
    timer = node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
    for _ in range(3):
        freight.spin_once(node, timeout_sec=RETURNS_WITHIN)
    assert len(ticks) == 3
    assert ticks == sorted(ticks)
    assert not timer.is_canceled()


def test_a_timer_fires_repeatedly_while_an_executor_spins(ctx, node):
    ticks = []
    node.create_timer(0.01, lambda: ticks.append(1))
    executor = freight.SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    thread, failures = spin_in_thread(executor)
    try:
        wait_until(lambda: len(ticks) >= 5, "5 timer calls")
    finally:
        stop(executor, thread)
    assert failures == []


def test_a_canceled_timer_does_not_fire_and_reset_restarts_it(node):
    ticks = []
    timer = node.create_timer(0.01, lambda: ticks.append(1))
    timer.cancel()
    assert timer.is_canceled()
    assert timer.time_until_next_call() is None
    freight.spin_once(node, timeout_sec=0.1)
    assert ticks == []
    timer.reset()
    freight.spin_once(node, timeout_sec=RETURNS_WITHIN)
    assert ticks == [1]


def test_a_destroyed_timer_does_not_fire(node):
    ticks = []
    timer = node.create_timer(0.01, lambda: ticks.append(1))
    assert node.destroy_timer(timer) is True
    freight.spin_once(node, timeout_sec=0.1)
    assert ticks == []


@pytest.mark.parametrize("period", [0, -1.0])
def test_a_timer_period_must_be_positive(node, period):
    with pytest.raises(ValueError, match="positive"):
        node.create_timer(period, lambda: None)


def test_timers_and_subscriptions_share_one_executor(node, topic):
    events = []
    node.create_timer(0.05, lambda: events.append("timer"))
    node.create_subscription(Header, topic, lambda m: events.append(m.frame_id), 5)
    node.create_publisher(Header, topic, 5).publish(Header(frame_id="msg"))
    deadline = time.monotonic() + RETURNS_WITHIN
    while not {"timer", "msg"} <= set(events) and time.monotonic() < deadline:
        freight.spin_once(node, timeout_sec=0.5)
    assert {"timer", "msg"} <= set(events)


# ------------------------------------------------------------------ lifecycle


def test_init_ok_shutdown_lifecycle(default_context, topic):
    assert freight.ok() is False
    context = freight.init(local_only=True)
    assert isinstance(context, freight.Context)
    assert freight.ok() is True
    node = freight.Node("lifecycle")  # uses the default context
    assert node.context is context
    pub = node.create_publisher(Header, topic, 5)
    sub = node.create_subscription(Header, topic, None, 5)
    pub.publish(Header(frame_id="up"))
    assert take(sub).frame_id == "up"
    freight.shutdown()
    assert freight.ok() is False
    assert context.ok() is False


def test_init_twice_raises_context_error(default_context):
    freight.init(local_only=True)
    with pytest.raises(freight.ContextError, match="already"):
        freight.init(local_only=True)
    assert freight.ok()


def test_a_node_before_init_raises_context_error(default_context):
    with pytest.raises(freight.ContextError, match="init"):
        freight.Node("too_early")
    with pytest.raises(freight.ContextError):
        freight.create_node("too_early")


def test_a_node_after_shutdown_raises_context_error(default_context):
    freight.init(local_only=True)
    freight.shutdown()
    with pytest.raises(freight.ContextError):
        freight.Node("too_late")


def test_shutdown_without_init_raises_context_error(default_context):
    with pytest.raises(freight.ContextError):
        freight.shutdown()


def test_init_again_after_shutdown_makes_a_new_context(default_context):
    first = freight.init(local_only=True)
    freight.shutdown()
    second = freight.init(local_only=True)
    assert second is not first
    assert freight.ok() and not first.ok()


def test_init_can_install_a_given_context(default_context):
    mine = freight.Context(local_only=True)
    assert freight.init(context=mine) is mine
    assert freight.Node("installed").context is mine
    assert freight.ok(context=mine)
    freight.shutdown()
    assert not mine.ok()


def test_ok_and_shutdown_of_an_explicit_context(default_context):
    mine = freight.Context(local_only=True)
    assert freight.ok(context=mine) is True
    assert freight.ok() is False  # the default context is another matter
    freight.shutdown(context=mine)
    assert freight.ok(context=mine) is False


def test_a_node_on_a_shut_down_context_raises_context_error():
    context = freight.Context(local_only=True)
    context.shutdown()
    with pytest.raises(freight.ContextError):
        freight.Node("too_late", context=context)


# ------------------------------------------------------------------ held samples


def test_in_one_process_a_subscription_may_hold_more_than_the_shared_memory_limit(node, topic):
    # The limit of 16 held samples is iceoryx2's; messages that stay in this
    # process (the intra route) are not counted.
    pub = node.create_publisher(UInt8MultiArray, topic, 16)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 16)
    held = []
    for i in range(40):
        pub.publish(UInt8MultiArray(data=bytes([i])))
        held.append(take(sub))
    assert all(m.data.base.backend == "cpu" for m in held)
    assert [int(m.data[0]) for m in held] == list(range(40))


def test_holding_too_many_shared_memory_samples_raises_too_many_held(node, topic, remote_subscriber):
    pub = node.create_publisher(UInt8MultiArray, topic, 16)
    sub = node.create_subscription(UInt8MultiArray, topic, None, 16)
    remote_subscriber(UInt8MultiArray)
    wait_until(lambda: pub.get_subscription_count() == 2, "the child's subscription")

    held = []
    for i in range(16):
        pub.publish(UInt8MultiArray(data=bytes([i])))
        held.append(take(sub))
    assert held[0].data.base.backend == "shm"
    pub.publish(UInt8MultiArray(data=bytes([16])))
    with pytest.raises(freight.TooManyHeldError) as info:
        sub.take(timeout_sec=TAKE_TIMEOUT)
    assert isinstance(info.value, freight.LimitError) and isinstance(info.value, ValueError)
    text = str(info.value)
    assert "16" in text and "del msg" in text and "copy" in text

    # Arrays of the data hold their sample as the message does: keep 15 arrays.
    arrays = [m.data for m in held[1:]]
    del held, info
    gc.collect()
    msg = take(sub)  # the message that could not be taken is still there
    assert msg.data.tolist() == [16]
    del msg
    gc.collect()
    assert [int(a[0]) for a in arrays] == list(range(1, 16))  # still readable
    copies = [a.copy() for a in arrays]
    del arrays
    gc.collect()
    for i in range(17, 33):  # with everything released, 16 more fit again
        pub.publish(UInt8MultiArray(data=bytes([i])))
        assert take(sub).data.tolist() == [i]
    assert [int(c[0]) for c in copies] == list(range(1, 16))


# ------------------------------------------------------------------ lifetime of received memory


@pytest.mark.parametrize("route", ["intra", "shm"])
def test_received_arrays_outlive_subscription_node_and_context(topic, remote_subscriber, route):
    context = freight.Context(local_only=True)
    node = freight.Node("lifetime", context=context)
    pub = node.create_publisher(UInt64MultiArray, topic, 5)
    sub = node.create_subscription(UInt64MultiArray, topic, None, 5)
    if route == "shm":
        remote_subscriber(UInt64MultiArray)
        wait_until(lambda count=pub.get_subscription_count: count() == 2, "the child's subscription")
    values = np.arange(1000, 1256, dtype=np.uint64)
    loan = pub.loan(values.shape, np.uint64)
    loan[:] = values
    pub.publish(UInt64MultiArray(data=loan))
    msg = take(sub)
    assert msg.data.base.backend == ("shm" if route == "shm" else "cpu")
    data, layout = msg.data, msg.layout

    del msg, sub, pub, loan
    node.destroy_node()
    del node
    context.shutdown()
    del context
    gc.collect()

    assert data.tolist() == values.tolist()
    assert data.flags.writeable is False
    assert layout.dim == []
    view = data.reshape(16, 16)[::2]  # views keep it alive too
    del data
    gc.collect()
    assert view[1, 0] == 1032


def test_a_received_message_stays_valid_after_the_publisher_is_gone(node, topic):
    pub = node.create_publisher(Image, topic, 5)
    sub = node.create_subscription(Image, topic, None, 5)
    frame = pub.loan(64, np.uint8)
    frame[:] = np.arange(64, dtype=np.uint8)
    pub.publish(Image(height=8, width=8, encoding="mono8", step=8, data=frame))
    node.destroy_publisher(pub)
    del pub, frame
    gc.collect()
    msg = take(sub)
    assert msg.data.tolist() == list(range(64))
