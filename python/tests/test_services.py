"""Services and clients from Python: rclpy's API (``create_service``,
``create_client``, ``call``, ``call_async``, ``spin_until_future_complete``),
in one process and across processes, and what a caller is told when there is
no server or its server dies mid-call."""

import os
import threading
import time

import freight
import pytest
from freight.msgs.std_srvs import SetBool, Trigger
from support import TIMEOUT, peer


@pytest.fixture
def service_name(topic):
    return topic + "_srv"


def _set_bool(request, response):
    response.success = request.data
    response.message = f"pid {os.getpid()}"
    return response


@pytest.fixture
def spinning(node):
    """An executor spinning ``node`` in a background thread."""
    executor = freight.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield executor
    executor.shutdown()
    thread.join(TIMEOUT)


def test_service_types_are_rclpy_shaped():
    assert SetBool.Request is freight.msgs.std_srvs.SetBool_Request
    request = SetBool.Request(data=True)
    assert request.data is True
    assert repr(request) == "std_srvs.srv.SetBool_Request(data=True)"
    assert SetBool.Response().success is False
    assert Trigger.Response(message="x").message == "x"
    assert SetBool.Request.deserialize(request.serialize()) == request


def test_a_call_is_answered_by_a_service_in_the_same_process(node, service_name, spinning):
    node.create_service(SetBool, service_name, _set_bool)
    client = node.create_client(SetBool, service_name)
    assert client.wait_for_service(timeout_sec=TIMEOUT)
    response = client.call(SetBool.Request(data=True), timeout_sec=TIMEOUT)
    assert response.success is True
    assert response.message == f"pid {os.getpid()}"
    assert client.call(SetBool.Request(data=False), timeout_sec=TIMEOUT).success is False


def test_call_async_completes_under_spin_until_future_complete(node, service_name):
    node.create_service(SetBool, service_name, _set_bool)
    client = node.create_client(SetBool, service_name)
    futures = [client.call_async(SetBool.Request(data=i % 2 == 0)) for i in range(4)]
    done = []
    futures[0].add_done_callback(done.append)
    for future in futures:
        freight.spin_until_future_complete(node, future, timeout_sec=TIMEOUT)
        assert future.done()
    assert [f.result().success for f in futures] == [True, False, True, False]
    assert done == [futures[0]]


def test_services_are_in_the_graph(node, service_name):
    node.create_service(SetBool, service_name, _set_bool)
    node.create_client(Trigger, service_name + "_other")
    assert (service_name, ["std_srvs/srv/SetBool"]) in node.get_service_names_and_types()
    # As in ROS 2, whose graph lists a service name once any client or
    # server uses it.
    assert (service_name + "_other", ["std_srvs/srv/Trigger"]) in node.get_service_names_and_types()


def test_no_server_and_a_server_that_never_answers(node, service_name):
    client = node.create_client(Trigger, service_name)
    assert not client.service_is_ready()
    started = time.monotonic()
    assert client.wait_for_service(timeout_sec=0.1) is False
    assert time.monotonic() - started >= 0.1
    with pytest.raises(freight.NoServerError, match=service_name):
        client.call_async(Trigger.Request())
    # A server nobody spins: the call times out with None, as rclpy's does.
    node.create_service(Trigger, service_name, lambda req, resp: resp)
    assert client.call(Trigger.Request(), timeout_sec=0.2) is None


def test_callback_errors_and_wrong_types(node, service_name):
    def wrong(request, response):
        return "not a response"

    node.create_service(SetBool, service_name, wrong)
    client = node.create_client(SetBool, service_name)
    future = client.call_async(SetBool.Request())
    with pytest.raises(TypeError, match="returned str, not a SetBool_Response"):
        freight.spin_once(node, timeout_sec=TIMEOUT)
    assert not future.done()
    with pytest.raises(TypeError, match="must be a std_srvs/srv/SetBool_Request"):
        client.call_async(Trigger.Request())
    with pytest.raises(TypeError, match="not a freight service class"):
        node.create_client(int, service_name)


def test_a_server_in_another_process_answers(node, service_name):
    with peer("service_peer.py", "set_bool", service_name) as server:
        server.expect("READY")
        client = node.create_client(SetBool, service_name)
        assert client.wait_for_service(timeout_sec=TIMEOUT)
        for data in (True, False, True):
            response = client.call(SetBool.Request(data=data), timeout_sec=TIMEOUT)
            assert response is not None, server.transcript()
            assert response.success is data
            assert response.message == f"pid {server.pid}"


def test_a_server_that_dies_mid_call_fails_the_call_promptly(node, service_name):
    with peer("service_peer.py", "stuck", service_name) as server:
        server.expect("READY")
        client = node.create_client(SetBool, service_name)
        assert client.wait_for_service(timeout_sec=TIMEOUT)
        future = client.call_async(SetBool.Request(data=True))
        server.expect("GOT")
        server.proc.kill()
        server.proc.wait()
        started = time.monotonic()
        freight.spin_until_future_complete(node, future, timeout_sec=30)
        assert future.done()
        assert isinstance(future.exception(), freight.ServerGoneError)
        assert time.monotonic() - started < 3
        with pytest.raises(freight.NoServerError):
            client.call(SetBool.Request(), timeout_sec=TIMEOUT)


def test_call_fails_promptly_too_when_the_server_dies(node, service_name):
    with peer("service_peer.py", "stuck", service_name) as server:
        server.expect("READY")
        client = node.create_client(SetBool, service_name)
        assert client.wait_for_service(timeout_sec=TIMEOUT)
        killer = threading.Thread(target=lambda: (server.expect("GOT"), server.proc.kill()))
        killer.start()
        started = time.monotonic()
        with pytest.raises(freight.ServerGoneError):
            client.call(SetBool.Request(), timeout_sec=30)
        assert time.monotonic() - started < 5
        killer.join(TIMEOUT)
