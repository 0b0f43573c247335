// Device memory from C++ (tests/devices.rs runs it against the simulated
// CUDA driver, and the GPU checklist on a real one):
//   devices pub TOPIC N BYTES   N messages of a "cuda" publisher, each written
//                               through device_ptr() with the driver's copy
//   devices sub TOPIC N BYTES   takes N in device memory, orders its stream
//                               after them and reads them back through the driver
//   devices errors              what is refused, and how
// Message k's byte i is (k + i) % 251. No CUDA header: the few driver calls
// are looked up at run time, as freight itself does.
#include "check.hpp"
#include "cuda_driver.hpp"

#include <freight/freight.hpp>
#include <freight/msgs/std_msgs.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using freight::msgs::std_msgs::UInt8MultiArray;
using namespace std::chrono_literals;

namespace {

std::vector<std::uint8_t> pattern(std::uint32_t k, std::size_t n) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<std::uint8_t>((k + i) % 251);
  }
  return bytes;
}

int publish(const std::string &topic, int n, std::size_t bytes) {
  Driver cuda;
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_device_pub");
  freight::PublisherOptions options;
  options.backend = "cuda";
  auto pub = node.create_publisher<UInt8MultiArray>(topic, freight::QoS(10), options);
  for (int tries = 0; pub.get_subscription_count() == 0; ++tries) {
    EXPECT(tries < 3000);
    std::this_thread::sleep_for(10ms);
  }
  for (int k = 0; k < n; ++k) {
    auto loan = pub.loan(bytes);
    EXPECT(loan.backend() == "cuda" && loan.data() == nullptr && loan.size() == bytes);
    const std::vector<std::uint8_t> src = pattern(static_cast<std::uint32_t>(k), bytes);
    EXPECT(cuda.htod(address(loan.device_ptr()), src.data(), bytes) == 0);
    loan.set_write_stream(nullptr);  // the copy above: the legacy default stream
    auto msg = std::move(loan).assume_init();
    EXPECT(msg->data.device_ptr() == msg.device_ptr() && msg->data.data() == nullptr);
    msg->layout.data_offset = static_cast<std::uint32_t>(k);
    pub.publish(std::move(msg));
    std::cout << "SENT " << k << std::endl;
  }
  // Until the subscriber took them all (stdin closes).
  std::string ignored;
  while (std::getline(std::cin, ignored)) {
  }
  return 0;
}

int subscribe(const std::string &topic, int n, std::size_t bytes) {
  Driver cuda;
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_device_sub");
  freight::SubscriptionOptions options;
  options.accepted_backends = {"cuda"};
  auto sub = node.create_subscription<UInt8MultiArray>(topic, freight::QoS(10), options);
  std::cout << "READY" << std::endl;
  for (int k = 0; k < n; ++k) {
    auto sample = sub.take(30s);
    EXPECT(sample.has_value());
    const auto &data = (*sample)->data;
    EXPECT(data.data() == nullptr && data.device_ptr() != nullptr && data.size() == bytes);
    sample->order_on_stream(nullptr);  // then read on that stream
    std::vector<std::uint8_t> got(bytes);
    EXPECT(cuda.dtoh(got.data(), address(data.device_ptr()), bytes) == 0);
    const std::uint32_t number = (*sample)->layout.data_offset;
    const bool ok = got == pattern(number, bytes);
    std::cout << "GOT " << number << " " << sample->backend() << " " << (ok ? "ok" : "BAD") << std::endl;
  }
  return 0;
}

int errors() {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_device_errors");
  auto refused = [](auto &&f) {
    try {
      f();
    } catch (const freight::Error &e) {
      std::cout << "refused " << e.what() << "\n";
      return;
    }
    std::cout << "accepted\n";
  };
  // Host memory has no device address.
  auto pub = node.create_publisher<UInt8MultiArray>("/cpp/devices/errors", freight::QoS(10));
  auto loan = pub.loan(64);
  refused([&] { loan.device_ptr(); });
  freight::PublisherOptions options;
  options.backend = "gpu";
  refused([&] { node.create_publisher<UInt8MultiArray>("/cpp/devices/errors", freight::QoS(10), options); });
  freight::SubscriptionOptions accepting;
  accepting.accepted_backends = {"cuda", "tpu"};
  refused([&] { node.create_subscription<UInt8MultiArray>("/cpp/devices/errors", freight::QoS(10), accepting); });
  refused([&] {
    node.create_subscription<UInt8MultiArray>(
        "/cpp/devices/errors", freight::QoS(10), [](const freight::Sample<UInt8MultiArray> &) {}, accepting);
  });
  // A host sample, to a callback subscription with options too: ordering a
  // stream after it needs nothing.
  freight::SubscriptionOptions shm;
  shm.accepted_backends = {"shm"};
  int called = 0;
  auto callback_sub = node.create_subscription<UInt8MultiArray>(
      "/cpp/devices/errors", freight::QoS(10),
      [&](const freight::Sample<UInt8MultiArray> &s) { called += s->data.size() == 16 && s->data.device_ptr() == nullptr; },
      shm);
  auto sub = node.create_subscription<UInt8MultiArray>("/cpp/devices/errors", freight::QoS(10));
  UInt8MultiArray msg;
  msg.data = std::vector<std::uint8_t>(16, 3);
  pub.publish_copy(msg);
  auto sample = sub.take(1s);
  EXPECT(sample.has_value() && (*sample)->data.device_ptr() == nullptr);
  sample->order_on_stream(nullptr);
  freight::Executor executor;
  executor.add_node(node);
  executor.spin_once(1s);
  EXPECT(called == 1);
  std::cout << "errors ok\n";
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if ((mode == "pub" || mode == "sub") && argc == 5) {
      const int n = std::atoi(argv[3]);
      const std::size_t bytes = std::strtoul(argv[4], nullptr, 10);
      return mode == "pub" ? publish(argv[2], n, bytes) : subscribe(argv[2], n, bytes);
    }
    if (mode == "errors") {
      return errors();
    }
  } catch (const std::exception &e) {
    std::cerr << "devices " << mode << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: devices pub|sub TOPIC N BYTES | errors\n";
  return 2;
}
