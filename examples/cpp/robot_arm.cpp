// The ROS 2 Buffer seed's robot arm demo (seed 000), its CPU path in C++: a
// renderer process draws an animated robot arm from signed distance functions
// and publishes each frame as a BGRA sensor_msgs/Image; a display process
// reads every pixel (a checksum, compared with the one the renderer put in
// header.frame_id) and reports frames per second and the transport latency
// (from publish to take, both CLOCK_MONOTONIC).
//
// Two transports, as `freight demo robot-arm` compares them off a GPU:
//   shm   the renderer draws straight into a loan of shared memory, which the
//         display reads in place: no byte is copied;
//   copy  the renderer draws into its own buffer and publish_copy copies it
//         into shared memory, once (a stock middleware copies it more often:
//         serialization, the socket, deserialization).
// The seed renders on the GPU and moves frames as CUDA IPC handles; that path
// needs a GPU renderer (LibTorch, CUDA kernels), which this example does not
// build: see `freight demo robot-arm` for it.
//
//   robot_arm compare [--seconds S] [--resolutions 1920x1080,3840x2160]
//   robot_arm display --topic T --seconds S          (prints READY, then RESULT ...)
//   robot_arm renderer --topic T --transport shm|copy --width W --height H
#include <freight/freight.hpp>
#include <freight/msgs/sensor_msgs.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace {

using freight::msgs::sensor_msgs::Image;
using Clock = std::chrono::steady_clock;

// The renderer keeps at most two frames queued for the display and waits for
// room (reliable): the display sets the pace, and every frame it gets is whole.
const freight::QoS kQoS = freight::QoS(2).reliable();

std::uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr,
               "robot_arm: %s\nusage: robot_arm compare [--seconds S] [--resolutions WxH,...]\n"
               "       robot_arm display --topic T --seconds S\n"
               "       robot_arm renderer --topic T --transport shm|copy --width W --height H\n",
               why.c_str());
  std::exit(2);
}

std::map<std::string, std::string> flags(int argc, char **argv, int from) {
  std::map<std::string, std::string> out;
  for (int i = from; i < argc; i += 2) {
    if (i + 1 >= argc || std::strncmp(argv[i], "--", 2) != 0) {
      usage(std::string("expected --flag value, got ") + argv[i]);
    }
    out[argv[i]] = argv[i + 1];
  }
  return out;
}

std::string flag(const std::map<std::string, std::string> &f, const char *name, const char *fallback = nullptr) {
  const auto it = f.find(name);
  if (it != f.end()) {
    return it->second;
  }
  if (fallback == nullptr) {
    usage(std::string("missing ") + name);
  }
  return fallback;
}

// --- the picture: the same arm, the same pencil sketch as the Python demo ---

struct Capsule {
  float ax, ay, bx, by, r;
};
struct Joint {
  float x, y, r;
};

// The arm at time t (seconds); y up, the picture -1..1 vertically.
void arm_pose(double t, std::vector<Capsule> &capsules, std::vector<Joint> &joints) {
  capsules.clear();
  joints.clear();
  const double angles[3] = {M_PI / 2 - 0.5 + 0.45 * std::sin(0.9 * t), -0.9 + 0.7 * std::sin(1.3 * t + 1.0),
                            -0.6 + 0.9 * std::sin(2.1 * t + 2.0)};
  const double lengths[3] = {0.62, 0.5, 0.22};
  const double radii[3] = {0.075, 0.06, 0.045};
  double x = 0.0, y = -0.55, heading = 0.0;
  joints.push_back({0.0f, -0.55f, 0.1f});
  for (int i = 0; i < 3; ++i) {
    heading += angles[i];
    const double nx = x + lengths[i] * std::cos(heading), ny = y + lengths[i] * std::sin(heading);
    capsules.push_back({float(x), float(y), float(nx), float(ny), float(radii[i])});
    if (i < 2) {
      joints.push_back({float(nx), float(ny), float(radii[i] * 1.25)});
    }
    x = nx;
    y = ny;
  }
  const double opening = 0.35 + 0.25 * std::sin(3.0 * t);
  for (int side : {-1, 1}) {
    const double a = heading + side * opening;
    capsules.push_back({float(x), float(y), float(x + 0.16 * std::cos(a)), float(y + 0.16 * std::sin(a)), 0.025f});
  }
}

float clip(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }

// One pixel at (x, y) as BGRA.
void shade(float x, float y, const std::vector<Capsule> &capsules, const std::vector<Joint> &joints,
           std::uint8_t *out) {
  float dist = 1e9f;
  for (const Capsule &c : capsules) {
    const float px = x - c.ax, py = y - c.ay, bax = c.bx - c.ax, bay = c.by - c.ay;
    const float h = clip((px * bax + py * bay) / (bax * bax + bay * bay), 0.0f, 1.0f);
    const float dx = px - bax * h, dy = py - bay * h;
    dist = std::min(dist, std::sqrt(dx * dx + dy * dy) - c.r);
  }
  for (const Joint &j : joints) {
    dist = std::min(dist, std::sqrt((x - j.x) * (x - j.x) + (y - j.y) * (y - j.y)) - j.r);
  }
  const float qx = std::fabs(x) - 0.32f, qy = std::fabs(y + 0.75f) - 0.12f;
  const float mx = std::max(qx, 0.0f), my = std::max(qy, 0.0f);
  dist = std::min(dist, std::sqrt(mx * mx + my * my) + std::min(std::max(qx, qy), 0.0f));
  const float floor = y + 0.87f;
  const float line = 1.0f - clip(std::fabs(dist) / 0.008f, 0.0f, 1.0f);
  const float hatch = dist < 0 ? clip(std::sin((x + y) * 160.0f) * 4.0f - 2.5f, 0.0f, 1.0f) * 0.35f : 0.0f;
  const float shadow = clip(0.12f - std::fabs(floor) * 2.0f, 0.0f, 0.12f) * clip(1.0f - std::fabs(x) * 0.8f, 0.0f, 1.0f);
  const float floor_line = 1.0f - clip(std::fabs(floor) / 0.004f, 0.0f, 1.0f);
  const float grid = clip(std::sin(x * 40.0f) * std::sin(y * 40.0f) * 8.0f - 7.6f, 0.0f, 1.0f) * 0.08f;
  const float ink = clip(line + hatch + shadow + floor_line * 0.7f + grid, 0.0f, 1.0f);
  const float paper[3] = {226.0f, 238.0f, 246.0f};  // B, G, R
  const float graphite[3] = {60.0f, 58.0f, 62.0f};
  for (int c = 0; c < 3; ++c) {
    out[c] = static_cast<std::uint8_t>(paper[c] + (graphite[c] - paper[c]) * ink);
  }
  out[3] = 255;
}

// Draws at 1/scale of the frame (as the Python demo's CPU path), then scales
// up, nearest: a few milliseconds per 1080p frame on one core.
class Renderer {
public:
  Renderer(std::uint32_t width, std::uint32_t height) : width_(width), height_(height) {
    for (std::uint32_t s : {8u, 4u, 2u, 1u}) {
      if (width % s == 0 && height % s == 0) {
        scale_ = s;
        break;
      }
    }
    small_.resize(std::size_t(width / scale_) * (height / scale_) * 4);
  }

  void draw(double t, std::uint8_t *out) {
    arm_pose(t, capsules_, joints_);
    const std::uint32_t w = width_ / scale_, h = height_ / scale_;
    for (std::uint32_t row = 0; row < h; ++row) {
      const float y = (float(h - 1) - 2.0f * row) / float(h);
      for (std::uint32_t col = 0; col < w; ++col) {
        const float x = (2.0f * col - float(w - 1)) / float(h);
        shade(x, y, capsules_, joints_, &small_[(std::size_t(row) * w + col) * 4]);
      }
    }
    for (std::uint32_t row = 0; row < height_; ++row) {
      const std::uint8_t *src = &small_[std::size_t(row / scale_) * w * 4];
      std::uint8_t *dst = out + std::size_t(row) * width_ * 4;
      for (std::uint32_t col = 0; col < width_; ++col) {
        std::memcpy(dst + std::size_t(col) * 4, src + std::size_t(col / scale_) * 4, 4);
      }
    }
  }

private:
  std::uint32_t width_, height_, scale_ = 1;
  std::vector<std::uint8_t> small_;
  std::vector<Capsule> capsules_;
  std::vector<Joint> joints_;
};

// The frame's bytes summed as 64-bit words, wrapping: every byte is read.
std::uint64_t checksum(const std::uint8_t *bytes, std::size_t len) {
  std::uint64_t sum = 0;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    sum += word;
  }
  for (; i < len; ++i) {
    sum += bytes[i];
  }
  return sum;
}

// --- the two nodes ---

int renderer(const std::map<std::string, std::string> &f) {
  const std::string topic = flag(f, "--topic");
  const std::string transport = flag(f, "--transport");
  if (transport != "shm" && transport != "copy") {
    usage("--transport is shm or copy");
  }
  const auto width = static_cast<std::uint32_t>(std::stoul(flag(f, "--width")));
  const auto height = static_cast<std::uint32_t>(std::stoul(flag(f, "--height")));
  const std::size_t bytes = std::size_t(width) * height * 4;
  freight::Context ctx;
  freight::Node node = ctx.create_node("renderer");
  auto publisher = node.create_publisher<Image>(topic, kQoS);
  Renderer render(width, height);
  auto own = std::make_shared<std::vector<std::uint8_t>>(transport == "copy" ? bytes : 0);
  const auto started = Clock::now();
  // Until the display came and went (or never came, within a minute).
  bool seen = false;
  for (std::uint64_t seq = 0;; ++seq) {
    const std::size_t readers = publisher.get_subscription_count();
    seen = seen || readers > 0;
    if ((seen && readers == 0) || Clock::now() - started > std::chrono::minutes(1)) {
      return seen ? 0 : 1;
    }
    if (readers == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    const double t = std::chrono::duration<double>(Clock::now() - started).count();
    auto fill = [&](Image &msg, const std::uint8_t *pixels) {
      msg.width = width;
      msg.height = height;
      msg.encoding = "bgra8";
      msg.step = width * 4;
      msg.header.frame_id = std::to_string(seq) + " " + std::to_string(checksum(pixels, bytes));
    };
    if (transport == "shm") {
      auto loan = publisher.loan(bytes);
      render.draw(t, loan.data());
      auto msg = std::move(loan).assume_init();
      fill(*msg, msg->data.data());
      publisher.publish(std::move(msg));
    } else {
      render.draw(t, own->data());
      Image msg;
      msg.data = freight::Buffer<std::uint8_t>::view(own->data(), bytes, own);
      fill(msg, own->data());
      publisher.publish_copy(msg);
    }
  }
}

int display(const std::map<std::string, std::string> &f) {
  const std::string topic = flag(f, "--topic");
  const double seconds = std::stod(flag(f, "--seconds", "3"));
  freight::Context ctx;
  freight::Node node = ctx.create_node("display");
  auto subscription = node.create_subscription<Image>(topic, kQoS);
  std::printf("READY\n");
  std::fflush(stdout);
  std::vector<double> latencies_ms;
  std::uint64_t frames = 0, bad = 0;
  std::string backend = "-";
  Clock::time_point first;
  for (;;) {
    auto sample = subscription.take(std::chrono::seconds(frames == 0 ? 30 : 5));
    if (!sample) {
      std::fprintf(stderr, "display: no frame for %s\n", frames == 0 ? "30 s" : "5 s");
      return 1;
    }
    const std::uint64_t received = monotonic_ns();
    const Image &img = **sample;
    std::uint64_t seq = 0, sent = 0;
    std::istringstream(img.header.frame_id) >> seq >> sent;
    const bool whole = img.data.size() == std::size_t(img.width) * img.height * 4;
    bad += !whole || checksum(img.data.data(), img.data.size()) != sent;
    if (frames == 0) {
      first = Clock::now();
      backend = sample->backend();
    }
    ++frames;
    latencies_ms.push_back(double(received - std::min(received, sample->publish_time_ns())) / 1e6);
    if (Clock::now() - first >= std::chrono::duration<double>(seconds)) {
      break;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - first).count();
  std::nth_element(latencies_ms.begin(), latencies_ms.begin() + latencies_ms.size() / 2, latencies_ms.end());
  std::printf("RESULT frames=%llu fps=%.1f latency_p50_ms=%.3f bad=%llu backend=%s\n",
              static_cast<unsigned long long>(frames), double(frames - 1) / elapsed,
              latencies_ms[latencies_ms.size() / 2], static_cast<unsigned long long>(bad), backend.c_str());
  return bad == 0 ? 0 : 1;
}

// --- compare: both transports at each resolution, the seed's table ---

pid_t spawn(std::vector<std::string> args, int stdout_fd) {
  std::vector<char *> argv;
  for (std::string &a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  }
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0) {
    std::fprintf(stderr, "robot_arm: cannot start itself: %s\n", std::strerror(failed));
    std::exit(1);
  }
  return pid;
}

struct Run {
  double fps = 0, latency_ms = 0;
  std::uint64_t frames = 0, bad = 0;
  std::string backend;
  bool ok = false;
};

Run measure(std::uint32_t width, std::uint32_t height, const std::string &transport, double seconds) {
  const std::string topic = "/robot_arm_" + std::to_string(getpid()) + "_" + transport + "_" + std::to_string(width);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  const pid_t shown = spawn({"robot_arm", "display", "--topic", topic, "--seconds", std::to_string(seconds)}, pipe_fds[1]);
  close(pipe_fds[1]);
  FILE *from_display = fdopen(pipe_fds[0], "r");
  char line[512];
  Run run;
  pid_t drawn = -1;
  while (std::fgets(line, sizeof line, from_display) != nullptr) {
    if (std::strncmp(line, "READY", 5) == 0) {
      drawn = spawn({"robot_arm", "renderer", "--topic", topic, "--transport", transport, "--width",
                     std::to_string(width), "--height", std::to_string(height)},
                    -1);
    }
    unsigned long long frames = 0, bad = 0;
    char backend[64] = {0};
    if (std::sscanf(line, "RESULT frames=%llu fps=%lf latency_p50_ms=%lf bad=%llu backend=%63s", &frames, &run.fps,
                    &run.latency_ms, &bad, backend) == 5) {
      run.frames = frames;
      run.bad = bad;
      run.backend = backend;
      run.ok = true;
    }
  }
  std::fclose(from_display);
  int status = 0;
  waitpid(shown, &status, 0);
  run.ok = run.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (drawn > 0) {
    waitpid(drawn, &status, 0);
  }
  return run;
}

int compare(const std::map<std::string, std::string> &f) {
  const double seconds = std::stod(flag(f, "--seconds", "3"));
  std::vector<std::pair<std::uint32_t, std::uint32_t>> resolutions;
  std::istringstream list(flag(f, "--resolutions", "1920x1080,2560x1440,3840x2160"));
  for (std::string item; std::getline(list, item, ',');) {
    unsigned w = 0, h = 0;
    if (std::sscanf(item.c_str(), "%ux%u", &w, &h) != 2 || w == 0 || h == 0) {
      usage("a resolution is WIDTHxHEIGHT, not " + item);
    }
    resolutions.emplace_back(w, h);
  }
  std::printf("| Resolution | Image size | Transport | FPS | Speedup | Latency p50 | Checksums |\n");
  std::printf("|---|---:|---|---:|---:|---:|---|\n");
  bool all_ok = true;
  for (const auto &[w, h] : resolutions) {
    const Run copy = measure(w, h, "copy", seconds);
    const Run shm = measure(w, h, "shm", seconds);
    for (const auto &[name, run] : {std::pair<const char *, const Run &>{"shm", shm}, {"copy", copy}}) {
      all_ok = all_ok && run.ok;
      std::printf("| %ux%u | %.1f MB | %s (%s) | %.1f | %.2fx | %.3f ms | %s |\n", w, h, double(w) * h * 4 / 1e6, name,
                  run.backend.empty() ? "failed" : run.backend.c_str(), run.fps, copy.fps > 0 ? run.fps / copy.fps : 0.0,
                  run.latency_ms, !run.ok ? "failed" : run.bad == 0 ? "all match" : "MISMATCH");
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    usage("which node?");
  }
  const std::string mode = argv[1];
  const auto f = flags(argc, argv, 2);
  try {
    if (mode == "compare") return compare(f);
    if (mode == "display") return display(f);
    if (mode == "renderer") return renderer(f);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "robot_arm %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  usage("no mode " + mode);
}
