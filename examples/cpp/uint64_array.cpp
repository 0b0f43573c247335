// The Qiita experiment (seed 003) on freight: a UInt64MultiArray of 100
// million elements (800 MB) per message, from a publisher to a subscriber,
// in one process and between two.
//
//   uint64_array inproc [ELEMENTS] [MESSAGES]   both nodes in this process (an executor runs the callback)
//   uint64_array sub [MESSAGES]                 a subscriber process ...
//   uint64_array pub [ELEMENTS] [MESSAGES]      ... and its publisher, started after it
//
// The original (rclcpp with a TypeAdapter for std::vector<uint64_t>) copies
// the prepared vector into the message, converts it to the ROS type before
// publishing and back after receiving: ~5.5 ms each way, 12.5-13.2 ms in
// all; only rclcpp's intra-process mode skips both (0.0009 ms). Here the
// publisher copies its prepared vector once, into a loan of shared memory
// (the "fill" column), and publishes it without another copy; the
// subscriber reads the publisher's memory in place, in one process or two.
// Each message's first element is its number; the subscriber checks it and
// the last element. Times: "fill" (the copy into the loan), "publish ->
// callback" (publish to the start of the subscriber's callback, the
// article's communication time, CLOCK_MONOTONIC on both sides).
#include <freight/freight.hpp>
#include <freight/msgs/std_msgs.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using freight::msgs::std_msgs::UInt64MultiArray;
using namespace std::chrono_literals;

namespace {

const char *const TOPIC = "/qiita/uint64_array";

std::uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// The article's data: element i is i % 255, element 0 the message's number.
std::vector<std::uint64_t> prepared(std::size_t elements) {
  std::vector<std::uint64_t> v(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    v[i] = i % 255;
  }
  return v;
}

// Copies `prepared` into a loan with `number` first and publishes it without
// another copy; returns the time the copy took.
std::uint64_t publish_one(const freight::Publisher<UInt64MultiArray> &pub, const std::vector<std::uint64_t> &data,
                          std::uint64_t number) {
  const std::uint64_t start = monotonic_ns();
  auto loan = pub.loan(data.size() * sizeof(std::uint64_t));
  auto *elements = reinterpret_cast<std::uint64_t *>(loan.data());
  std::copy(data.begin(), data.end(), elements);
  elements[0] = number;
  auto msg = std::move(loan).assume_init();
  const std::uint64_t filled = monotonic_ns();
  pub.publish(std::move(msg));
  return filled - start;
}

// Checks a received message and prints its times; returns whether it is right.
bool received(const freight::Sample<UInt64MultiArray> &sample, std::uint64_t expected, std::uint64_t fill_ns) {
  const std::uint64_t now = monotonic_ns();
  const auto &data = sample->data;
  const bool ok = data.size() > 1 && data[0] == expected && data[data.size() - 1] == (data.size() - 1) % 255;
  std::cout << "message " << expected << ": " << data.size() << " elements via " << sample.transport() << " ("
            << sample.backend() << ")";
  if (fill_ns > 0) {
    std::cout << ", fill " << ms(fill_ns) << " ms";
  }
  std::cout << ", publish -> callback " << ms(now - sample.publish_time_ns()) << " ms" << (ok ? "" : ", WRONG DATA")
            << std::endl;
  return ok;
}

freight::Context local_context() {
  freight::ContextOptions options;
  options.local_only = true;  // one host: shared memory, as the experiment
  return freight::Context(options);
}

int inproc(std::size_t elements, int messages) {
  freight::Context ctx = local_context();
  freight::Node pub_node = ctx.create_node("minimal_publisher");
  freight::Node sub_node = ctx.create_node("minimal_subscriber");
  auto pub = pub_node.create_publisher<UInt64MultiArray>(TOPIC, freight::QoS(10));
  std::uint64_t next = 0, fill_ns = 0;
  bool all_ok = true;
  auto sub = sub_node.create_subscription<UInt64MultiArray>(
      TOPIC, freight::QoS(10), [&](const freight::Sample<UInt64MultiArray> &s) {
        all_ok = received(s, next, fill_ns) && all_ok;
      });
  freight::Executor executor;
  executor.add_node(sub_node);
  const std::vector<std::uint64_t> data = prepared(elements);
  for (int i = 0; i < messages; ++i) {
    next = static_cast<std::uint64_t>(i);
    fill_ns = publish_one(pub, data, next);
    if (executor.spin_once(5s) != 1) {
      std::cerr << "message " << i << " did not arrive\n";
      return 1;
    }
  }
  return all_ok ? 0 : 1;
}

int subscriber(int messages) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("minimal_subscriber");
  auto sub = node.create_subscription<UInt64MultiArray>(TOPIC, freight::QoS(10));
  std::cout << "READY" << std::endl;
  bool all_ok = true;
  for (int i = 0; i < messages; ++i) {
    auto sample = sub.take(60s);
    if (!sample) {
      std::cerr << "message " << i << " did not arrive\n";
      return 1;
    }
    all_ok = received(*sample, static_cast<std::uint64_t>(i), 0) && all_ok;
  }
  return all_ok ? 0 : 1;
}

int publisher(std::size_t elements, int messages) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("minimal_publisher");
  auto pub = node.create_publisher<UInt64MultiArray>(TOPIC, freight::QoS(10));
  const std::vector<std::uint64_t> data = prepared(elements);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (pub.get_subscription_count() == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "no subscriber on " << TOPIC << " in 30 s\n";
      return 1;
    }
    std::this_thread::sleep_for(10ms);
  }
  for (int i = 0; i < messages; ++i) {
    const std::uint64_t fill_ns = publish_one(pub, data, static_cast<std::uint64_t>(i));
    std::cout << "published " << i << ", fill " << ms(fill_ns) << " ms" << std::endl;
    std::this_thread::sleep_for(100ms);  // the article's timer; the subscriber keeps 10
  }
  // A message its subscriber has not taken yet is lost with the publisher:
  // iceoryx2 maps a publisher's growable memory in a subscriber lazily, and
  // cannot once the publisher is gone. Give it time (freight topic pub's
  // --keep-alive).
  std::this_thread::sleep_for(500ms);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "inproc";
  auto number = [&](int i, unsigned long fallback) {
    return argc > i ? std::strtoul(argv[i], nullptr, 10) : fallback;
  };
  try {
    if (mode == "inproc") {
      return inproc(number(2, 100000000), static_cast<int>(number(3, 5)));
    }
    if (mode == "sub") {
      return subscriber(static_cast<int>(number(2, 5)));
    }
    if (mode == "pub") {
      return publisher(number(2, 100000000), static_cast<int>(number(3, 5)));
    }
  } catch (const freight::Error &e) {
    std::cerr << "uint64_array " << mode << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: uint64_array inproc [ELEMENTS] [MESSAGES] | sub [MESSAGES] | pub [ELEMENTS] [MESSAGES]\n";
  return 2;
}
