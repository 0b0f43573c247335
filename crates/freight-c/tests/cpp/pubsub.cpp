// Publishers and subscriptions from C++ (tests/pubsub.rs runs it):
//   pubsub inproc          both ends in this process, every path and error
//   pubsub callbacks       callback subscriptions run by an executor
//   pubsub pub TOPIC N     N images by loan, once a subscription matched;
//                          then waits for stdin to close
//   pubsub sub TOPIC N     takes N images and checks every byte
//   pubsub hold TOPIC      takes images and keeps them all, until killed
// All on local-only contexts: shared memory, nothing on the network.
#include "check.hpp"

#include <freight/freight.hpp>
#include <freight/msgs/sensor_msgs.hpp>
#include <freight/msgs/std_msgs.hpp>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>
#include <iostream>
#include <string>
#include <thread>

using freight::msgs::sensor_msgs::Image;
using freight::msgs::std_msgs::UInt8MultiArray;
using namespace std::chrono_literals;

// Frame k of a stream: width × height bgra8, every byte a function of k and
// its place, so a receiver can check all of them.
static std::uint8_t pixel(std::uint32_t k, std::size_t i) { return static_cast<std::uint8_t>(k * 31 + i * 7); }

static int inproc() {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_inproc");
  auto pub = node.create_publisher<UInt8MultiArray>("/cpp/bytes", freight::QoS(10));
  auto sub = node.create_subscription<UInt8MultiArray>("/cpp/bytes", freight::QoS(10));
  EXPECT(pub.get_subscription_count() == 1);

  // The example: a vector assigned to the buffer field, sent by copy.
  UInt8MultiArray msg;
  msg.data = std::vector<std::uint8_t>(1 << 20, 7);
  msg.layout.data_offset = 3;
  pub.publish_copy(msg);
  auto got = sub.take(1s);
  EXPECT(got.has_value());
  EXPECT((*got)->data.size() == (1u << 20) && (*got)->data[0] == 7 && (*got)->data[(1 << 20) - 1] == 7);
  EXPECT((*got)->layout.data_offset == 3);
  std::cout << "copy " << got->transport() << " " << got->backend() << " " << (*got)->data.size() << "\n";

  // A loan: written in place, published without a copy.
  auto loan = pub.loan(4096);
  EXPECT(loan.buffer_count() == 1 && loan.size() == 4096);
  std::memset(loan.data(), 9, loan.size());
  auto written = std::move(loan).assume_init();
  written->layout.dim.push_back({"bytes", 4096, 1});
  EXPECT(written->data.size() == 4096 && written->data[100] == 9);  // a view of the loan
  pub.publish(std::move(written));
  got = sub.take(1s);
  EXPECT(got.has_value() && (*got)->data.size() == 4096 && (*got)->data[4095] == 9);
  EXPECT((*got)->layout.dim.size() == 1 && (*got)->layout.dim[0].label == "bytes");
  std::cout << "loan " << got->transport() << " " << got->backend() << "\n";

  // A received buffer outlives its sample: it keeps the memory alive.
  freight::Buffer<std::uint8_t> kept = (*got)->data;
  got.reset();
  EXPECT(kept.size() == 4096 && kept[0] == 9);

  // Nothing more: take gives nothing, promptly.
  EXPECT(!sub.take(10ms).has_value());

  // A subscription that busy-polls gets the same messages.
  freight::SubscriptionOptions spinning;
  spinning.wait = freight::WaitMode::Spin;
  auto spinner = node.create_subscription<UInt8MultiArray>("/cpp/bytes", freight::QoS(10), spinning);
  pub.publish_copy(msg);
  auto spun = spinner.take(1s);
  EXPECT(spun.has_value() && (*spun)->data.size() == (1u << 20) && (*spun)->layout.data_offset == 3);
  EXPECT(sub.take(1s).has_value());
  // A wait mode outside the enum, as C may pass it (written as an int: in
  // C++ that value is no freight_wait_mode).
  freight_subscription_options bad_wait{nullptr, 0, FREIGHT_WAIT_BLOCK};
  static_assert(sizeof bad_wait.wait == sizeof(int), "a C enum is an int here");
  const int seven = 7;
  std::memcpy(&bad_wait.wait, &seven, sizeof seven);
  freight_subscription *refused = nullptr;
  EXPECT(freight_subscription_create_with_options(node.c_handle(), "std_msgs/msg/UInt8MultiArray", "/cpp/bytes",
                                                   nullptr, &bad_wait, &refused) == FREIGHT_ERROR_INVALID_ARGUMENT);
  EXPECT(refused == nullptr);

  // A loan whose buffer field was given other memory is refused.
  auto other = std::move(pub.loan(16)).assume_init();
  other->data = std::vector<std::uint8_t>(16, 1);
  try {
    pub.publish(std::move(other));
    EXPECT(false);
  } catch (const freight::Error &e) {
    EXPECT(e.status() == FREIGHT_ERROR_PUBLISH);
    std::cout << "refused " << e.what() << "\n";
  }
  // A loan of two buffers for a message of one is the core's LoanError.
  try {
    pub.loan_buffers({8, 8});
    EXPECT(false);
  } catch (const freight::Error &e) {
    EXPECT(e.status() == FREIGHT_ERROR_LOAN);
    std::cout << "refused " << e.what() << "\n";
  }
  // Another type on the same topic is refused where the subscription is made.
  try {
    node.create_subscription<Image>("/cpp/bytes", freight::QoS(10));
    EXPECT(false);
  } catch (const freight::Error &e) {
    EXPECT(e.status() == FREIGHT_ERROR_CREATE);
    std::cout << "refused " << e.what() << "\n";
  }
  // A type freight does not know, through the C ABI.
  freight_publisher *raw = nullptr;
  EXPECT(freight_publisher_create(node.c_handle(), "my_msgs/msg/Thing", "/cpp/thing", nullptr, &raw) ==
         FREIGHT_ERROR_TYPE);
  std::cout << "refused " << freight_last_error() << "\n";
  // Fields that are not the type's CDR.
  const std::uint8_t junk[] = {0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff};
  const freight_buffer none{nullptr, 0};
  freight_publisher *bytes_pub = nullptr;
  EXPECT(freight_publisher_create(node.c_handle(), "std_msgs/msg/UInt8MultiArray", "/cpp/junk", nullptr,
                                  &bytes_pub) == FREIGHT_OK);
  EXPECT(freight_publisher_publish_copy(bytes_pub, junk, sizeof junk, &none, 1) == FREIGHT_ERROR_DECODE);
  std::cout << "refused " << freight_last_error() << "\n";
  freight_publisher_destroy(bytes_pub);
  std::cout << "inproc ok\n";
  return 0;
}

static int callbacks() {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_callbacks");
  auto pub = node.create_publisher<UInt8MultiArray>("/cpp/calls", freight::QoS(10));
  std::vector<std::uint8_t> firsts;
  auto sub = node.create_subscription<UInt8MultiArray>(
      "/cpp/calls", freight::QoS(10), [&](const freight::Sample<UInt8MultiArray> &s) { firsts.push_back(s->data[0]); });
  freight::Executor executor;
  executor.add_node(node);
  for (std::uint8_t k = 1; k <= 3; ++k) {
    UInt8MultiArray msg;
    msg.data = std::vector<std::uint8_t>(64, k);
    pub.publish_copy(msg);
  }
  for (int i = 0; i < 100 && firsts.size() < 3; ++i) {
    executor.spin_once(100ms);
  }
  EXPECT((firsts == std::vector<std::uint8_t>{1, 2, 3}));
  std::cout << "called 3\n";

  // An exception in a callback comes out of the spin, as with rclcpp.
  auto thrower = node.create_subscription<UInt8MultiArray>(
      "/cpp/calls", freight::QoS(10), [](const freight::Sample<UInt8MultiArray> &) { throw std::logic_error("boom"); });
  UInt8MultiArray msg;
  msg.data = std::vector<std::uint8_t>(8, 4);
  pub.publish_copy(msg);
  try {
    for (int i = 0; i < 100; ++i) {
      executor.spin_once(100ms);
    }
    EXPECT(false);
  } catch (const std::logic_error &e) {
    std::cout << "callback threw " << e.what() << "\n";
  }
  // Destroyed: its callbacks end. cancel() from a callback ends spin().
  { auto gone = std::move(thrower); }
  auto stopper = node.create_subscription<UInt8MultiArray>(
      "/cpp/calls", freight::QoS(10), [&](const freight::Sample<UInt8MultiArray> &) { executor.cancel(); });
  pub.publish_copy(msg);
  executor.spin();
  std::cout << "spin returned\n";
  return 0;
}

static int publish(const std::string &topic, std::uint32_t n) {
  freight::Context ctx = local_context();
  auto pub = ctx.create_node("cpp_pub").create_publisher<Image>(topic, freight::QoS(10));
  for (int i = 0; i < 500 && pub.get_subscription_count() == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT(pub.get_subscription_count() > 0);
  const std::uint32_t width = 640, height = 480;
  for (std::uint32_t k = 0; k < n; ++k) {
    auto loan = pub.loan(width * height * 4);
    for (std::size_t i = 0; i < loan.size(); ++i) {
      loan.data()[i] = pixel(k, i);
    }
    auto image = std::move(loan).assume_init();
    image->header.frame_id = "camera";
    image->header.stamp.sec = static_cast<std::int32_t>(k);
    image->width = width;
    image->height = height;
    image->encoding = "bgra8";
    image->step = width * 4;
    pub.publish(std::move(image));
    std::cout << "SENT " << k << std::endl;
    std::this_thread::sleep_for(20ms);
  }
  // The publisher stays until the test is done: the samples of a publisher
  // that went away may never be received.
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}

static int subscribe(const std::string &topic, std::uint32_t n) {
  freight::Context ctx = local_context();
  auto sub = ctx.create_node("cpp_sub").create_subscription<Image>(topic, freight::QoS(10));
  std::cout << "READY" << std::endl;
  for (std::uint32_t got = 0; got < n;) {
    auto sample = sub.take(10s);
    EXPECT(sample.has_value());
    const Image &image = **sample;
    const auto k = static_cast<std::uint32_t>(image.header.stamp.sec);
    EXPECT(image.encoding == "bgra8" && image.header.frame_id == "camera");
    EXPECT(image.data.size() == std::size_t{image.step} * image.height);
    for (std::size_t i = 0; i < image.data.size(); ++i) {
      if (image.data[i] != pixel(k, i)) {
        std::cerr << "frame " << k << ": byte " << i << " is wrong\n";
        return 1;
      }
    }
    std::cout << "GOT " << k << " " << sample->transport() << " " << sample->backend() << std::endl;
    ++got;
  }
  return 0;
}

// Takes images and keeps every sample, until killed.
static int hold(const std::string &topic) {
  freight::Context ctx = local_context();
  auto sub = ctx.create_node("cpp_hold").create_subscription<Image>(topic, freight::QoS(10));
  std::vector<freight::Sample<Image>> held;
  std::cout << "READY" << std::endl;
  for (;;) {
    if (auto sample = sub.take(1s)) {
      std::cout << "HELD " << (*sample)->header.stamp.sec << std::endl;
      held.push_back(std::move(*sample));
    }
  }
}

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "inproc") {
    return inproc();
  }
  if (mode == "callbacks") {
    return callbacks();
  }
  if (mode == "hold" && argc == 3) {
    return hold(argv[2]);
  }
  if ((mode == "pub" || mode == "sub") && argc == 4) {
    const auto n = static_cast<std::uint32_t>(std::stoul(argv[3]));
    return mode == "pub" ? publish(argv[2], n) : subscribe(argv[2], n);
  }
  std::cerr << "usage: pubsub inproc | callbacks | pub TOPIC N | sub TOPIC N | hold TOPIC\n";
  return 2;
}
