// A message type of the user's own .msg files from C++ (tests/user_types.rs
// generates its header with `freight msg cpp` and runs this):
//   user_types inproc        publish by copy and by loan, take, compare
//   user_types pub TOPIC N   N messages by copy, once a subscription matched;
//                            then waits for stdin to close
//   user_types sub TOPIC N   takes N messages, prints what they hold
//   user_types serve NAME    serves freight_test_msgs/srv/Detect until stdin closes
//   user_types call NAME N   calls Detect N times, prints each reply
//   user_types serve_loaned NAME, call_loaned NAME N: the same, requests and
//                            responses written into loans
//   user_types device_service  Detect with requests and responses in "cuda"
//                            memory both ways (ServiceOptions), in one process,
//                            against the simulated driver (tests) or a real one
// freight_test_msgs/msg/Everything has every kind of field: nested messages
// in and out of sequences, fixed arrays, strings, four buffer fields.
#include "check.hpp"
#include "cuda_driver.hpp"

#include <freight/freight.hpp>
#include <freight/msgs/freight_test_msgs.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using freight::msgs::freight_test_msgs::Detect;
using freight::msgs::freight_test_msgs::Everything;
using freight::msgs::freight_test_msgs::Inner;
using namespace std::chrono_literals;

static Inner inner(std::int32_t value, const std::string &label) {
  Inner i;
  i.value = value;
  i.label = label;
  return i;
}

// Message k, as tests/user_types.rs makes it too.
static Everything everything(std::uint32_t k) {
  Everything m;
  m.header.frame_id = "frame-" + std::to_string(k);
  m.header.stamp.sec = static_cast<std::int32_t>(k);
  m.inner = inner(static_cast<std::int32_t>(k), "in");
  m.inners = {inner(1, "a"), inner(2, "b")};
  m.fixed_inners[1] = inner(9, "nine");
  std::vector<std::uint8_t> data(1 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<std::uint8_t>(i * 7 + k);
  }
  m.data = data;
  m.floats = std::vector<float>{0.5f, 1.5f * static_cast<float>(k)};
  m.chars = std::vector<std::uint8_t>{'h', 'i'};
  m.flags = {true, false, true};
  m.names = {"x", "y"};
  m.fixed[2] = 3.5;
  m.covariance[35] = static_cast<double>(k);
  m.bounded = {-1, 2};
  m.type = "kind";
  m.loop = 7;
  m.pose.pose.position.x = 1.25;
  return m;
}

// What a receiver prints of a message: enough that the sender's side can
// check every kind of field.
static std::string summary(const Everything &m) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < m.data.size(); ++i) {
    sum += m.data[i];
  }
  return m.header.frame_id + " inner=" + std::to_string(m.inner.value) + " inners=" + std::to_string(m.inners.size()) +
         " fixed_inner=" + m.fixed_inners[1].label + " data=" + std::to_string(m.data.size()) + "/" +
         std::to_string(sum) + " floats=" + std::to_string(m.floats[1]) + " chars=" +
         std::string(m.chars.data(), m.chars.data() + m.chars.size()) + " names=" + m.names[1] +
         " covariance=" + std::to_string(m.covariance[35]) + " bounded=" + std::to_string(m.bounded[0]) +
         " type=" + m.type + " x=" + std::to_string(m.pose.pose.position.x);
}

static int inproc() {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_types");
  auto pub = node.create_publisher<Everything>("/cpp/everything", freight::QoS(10));
  auto sub = node.create_subscription<Everything>("/cpp/everything", freight::QoS(10));
  const Everything sent = everything(3);
  pub.publish_copy(sent);
  auto got = sub.take(1000ms);
  EXPECT(got.has_value());
  EXPECT(summary(**got) == summary(sent));

  // By loan: the four buffers written in place, the small fields set after.
  auto loan = pub.loan_buffers({16, 8, 0, 2});
  EXPECT(loan.buffer_count() == 4);
  for (std::size_t b = 0; b < 4; ++b) {
    for (std::size_t i = 0; i < loan.size(b); ++i) {
      loan.data(b)[i] = static_cast<std::uint8_t>(b + i);
    }
  }
  auto written = std::move(loan).assume_init();
  written->type = "loaned";
  written->names = {"n"};
  pub.publish(std::move(written));
  auto loaned = sub.take(1000ms);
  EXPECT(loaned.has_value());
  EXPECT((*loaned)->type == "loaned");
  EXPECT((*loaned)->data.size() == 16 && (*loaned)->data[15] == 15);
  EXPECT((*loaned)->floats.size() == 2);
  EXPECT((*loaned)->chars.size() == 2 && (*loaned)->chars[1] == 4);
  EXPECT((*loaned)->names.size() == 1 && (*loaned)->names[0] == "n");
  // A service of the package's own .srv, loans both ways, in this process.
  auto server = node.create_service_server<Detect>("/cpp/detect");
  auto client = node.create_client<Detect>("/cpp/detect");
  EXPECT(client.wait_for_service(1000ms));
  auto request_loan = client.loan_request({4});
  for (std::size_t i = 0; i < 4; ++i) {
    request_loan.data(0)[i] = static_cast<std::uint8_t>(10 + i);
  }
  auto request = std::move(request_loan).assume_init();
  request->image.width = 4;
  auto pending = client.async_send_request(std::move(request));
  auto taken = server.take_request(1000ms);
  EXPECT(taken.has_value());
  EXPECT(taken->first->image.width == 4 && taken->first->image.data[3] == 13);
  auto response_loan = server.loan_response({2});
  response_loan.data(0)[0] = 7;
  response_loan.data(0)[1] = 8;
  auto response = std::move(response_loan).assume_init();
  response->count = 2;
  server.send_response(taken->second, std::move(response));
  auto reply = pending.get(1000ms);
  EXPECT(reply->count == 2 && reply->masks.size() == 2 && reply->masks[1] == 8);
  // A field over its .msg bound (string<=8 label) is refused, as ROS 2 refuses to serialize it.
  Everything over = everything(4);
  over.inner.label = "nine char";
  std::string refused;
  try {
    pub.publish_copy(over);
  } catch (const freight::Error &e) {
    refused = e.what();
  }
  EXPECT(refused.find("a string<=8 holds at most 8 bytes, not 9") != std::string::npos);
  std::cout << "took " << summary(**got) << "\nloaned " << loaned->backend() << "\nrefused " << refused
            << "\ninproc ok\n";
  return 0;
}

static int publish(const std::string &topic, std::uint32_t n) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_pub");
  auto pub = node.create_publisher<Everything>(topic, freight::QoS(10));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (pub.get_subscription_count() == 0) {
    EXPECT(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(5ms);
  }
  for (std::uint32_t k = 1; k <= n; ++k) {
    pub.publish_copy(everything(k));
    std::cout << "sent " << k << std::endl;
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
  freight::Node node = ctx.create_node("cpp_user_sub");
  auto sub = node.create_subscription<Everything>(topic, freight::QoS(10));
  std::cout << "ready" << std::endl;
  for (std::uint32_t k = 1; k <= n; ++k) {
    auto got = sub.take(10000ms);
    EXPECT(got.has_value());
    std::cout << "got " << got->backend() << " " << summary(**got) << std::endl;
  }
  return 0;
}

// Detect's answer: as many objects as the image is wide, the masks its
// bytes reversed.
static Detect::Response detect(const Detect::Request &rq) {
  Detect::Response r;
  r.count = rq.image.width;
  std::vector<std::uint8_t> masks(rq.image.data.size());
  for (std::size_t i = 0; i < masks.size(); ++i) {
    masks[i] = rq.image.data[masks.size() - 1 - i];
  }
  r.masks = masks;
  return r;
}

static int serve(const std::string &name) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_server");
  auto service =
      node.create_service<Detect>(name, [](const freight::Sample<Detect::Request> &rq) { return detect(*rq); });
  freight::Executor executor;
  executor.add_node(node);
  std::thread stop([&executor] {
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    executor.cancel();
  });
  std::cout << "ready" << std::endl;
  executor.spin();
  stop.join();
  return 0;
}

static int call(const std::string &name, std::uint32_t n) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_client");
  auto client = node.create_client<Detect>(name);
  EXPECT(client.wait_for_service(10s));
  for (std::uint32_t k = 1; k <= n; ++k) {
    Detect::Request rq;
    rq.image.width = k;
    rq.image.data = std::vector<std::uint8_t>{1, 2, static_cast<std::uint8_t>(k)};
    rq.min_score = 0.25f;
    auto reply = client.call(rq, 10s);
    std::cout << "reply " << reply->count << " " << reply->masks.size() << " " << int(reply->masks[0]) << std::endl;
  }
  return 0;
}

// Serves Detect from a ServiceServer, each response written into a loan.
static int serve_loaned(const std::string &name) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_loan_server");
  auto server = node.create_service_server<Detect>(name);
  std::atomic<bool> done{false};
  std::thread stop([&done] {
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    done = true;
  });
  std::cout << "ready" << std::endl;
  while (!done) {
    auto taken = server.take_request(50ms);
    if (!taken) {
      continue;
    }
    const Detect::Request &rq = *taken->first;
    const std::size_t n = rq.image.data.size();
    auto loan = server.loan_response({n});
    for (std::size_t i = 0; i < n; ++i) {
      loan.data(0)[i] = rq.image.data[n - 1 - i];
    }
    auto response = std::move(loan).assume_init();
    response->count = rq.image.width;
    server.send_response(taken->second, std::move(response));
  }
  stop.join();
  return 0;
}

// Calls Detect N times, each request's image written into a loan.
static int call_loaned(const std::string &name, std::uint32_t n) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_loan_client");
  auto client = node.create_client<Detect>(name);
  EXPECT(client.wait_for_service(10s));
  for (std::uint32_t k = 1; k <= n; ++k) {
    auto loan = client.loan_request({3});
    loan.data(0)[0] = 1;
    loan.data(0)[1] = 2;
    loan.data(0)[2] = static_cast<std::uint8_t>(k);
    auto rq = std::move(loan).assume_init();
    rq->image.width = k;
    auto reply = client.async_send_request(std::move(rq)).get(10s);
    std::cout << "reply " << reply->count << " " << reply->masks.size() << " " << int(reply->masks[0]) << std::endl;
  }
  return 0;
}

// Detect between a client whose requests are lent in device memory and a
// server that takes them there, its responses lent there too.
static int device_service() {
  Driver cuda;
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("cpp_user_device");
  freight::ServiceOptions on_device;
  on_device.backend = "cuda";
  on_device.accepted_backends = {"cuda"};
  auto server = node.create_service_server<Detect>("/cpp/detect_cuda", on_device);
  auto client = node.create_client<Detect>("/cpp/detect_cuda", on_device);
  EXPECT(client.wait_for_service(1000ms));
  const std::size_t n = 4096;
  std::vector<std::uint8_t> pixels(n);
  for (std::size_t i = 0; i < n; ++i) {
    pixels[i] = static_cast<std::uint8_t>(i % 251);
  }
  auto loan = client.loan_request({n});
  EXPECT(loan.backend() == "cuda" && loan.data(0) == nullptr);
  EXPECT(cuda.htod(address(loan.device_ptr(0)), pixels.data(), n) == 0);
  auto request = std::move(loan).assume_init();
  request->image.width = 64;
  auto pending = client.async_send_request(std::move(request));

  auto taken = server.take_request(1000ms);
  EXPECT(taken.has_value());
  const freight::Sample<Detect::Request> &got = taken->first;
  EXPECT(got.backend() == "cuda" && got->image.width == 64);
  EXPECT(got->image.data.data() == nullptr && got->image.data.device_ptr() != nullptr);
  got.order_on_stream(nullptr);
  std::vector<std::uint8_t> seen(n);
  EXPECT(cuda.dtoh(seen.data(), address(got->image.data.device_ptr()), n) == 0);
  EXPECT(seen == pixels);
  std::vector<std::uint8_t> masks(pixels.rbegin(), pixels.rend());
  auto response_loan = server.loan_response({n});
  EXPECT(response_loan.backend() == "cuda");
  EXPECT(cuda.htod(address(response_loan.device_ptr(0)), masks.data(), n) == 0);
  auto response = std::move(response_loan).assume_init();
  response->count = 1;
  server.send_response(taken->second, std::move(response));

  auto reply = pending.get(1000ms);
  EXPECT(reply.backend() == "cuda" && reply->count == 1 && reply->masks.device_ptr() != nullptr);
  reply.order_on_stream(nullptr);
  EXPECT(cuda.dtoh(seen.data(), address(reply->masks.device_ptr()), n) == 0);
  EXPECT(seen == masks);

  freight::ServiceOptions unknown;
  unknown.backend = "warp-drive";
  try {
    node.create_client<Detect>("/cpp/detect_nowhere", unknown);
    EXPECT(false);
  } catch (const freight::Error &e) {
    std::cout << "refused " << e.what() << "\n";
  }
  std::cout << "device service cuda ok\n";
  return 0;
}

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "inproc") {
    return inproc();
  }
  if ((mode == "pub" || mode == "sub" || mode == "call" || mode == "call_loaned") && argc == 4) {
    const auto n = static_cast<std::uint32_t>(std::stoul(argv[3]));
    return mode == "pub"    ? publish(argv[2], n)
           : mode == "sub"  ? subscribe(argv[2], n)
           : mode == "call" ? call(argv[2], n)
                            : call_loaned(argv[2], n);
  }
  if (mode == "device_service") {
    return device_service();
  }
  if ((mode == "serve" || mode == "serve_loaned") && argc == 3) {
    return mode == "serve" ? serve(argv[2]) : serve_loaned(argv[2]);
  }
  std::cerr << "usage: user_types inproc | pub TOPIC N | sub TOPIC N | serve[_loaned] NAME | call[_loaned] NAME N | "
               "device_service\n";
  return 2;
}
