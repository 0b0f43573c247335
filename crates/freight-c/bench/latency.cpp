// The C++ side of `freight bench latency --lang cpp`: one row of the latency
// benchmark, both ends written with freight's C++ API as a user would, under
// the protocol the Rust harness documents (crates/freight-cli/src/bench/mod.rs):
// a 16-byte header {seq, CLOCK_MONOTONIC at send} at the start of every
// std_msgs/UInt8MultiArray, one message in flight, each acked on `<topic>_ack`
// (std_msgs/UInt64, the same CDR as the Rust side's ack), warm-up discarded, a
// stop message (seq = UINT64_MAX) at the end.
//
// The program forks: the child subscribes, the parent publishes. The parent
// prints the row's outcome as one JSON line on stdout:
//   {"samples_ns":[...],"publish_ns":[...],"round_trips":N,"elapsed_ns":T}
// and exits 0; on any failure it prints `error: <what>` on stderr and exits 1.
//
// Usage (the harness writes these, see crates/freight-cli/src/bench/cpp.rs):
//   freight-bench-cpp --path loan|copy --wait spin|block --size BYTES --topic NAME
//     --iterations N --warmup N --warmup-max-ms MS --max-duration-ms MS
//     --min-samples N --timeout-ms MS [--cpus PUBLISHER,SUBSCRIBER]
#include <freight/freight.hpp>
#include <freight/msgs/std_msgs.hpp>

#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Data = freight::msgs::std_msgs::UInt8MultiArray;
using Ack = freight::msgs::std_msgs::UInt64;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderLen = 16;
constexpr std::uint64_t kStopSeq = UINT64_MAX;

struct Options {
  bool loan = true;
  freight::WaitMode wait = freight::WaitMode::Spin;
  std::size_t size = 0;
  std::string topic;
  std::uint64_t iterations = 0;
  std::uint64_t warmup = 0;
  std::chrono::milliseconds warmup_max{0};
  std::chrono::milliseconds max_duration{0};
  std::uint64_t min_samples = 0;
  std::chrono::milliseconds timeout{0};
  int publisher_cpu = -1;
  int subscriber_cpu = -1;

  std::size_t wire_len() const { return std::max(size, kHeaderLen); }
};

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

std::uint64_t number(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
    fail(flag + " takes a number, not `" + text + "`");
  }
  return v;
}

Options parse(int argc, char **argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc || std::strncmp(argv[i], "--", 2) != 0) {
      fail(std::string("expected `--flag value` pairs, got `") + argv[i] + "`");
    }
    args[argv[i]] = argv[i + 1];
  }
  auto take = [&](const char *flag) {
    const auto it = args.find(flag);
    if (it == args.end()) {
      fail(std::string("missing ") + flag);
    }
    std::string v = it->second;
    args.erase(it);
    return v;
  };
  Options o;
  const std::string path = take("--path");
  if (path != "loan" && path != "copy") {
    fail("--path is loan or copy, not `" + path + "`");
  }
  o.loan = path == "loan";
  const std::string wait = take("--wait");
  if (wait != "spin" && wait != "block") {
    fail("--wait is spin or block, not `" + wait + "`");
  }
  o.wait = wait == "spin" ? freight::WaitMode::Spin : freight::WaitMode::Block;
  o.size = number("--size", take("--size"));
  o.topic = take("--topic");
  o.iterations = number("--iterations", take("--iterations"));
  o.warmup = number("--warmup", take("--warmup"));
  o.warmup_max = std::chrono::milliseconds(number("--warmup-max-ms", take("--warmup-max-ms")));
  o.max_duration = std::chrono::milliseconds(number("--max-duration-ms", take("--max-duration-ms")));
  o.min_samples = number("--min-samples", take("--min-samples"));
  o.timeout = std::chrono::milliseconds(number("--timeout-ms", take("--timeout-ms")));
  if (args.count("--cpus") != 0) {
    const std::string cpus = take("--cpus");
    const auto comma = cpus.find(',');
    if (comma == std::string::npos) {
      fail("--cpus is PUBLISHER,SUBSCRIBER, not `" + cpus + "`");
    }
    o.publisher_cpu = static_cast<int>(number("--cpus", cpus.substr(0, comma)));
    o.subscriber_cpu = static_cast<int>(number("--cpus", cpus.substr(comma + 1)));
  }
  if (!args.empty()) {
    fail("unknown flag " + args.begin()->first);
  }
  return o;
}

std::uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

// Pinning failures are ignored, as the Rust harness ignores them: the numbers
// stay valid, only noisier.
void pin(int cpu) {
  if (cpu < 0) {
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

freight::Node make_node(const char *name) {
  freight::Context context;
  return context.create_node(name);
}

// Waits until `ready()` or the deadline; false if the deadline came first.
template <typename F>
bool wait_until(Clock::time_point deadline, F ready) {
  while (!ready()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The subscriber: records every message's one-way latency, acks it, and
// after the stop message writes the latencies to `out` (a pipe to the
// parent) as native u64s, count first.
int subscriber(const Options &o, int out) {
  pin(o.subscriber_cpu);
  const auto deadline = Clock::now() + o.timeout;
  try {
    freight::Node node = make_node("bench_subscriber_cpp");
    auto data = node.create_subscription<Data>(o.topic, freight::QoS(2), freight::SubscriptionOptions{{}, o.wait});
    auto acks = node.create_publisher<Ack>(o.topic + "_ack", freight::QoS(2));
    std::vector<std::uint64_t> samples;
    samples.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(o.iterations + o.warmup, 1u << 22)));
    for (;;) {
      const auto left = std::max(deadline - Clock::now(), Clock::duration(std::chrono::microseconds(1)));
      auto sample = data.take(left);
      if (!sample) {
        fail("the subscriber received nothing before the row's time limit");
      }
      const std::uint64_t now = monotonic_ns();
      const auto &bytes = (*sample)->data;
      if (bytes.size() < kHeaderLen || bytes.data() == nullptr) {
        fail("a message without its 16-byte header in host memory");
      }
      std::uint64_t seq = 0;
      std::uint64_t t_send = 0;
      std::memcpy(&seq, bytes.data(), 8);
      std::memcpy(&t_send, bytes.data() + 8, 8);
      if (seq != kStopSeq) {
        samples.push_back(now >= t_send ? now - t_send : 0);
      }
      sample.reset();
      Ack ack;
      ack.data = seq;
      acks.publish_copy(ack);
      if (seq == kStopSeq) {
        break;
      }
    }
    // Linger until the parent, which has the last ack, closed its end (at most
    // a few seconds): a message still queued when its publisher's process
    // exits can be lost.
    wait_until(std::min(deadline, Clock::now() + std::chrono::seconds(5)),
               [&] { return acks.get_subscription_count() == 0; });
    const std::uint64_t count = samples.size();
    const auto write_all = [out](const void *p, std::size_t len) {
      const auto *b = static_cast<const std::uint8_t *>(p);
      while (len > 0) {
        const ssize_t n = ::write(out, b, len);
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n <= 0) {
          fail(std::string("writing the samples to the parent: ") + std::strerror(errno));
        }
        b += n;
        len -= static_cast<std::size_t>(n);
      }
    };
    write_all(&count, sizeof count);
    write_all(samples.data(), samples.size() * sizeof(std::uint64_t));
    return 0;
  } catch (const std::exception &e) {
    fail(std::string("subscriber: ") + e.what());
  }
}

bool read_all(int fd, void *p, std::size_t len) {
  auto *b = static_cast<std::uint8_t *>(p);
  while (len > 0) {
    const ssize_t n = ::read(fd, b, len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    b += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

struct Outcome {
  std::vector<std::uint64_t> publish_ns;
  std::uint64_t warmup = 0;
  std::uint64_t round_trips = 0;
  std::uint64_t elapsed_ns = 0;
};

// The publisher: sends until the row is complete (as the harness's RowClock
// decides), each message after the previous one's ack.
Outcome publisher(const Options &o) {
  pin(o.publisher_cpu);
  const auto deadline = Clock::now() + o.timeout;
  freight::Node node = make_node("bench_publisher_cpp");
  auto data = node.create_publisher<Data>(o.topic, freight::QoS(2));
  auto acks = node.create_subscription<Ack>(o.topic + "_ack", freight::QoS(2), freight::SubscriptionOptions{{}, o.wait});
  if (!wait_until(deadline, [&] { return data.get_subscription_count() > 0 && acks.get_publisher_count() > 0; })) {
    fail("the subscriber process did not connect within the row's time limit");
  }

  // The copy path's message: the user's own, pre-faulted memory, which the
  // header is written into before each publish_copy.
  Data source;
  std::shared_ptr<std::vector<std::uint8_t>> bytes;
  if (!o.loan) {
    bytes = std::make_shared<std::vector<std::uint8_t>>(o.wire_len(), 1);
    source.data = freight::Buffer<std::uint8_t>::view(bytes->data(), bytes->size(), bytes);
  }
  const auto send = [&](std::uint64_t seq) {
    if (!o.loan) {
      const std::uint64_t t = monotonic_ns();
      std::memcpy(bytes->data(), &seq, 8);
      std::memcpy(bytes->data() + 8, &t, 8);
      data.publish_copy(source);
      return;
    }
    auto loan = data.loan(o.wire_len());
    const std::uint64_t t = monotonic_ns();
    std::memcpy(loan.data(), &seq, 8);
    std::memcpy(loan.data() + 8, &t, 8);
    // Only the header is read; the rest is shared memory holding zeros or an
    // earlier message, as in the Rust rows.
    data.publish(std::move(loan).assume_init());
  };
  const auto wait_ack = [&](std::uint64_t seq) {
    for (;;) {
      const auto left = std::max(deadline - Clock::now(), Clock::duration(std::chrono::microseconds(1)));
      auto ack = acks.take(left);
      if (!ack) {
        fail("no ack for message " + std::to_string(seq) + " within the row's time limit");
      }
      if ((*ack)->data == seq) {
        return;
      }
    }
  };

  Outcome out;
  out.publish_ns.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(o.iterations, 1u << 22)));
  const auto started = Clock::now();
  bool measuring = false;
  std::uint64_t first = 0;
  Clock::time_point t0;
  std::uint64_t seq = 0;
  for (;; ++seq) {
    if (!measuring) {
      if (seq >= o.warmup || (seq >= 1 && Clock::now() - started >= o.warmup_max)) {
        measuring = true;
        first = seq;
        t0 = Clock::now();
      }
    }
    if (measuring) {
      const std::uint64_t measured = seq - first;
      const auto elapsed = Clock::now() - t0;
      if (measured >= o.iterations || (measured >= o.min_samples && elapsed >= o.max_duration)) {
        out.elapsed_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(elapsed).count());
        break;
      }
    }
    const std::uint64_t before = monotonic_ns();
    send(seq);
    if (measuring) {
      out.publish_ns.push_back(monotonic_ns() - before);
    }
    wait_ack(seq);
  }
  out.warmup = measuring ? first : seq;
  out.round_trips = seq - out.warmup;
  send(kStopSeq);
  wait_ack(kStopSeq);
  return out;
}

void print_list(const char *name, const std::uint64_t *v, std::size_t n) {
  std::printf("\"%s\":[", name);
  for (std::size_t i = 0; i < n; ++i) {
    std::printf(i == 0 ? "%llu" : ",%llu", static_cast<unsigned long long>(v[i]));
  }
  std::printf("]");
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  int fds[2];
  if (pipe(fds) != 0) {
    fail(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    fail(std::string("fork: ") + std::strerror(errno));
  }
  if (child == 0) {
    // The subscriber dies with the publisher, whatever ends it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
      return 1;
    }
    close(fds[0]);
    return subscriber(o, fds[1]);
  }
  close(fds[1]);
  const auto kill_child = [child] {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  };
  Outcome out;
  try {
    out = publisher(o);
  } catch (const std::exception &e) {
    kill_child();
    fail(std::string("publisher: ") + e.what());
  }
  std::uint64_t count = 0;
  std::vector<std::uint64_t> samples;
  if (!read_all(fds[0], &count, sizeof count) || count > (1u << 26)) {
    kill_child();
    fail("the subscriber process did not report its samples");
  }
  samples.resize(static_cast<std::size_t>(count));
  if (!read_all(fds[0], samples.data(), samples.size() * sizeof(std::uint64_t))) {
    kill_child();
    fail("the subscriber process reported fewer samples than it announced");
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail("the subscriber process failed (its error is above)");
  }
  if (samples.size() != out.warmup + out.round_trips) {
    fail("the subscriber saw " + std::to_string(samples.size()) + " messages, the publisher sent " +
         std::to_string(out.warmup + out.round_trips));
  }
  std::printf("{");
  print_list("samples_ns", samples.data() + out.warmup, static_cast<std::size_t>(out.round_trips));
  std::printf(",");
  print_list("publish_ns", out.publish_ns.data(), out.publish_ns.size());
  std::printf(",\"round_trips\":%llu,\"elapsed_ns\":%llu}\n", static_cast<unsigned long long>(out.round_trips),
              static_cast<unsigned long long>(out.elapsed_ns));
  return 0;
}
