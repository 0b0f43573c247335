// A 55 MB colored point cloud through a three-node pipeline, as the Qiita
// article's (seed 003) RGB-D research setup: a camera node publishes clouds,
// a preprocessing node crops each one and publishes what is left, a
// consumer node checks it. In one process, or one process per node.
//
//   pointcloud_pipeline inproc [POINTS] [FRAMES]   the three nodes in this process, one executor
//   pointcloud_pipeline consumer [FRAMES]          one process per node: start the consumer,
//   pointcloud_pipeline preprocess [FRAMES]        then the preprocessor,
//   pointcloud_pipeline camera [POINTS] [FRAMES]   then the camera
//
// A point is x, y, z and rgb as float32 (16 bytes), 3,437,500 of them by
// default: 55 MB. The camera writes each cloud straight into a loan of
// shared memory; the preprocessor reads it in place and writes the points
// with z < 2 m (half of them) into a loan of its own; the consumer reads it
// in place. Each hop moves a pointer, not the cloud: the only copies are the
// two the nodes make themselves, and what each hop costs is printed.
#include <freight/freight.hpp>
#include <freight/msgs/sensor_msgs.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using freight::msgs::sensor_msgs::PointCloud2;
using freight::msgs::sensor_msgs::PointField;
using namespace std::chrono_literals;

namespace {

const char *const RAW = "/camera/points";
const char *const CROPPED = "/camera/points_cropped";
constexpr std::uint32_t POINT_STEP = 16;
constexpr float CROP_Z = 2.0f;

struct Point {
  float x, y, z, rgb;
};
static_assert(sizeof(Point) == POINT_STEP, "a point is four float32");

std::uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// Point i of frame k: z alternates below and above the crop, so the
// preprocessor keeps the even points.
Point point(std::uint32_t k, std::size_t i) {
  const float f = static_cast<float>(i % 100000);
  return Point{f * 0.001f, static_cast<float>(k), (i % 2 == 0) ? 1.0f : 3.0f, static_cast<float>(i % 4096)};
}

// Fills the message's small fields for `points` points.
void describe(PointCloud2 &cloud, std::uint32_t frame, std::size_t points) {
  cloud.header.frame_id = "camera";
  cloud.header.stamp.sec = static_cast<std::int32_t>(frame);
  cloud.height = 1;
  cloud.width = static_cast<std::uint32_t>(points);
  cloud.point_step = POINT_STEP;
  cloud.row_step = static_cast<std::uint32_t>(points * POINT_STEP);
  cloud.is_dense = true;
  cloud.fields.clear();
  const char *names[] = {"x", "y", "z", "rgb"};
  for (std::uint32_t c = 0; c < 4; ++c) {
    PointField field;
    field.name = names[c];
    field.offset = c * 4;
    field.datatype = PointField::FLOAT32;
    field.count = 1;
    cloud.fields.push_back(field);
  }
}

const Point *points_of(const PointCloud2 &cloud) { return reinterpret_cast<const Point *>(cloud.data.data()); }

// The camera: frame k drawn straight into a loan.
void publish_frame(const freight::Publisher<PointCloud2> &pub, std::uint32_t k, std::size_t points) {
  auto loan = pub.loan(points * POINT_STEP);
  auto *out = reinterpret_cast<Point *>(loan.data());
  for (std::size_t i = 0; i < points; ++i) {
    out[i] = point(k, i);
  }
  auto cloud = std::move(loan).assume_init();
  describe(*cloud, k, points);
  pub.publish(std::move(cloud));
}

// The preprocessor: the points with z < CROP_Z, read in place, written into a
// loan of their exact size.
void crop(const freight::Sample<PointCloud2> &in, const freight::Publisher<PointCloud2> &pub) {
  const std::uint64_t arrived = monotonic_ns();
  const Point *p = points_of(*in);
  const std::size_t n = in->data.size() / POINT_STEP;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    kept += p[i].z < CROP_Z;
  }
  auto loan = pub.loan(kept * POINT_STEP);
  auto *out = reinterpret_cast<Point *>(loan.data());
  for (std::size_t i = 0, j = 0; i < n; ++i) {
    if (p[i].z < CROP_Z) {
      out[j++] = p[i];
    }
  }
  auto cloud = std::move(loan).assume_init();
  describe(*cloud, static_cast<std::uint32_t>(in->header.stamp.sec), kept);
  const std::uint64_t cropped = monotonic_ns();
  pub.publish(std::move(cloud));
  std::cout << "preprocess frame " << in->header.stamp.sec << ": " << in->data.size() / 1000000.0 << " MB via "
            << in.transport() << ", camera -> here " << ms(arrived - in.publish_time_ns()) << " ms, crop "
            << ms(cropped - arrived) << " ms" << std::endl;
}

// The consumer: checks every point it was sent; returns whether all are right.
bool consume(const freight::Sample<PointCloud2> &in, std::uint32_t expected) {
  const std::uint64_t arrived = monotonic_ns();
  const Point *p = points_of(*in);
  const std::size_t n = in->data.size() / POINT_STEP;
  bool ok = in->header.stamp.sec == static_cast<std::int32_t>(expected) && n == in->width;
  for (std::size_t j = 0; ok && j < n; ++j) {
    const Point want = point(expected, 2 * j);
    ok = std::memcmp(&p[j], &want, sizeof(Point)) == 0;
  }
  std::cout << "consumer frame " << expected << ": " << n << " points via " << in.transport()
            << ", preprocess -> here " << ms(arrived - in.publish_time_ns()) << " ms" << (ok ? "" : ", WRONG POINTS")
            << std::endl;
  return ok;
}

freight::Context local_context() {
  freight::ContextOptions options;
  options.local_only = true;
  return freight::Context(options);
}

// Waits until `pub` has a subscription.
bool matched(const freight::Publisher<PointCloud2> &pub) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (pub.get_subscription_count() == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "no subscription in 30 s\n";
      return false;
    }
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

int inproc(std::size_t points, std::uint32_t frames) {
  freight::Context ctx = local_context();
  freight::Node camera = ctx.create_node("camera");
  freight::Node preprocess = ctx.create_node("preprocess");
  freight::Node consumer = ctx.create_node("consumer");
  auto raw = camera.create_publisher<PointCloud2>(RAW, freight::QoS(2));
  auto cropped = preprocess.create_publisher<PointCloud2>(CROPPED, freight::QoS(2));
  auto crop_sub = preprocess.create_subscription<PointCloud2>(
      RAW, freight::QoS(2), [&](const freight::Sample<PointCloud2> &in) { crop(in, cropped); });
  std::uint32_t next = 0;
  bool all_ok = true;
  auto sink = consumer.create_subscription<PointCloud2>(CROPPED, freight::QoS(2),
                                                       [&](const freight::Sample<PointCloud2> &in) {
                                                         all_ok = consume(in, next) && all_ok;
                                                       });
  freight::Executor executor;
  executor.add_node(preprocess);
  executor.add_node(consumer);
  for (next = 0; next < frames; ++next) {
    publish_frame(raw, next, points);
    std::size_t ran = 0;
    for (int tries = 0; ran < 2 && tries < 50; ++tries) {
      ran += executor.spin_once(100ms);
    }
    if (ran != 2) {
      std::cerr << "frame " << next << " did not go through the pipeline\n";
      return 1;
    }
  }
  return all_ok ? 0 : 1;
}

int camera_process(std::size_t points, std::uint32_t frames) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("camera");
  auto raw = node.create_publisher<PointCloud2>(RAW, freight::QoS(2));
  if (!matched(raw)) {
    return 1;
  }
  for (std::uint32_t k = 0; k < frames; ++k) {
    publish_frame(raw, k, points);
    std::this_thread::sleep_for(200ms);  // a 5 Hz camera: each frame crosses before the next
  }
  // A frame its subscriber has not taken yet is lost with the publisher:
  // iceoryx2 maps a publisher's growable memory in a subscriber lazily, and
  // cannot once the publisher is gone. Give it time (freight topic pub's
  // --keep-alive).
  std::this_thread::sleep_for(500ms);
  return 0;
}

int preprocess_process(std::uint32_t frames) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("preprocess");
  auto cropped = node.create_publisher<PointCloud2>(CROPPED, freight::QoS(2));
  auto raw = node.create_subscription<PointCloud2>(RAW, freight::QoS(2));
  if (!matched(cropped)) {
    return 1;
  }
  std::cout << "READY" << std::endl;
  for (std::uint32_t k = 0; k < frames; ++k) {
    auto in = raw.take(30s);
    if (!in) {
      std::cerr << "preprocess: frame " << k << " did not arrive\n";
      return 1;
    }
    crop(*in, cropped);
  }
  std::this_thread::sleep_for(500ms);  // as the camera's
  return 0;
}

int consumer_process(std::uint32_t frames) {
  freight::Context ctx = local_context();
  freight::Node node = ctx.create_node("consumer");
  auto sink = node.create_subscription<PointCloud2>(CROPPED, freight::QoS(2));
  std::cout << "READY" << std::endl;
  bool all_ok = true;
  for (std::uint32_t k = 0; k < frames; ++k) {
    auto in = sink.take(30s);
    if (!in) {
      std::cerr << "consumer: frame " << k << " did not arrive\n";
      return 1;
    }
    all_ok = consume(*in, k) && all_ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "inproc";
  auto number = [&](int i, unsigned long fallback) {
    return argc > i ? std::strtoul(argv[i], nullptr, 10) : fallback;
  };
  const std::size_t default_points = 55000000 / POINT_STEP;
  try {
    if (mode == "inproc") {
      return inproc(number(2, default_points), static_cast<std::uint32_t>(number(3, 5)));
    }
    if (mode == "camera") {
      return camera_process(number(2, default_points), static_cast<std::uint32_t>(number(3, 5)));
    }
    if (mode == "preprocess") {
      return preprocess_process(static_cast<std::uint32_t>(number(2, 5)));
    }
    if (mode == "consumer") {
      return consumer_process(static_cast<std::uint32_t>(number(2, 5)));
    }
  } catch (const freight::Error &e) {
    std::cerr << "pointcloud_pipeline " << mode << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: pointcloud_pipeline inproc [POINTS] [FRAMES] | camera [POINTS] [FRAMES] | preprocess [FRAMES]"
               " | consumer [FRAMES]\n";
  return 2;
}
