// Services from C++ (tests/services.rs runs it):
//   services inproc        servers and clients in this process, every path and error
//   services serve NAME N  serves SetBool on NAME with an executor, N requests, then exits
//                          when stdin closes
//   services call NAME     calls SetBool on NAME (waiting for a server) and prints the reply
// All on local-only contexts: shared memory, nothing on the network.
#include "check.hpp"

#include <freight/freight.hpp>
#include <freight/msgs/std_srvs.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>

using freight::msgs::std_srvs::SetBool;
using freight::msgs::std_srvs::Trigger;
using namespace std::chrono_literals;

// What every server here answers: says who answered and what it was asked.
static SetBool::Response answer(const freight::Sample<SetBool::Request> &request) {
  SetBool::Response response;
  response.success = request->data;
  response.message = "cpp " + std::to_string(getpid()) + (request->data ? " on" : " off");
  return response;
}

// The status of the freight::Error that `f` throws; FREIGHT_OK if none.
template <typename F>
static freight_status thrown(F &&f) {
  try {
    f();
  } catch (const freight::Error &e) {
    std::cout << "refused " << e.what() << "\n";
    return e.status();
  }
  return FREIGHT_OK;
}

static int inproc() {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_services");
  const std::string name = "/cpp/enable_" + std::to_string(getpid());

  // No server yet: a call is refused at once.
  auto client = node.create_client<SetBool>(name);
  EXPECT(!client.service_is_ready());
  EXPECT(!client.wait_for_service(10ms));
  SetBool::Request on;
  on.data = true;
  EXPECT(thrown([&] { client.call(on, 1s); }) == FREIGHT_ERROR_NO_SERVER);

  {
    // A callback service, run by an executor on another thread.
    auto service = node.create_service<SetBool>(name, answer);
    // rclcpp's shape: the callback fills the response.
    auto trigger = node.create_service<Trigger>(
        name + "_trigger", [](const freight::Sample<Trigger::Request> &, Trigger::Response &response) {
          response.success = true;
          response.message = "triggered";
        });
    freight::Executor executor;
    executor.add_node(node);
    std::thread spinner([&] { executor.spin(); });

    EXPECT(client.wait_for_service(5s));
    EXPECT(client.service_is_ready());
    auto reply = client.call(on, 5s);
    EXPECT(reply->success && reply->message == "cpp " + std::to_string(getpid()) + " on");
    std::cout << "call " << reply->message.substr(reply->message.rfind(' ') + 1) << " " << reply.transport() << "\n";

    SetBool::Request off;
    auto pending = client.async_send_request(off);
    auto got = pending.wait_for(5s);
    EXPECT(got.has_value() && !(*got)->success);
    // A call gives its reply once.
    EXPECT(thrown([&] { pending.wait_for(0ms); }) == FREIGHT_ERROR_INVALID_ARGUMENT);

    auto trigger_client = node.create_client<Trigger>(name + "_trigger");
    EXPECT(trigger_client.wait_for_service(5s));
    auto triggered = trigger_client.call(Trigger::Request{}, 5s);
    EXPECT(triggered->success && triggered->message == "triggered");
    std::cout << "rclcpp-shaped " << triggered->message << "\n";

    executor.cancel();
    spinner.join();
  }

  // A server that takes requests itself, and answers when it likes.
  auto server = node.create_service_server<SetBool>(name);
  EXPECT(client.wait_for_service(5s));
  auto pending = client.async_send_request(on);
  EXPECT(!pending.wait_for(0ms).has_value());  // not answered yet: still pending
  auto request = server.take_request(5s);
  EXPECT(request.has_value() && request->first->data);
  server.send_response(request->second, answer(request->first));
  auto reply = pending.wait_for(5s);
  EXPECT(reply.has_value() && (*reply)->success);
  std::cout << "polled " << (*reply)->success << "\n";

  // A server that never answers: the call times out.
  EXPECT(thrown([&] { client.call(on, 100ms); }) == FREIGHT_ERROR_TIMEOUT);
  EXPECT(server.take_request(1s).has_value());  // the request that went unanswered

  // An exception in a service callback stops the spin and comes out of it.
  auto failing = node.create_service<SetBool>(name + "_failing", [](const freight::Sample<SetBool::Request> &)
                                                                     -> SetBool::Response {
    throw std::runtime_error("no motor");
  });
  auto failing_client = node.create_client<SetBool>(name + "_failing");
  EXPECT(failing_client.wait_for_service(5s));
  auto unanswered = failing_client.async_send_request(on);
  freight::Executor executor;
  executor.add_node(node);
  try {
    executor.spin_once(5s);
    EXPECT(false);
  } catch (const std::runtime_error &e) {
    std::cout << "callback threw " << e.what() << "\n";
  }
  std::cout << "inproc ok\n";
  return 0;
}

static int serve(const std::string &name, int n) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_server");
  int served = 0;
  auto service = node.create_service<SetBool>(name, [&](const freight::Sample<SetBool::Request> &request) {
    ++served;
    return answer(request);
  });
  freight::Executor executor;
  executor.add_node(node);
  std::cout << "READY" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (served < n && std::chrono::steady_clock::now() < deadline) {
    executor.spin_once(100ms);
  }
  std::cout << "served " << served << std::endl;
  // Stays until told (stdin closes): a reply in a client's queue outlives
  // its server's process only if the client took it.
  std::string ignored;
  while (std::getline(std::cin, ignored)) {
  }
  return served == n ? 0 : 1;
}

static int call(const std::string &name) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_client");
  auto client = node.create_client<SetBool>(name);
  EXPECT(client.wait_for_service(10s));
  SetBool::Request on;
  on.data = true;
  auto reply = client.call(on, 10s);
  std::cout << "reply " << reply->success << " " << reply->message << std::endl;
  return 0;
}

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "inproc") {
      return inproc();
    }
    if (mode == "serve" && argc == 4) {
      return serve(argv[2], std::atoi(argv[3]));
    }
    if (mode == "call" && argc == 3) {
      return call(argv[2]);
    }
  } catch (const std::exception &e) {
    std::cerr << "services " << mode << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: services inproc | serve NAME N | call NAME\n";
  return 2;
}
