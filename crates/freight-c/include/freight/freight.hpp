// freight's C++17 API: RAII over the C ABI of freight.h, named as rclcpp
// names things. Errors are exceptions derived from std::runtime_error.
//
//   using freight::msgs::std_msgs::UInt8MultiArray;
//   freight::Context ctx;                                   // reads ROS_DOMAIN_ID
//   freight::Node node = ctx.create_node("camera");
//   auto pub = node.create_publisher<UInt8MultiArray>("/frames", freight::QoS(10));
//   UInt8MultiArray msg;
//   msg.data = std::vector<std::uint8_t>(1 << 20, 7);
//   pub.publish_copy(msg);                                  // copies (two today), into shared memory
//   auto loan = pub.loan(1 << 20);                          // or write shared memory directly
//   std::memset(loan.data(), 7, loan.size());
//   pub.publish(std::move(loan).assume_init());             // no copy
//
//   auto sub = node.create_subscription<UInt8MultiArray>("/frames", freight::QoS(10));
//   if (auto sample = sub.take(std::chrono::milliseconds(100))) {
//     std::uint8_t first = (*sample)->data[0];              // the publisher's memory, read-only
//   }
//
//   using freight::msgs::std_srvs::SetBool;                 // services, served by an Executor
//   auto service = node.create_service<SetBool>("/enable", [](const freight::Sample<SetBool::Request> &rq) {
//     SetBool::Response r;
//     r.success = rq->data;
//     return r;
//   });
//   auto client = node.create_client<SetBool>("/enable");
//   auto reply = client.call(SetBool::Request{}, std::chrono::seconds(1));  // throws on timeout
//
// Link with -lfreight_c.
#ifndef FREIGHT_FREIGHT_HPP
#define FREIGHT_FREIGHT_HPP

#include <freight/cdr.hpp>
#include <freight/freight.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace freight {

// A failed call: what() is the message, status() the code (freight.h).
class Error : public std::runtime_error {
public:
  Error(freight_status status, const std::string &message)
      : std::runtime_error(std::string(freight_status_name(status)) + ": " + message), status_(status) {}

  freight_status status() const noexcept { return status_; }

private:
  freight_status status_;
};

namespace detail {

// Throws freight::Error with this thread's last error unless `status` is OK.
inline void check(freight_status status) {
  if (status != FREIGHT_OK) {
    throw Error(status, freight_last_error());
  }
}

template <typename T, void (*Destroy)(T *)>
struct Deleter {
  void operator()(T *p) const noexcept { Destroy(p); }
};

template <typename T, void (*Destroy)(T *)>
using Handle = std::unique_ptr<T, Deleter<T, Destroy>>;

}  // namespace detail

// freight's version ("0.1.0").
inline std::string version() { return freight_version(); }

// A publisher's or subscription's QoS, as rclcpp::QoS: QoS(10) keeps the
// last 10, reliable, volatile.
class QoS {
public:
  explicit QoS(std::uint32_t depth) : c_(freight_qos_keep_last(depth)) {}

  // rclcpp::SensorDataQoS(): keep last 5, best effort.
  static QoS sensor_data() { return QoS(freight_qos_sensor_data()); }

  QoS &keep_last(std::uint32_t depth) { return c_.depth = depth, *this; }
  QoS &keep_all() { return c_.depth = 0, *this; }
  QoS &reliable() { return c_.reliable = true, *this; }
  QoS &best_effort() { return c_.reliable = false, *this; }
  QoS &transient_local() { return c_.transient_local = true, *this; }
  QoS &durability_volatile() { return c_.transient_local = false, *this; }

  const freight_qos &c_qos() const noexcept { return c_; }

private:
  explicit QoS(freight_qos c) : c_(c) {}
  freight_qos c_;
};

namespace detail {

// Where a device addresses buffer `i` of `loan`; throws for memory no device reaches.
inline void *loan_device_ptr(const freight_loan *loan, std::size_t i) {
  std::uint64_t ptr = 0;
  std::size_t len = 0;
  check(freight_loan_device_buffer(loan, i, &ptr, &len));
  return reinterpret_cast<void *>(static_cast<std::uintptr_t>(ptr));
}

// A stream handle (cudaStream_t, CUstream: pointers) as the C ABI's integer.
inline std::uint64_t stream_id(void *stream) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream));
}

inline void set_write_stream(freight_loan *loan, void *stream) {
  check(freight_loan_set_write_stream(loan, stream_id(stream)));
}

// Makes T known to freight's core before its first endpoint: a built-in
// type already is; a type generated from a user's own .msg files
// (`freight msg cpp`) brings its definition. Cheap after the first call.
template <typename T>
void register_type() {
  check(freight_type_register(T::TYPE_NAME, T::DEFINITION));
}

// Makes the service S known to freight's core: its request and response types.
template <typename S>
void register_service() {
  register_type<typename S::Request>();
  register_type<typename S::Response>();
}

// The C strings of `strings`, valid while they are.
inline std::vector<const char *> c_strings(const std::vector<std::string> &strings) {
  std::vector<const char *> c;
  for (const std::string &s : strings) {
    c.push_back(s.c_str());
  }
  return c;
}

// The small fields of `msg` as CDR with its buffers' ordinals, and the buffers.
template <typename T>
std::pair<std::vector<std::uint8_t>, std::vector<cdr::OrdinalSink::Noted>> split(const T &msg) {
  cdr::Writer w;
  cdr::OrdinalSink buffers;
  cdr_write(w, buffers, msg);
  return {std::move(w).finish(), buffers.buffers()};
}

// A message of type T from small-field CDR and `buffers` for its ordinals.
template <typename T>
T join(const std::uint8_t *fields, std::size_t len, std::vector<cdr::BufferSource::Memory> buffers) {
  cdr::Reader r(fields, len);
  cdr::OrdinalSource source(std::move(buffers));
  T msg{};
  cdr_read(r, source, msg);
  r.finish();
  return msg;
}

// Calls send(fields, len, buffers, count) with `msg`'s small fields and its
// buffers (which the call copies); returns what it returns.
template <typename T, typename Send>
freight_status send_split(const T &msg, Send &&send) {
  auto [fields, noted] = split(msg);
  std::vector<freight_buffer> buffers;
  buffers.reserve(noted.size());
  for (const auto &n : noted) {
    buffers.push_back(freight_buffer{n.data, n.bytes});
  }
  return send(fields.data(), fields.size(), buffers.data(), buffers.size());
}

// What the views of a loan's memory hold: nothing, the loan is the owner
// (but not empty, which would make the views copies).
inline const std::shared_ptr<const void> &loan_owned() {
  static const std::shared_ptr<const void> owner = std::make_shared<int>(0);
  return owner;
}

// A timeout as the C ABI's nanoseconds (a negative one is zero).
inline std::uint64_t nanoseconds(std::chrono::nanoseconds timeout) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
}

}  // namespace detail

template <typename T>
class Publisher;
template <typename S>
class ServiceServer;
template <typename S>
class Client;

// A loan whose buffers are written (only this can be published). The
// message's small fields are set through -> or *; its buffer fields are views
// of the loan's memory, valid until it is published or destroyed.
template <typename T>
class Loan {
public:
  T &operator*() noexcept { return msg_; }
  T *operator->() noexcept { return &msg_; }
  const T &operator*() const noexcept { return msg_; }
  const T *operator->() const noexcept { return &msg_; }

  // Buffer `i`'s memory (nullptr for device memory) and length in bytes.
  std::uint8_t *data(std::size_t i = 0) const { return buffers_.at(i).first; }
  std::size_t size(std::size_t i = 0) const { return buffers_.at(i).second; }
  // The memory it lends: "shm", "cpu" (an in-process hand-over), "cuda", ...
  std::string backend() const { return freight_loan_backend(handle_.get()); }
  // Where a device addresses buffer `i` (see LoanUninit::device_ptr).
  void *device_ptr(std::size_t i = 0) const { return detail::loan_device_ptr(handle_.get(), i); }
  // The stream its device buffers were written on (see LoanUninit).
  void set_write_stream(void *stream) { detail::set_write_stream(handle_.get(), stream); }

private:
  template <typename>
  friend class LoanUninit;
  template <typename>
  friend class Publisher;
  template <typename>
  friend class ServiceServer;
  template <typename>
  friend class Client;
  using Handle = std::unique_ptr<freight_loan, detail::Deleter<freight_loan, freight_loan_destroy>>;
  // The small fields to send it with, and its handle, given up to the C
  // call that sends it. Throws when a buffer field is no longer the loan's
  // memory.
  std::pair<std::vector<std::uint8_t>, freight_loan *> release() && {
    auto [fields, noted] = detail::split(msg_);
    for (std::size_t i = 0; i < noted.size(); ++i) {
      if (i >= buffers_.size() || noted[i].data != buffers_[i].first || noted[i].bytes != buffers_[i].second) {
        throw Error(FREIGHT_ERROR_PUBLISH, "buffer field " + std::to_string(i) +
                                               " is not the loan's memory: publish_copy sends other memory");
      }
    }
    return {std::move(fields), handle_.release()};
  }
  Loan(Handle handle, std::vector<std::pair<std::uint8_t *, std::size_t>> buffers, T msg)
      : handle_(std::move(handle)), buffers_(std::move(buffers)), msg_(std::move(msg)) {}
  Handle handle_;
  std::vector<std::pair<std::uint8_t *, std::size_t>> buffers_;
  T msg_;
};

// A loan as lent: its memory is not initialised. Write every byte of every
// buffer, then std::move(loan).assume_init() gives the Loan to publish.
template <typename T>
class LoanUninit {
public:
  std::size_t buffer_count() const noexcept { return buffers_.size(); }
  // Buffer `i`'s memory (nullptr for device memory) and length in bytes.
  std::uint8_t *data(std::size_t i = 0) const { return buffers_.at(i).first; }
  std::size_t size(std::size_t i = 0) const { return buffers_.at(i).second; }
  std::string backend() const { return freight_loan_backend(handle_.get()); }
  // Where a device addresses buffer `i`: the device memory of a "cuda" loan,
  // or "cuda-host" memory mapped for the device. Write it with kernels or
  // copies (cudaMemcpyAsync), then name their stream with set_write_stream.
  // Throws freight::Error for memory no device reaches.
  void *device_ptr(std::size_t i = 0) const { return detail::loan_device_ptr(handle_.get(), i); }
  // The stream (a cudaStream_t; nullptr the legacy default stream) the
  // writes to the device buffers went to: publishing orders every reader
  // after that stream's work, without blocking the host.
  void set_write_stream(void *stream) { detail::set_write_stream(handle_.get(), stream); }

  // The caller wrote every byte of every buffer.
  Loan<T> assume_init() && {
    // T's buffer fields become views of the loan's memory, in field order.
    std::vector<cdr::BufferSource::Memory> views;
    views.reserve(buffers_.size());
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      const auto [ptr, len] = buffers_[i];
      const std::uint64_t device =
          ptr == nullptr && len > 0 ? reinterpret_cast<std::uintptr_t>(detail::loan_device_ptr(handle_.get(), i)) : 0;
      views.push_back(cdr::BufferSource::Memory{ptr, len, detail::loan_owned(), device});
    }
    // The small fields of a default T, the same for every loan of T.
    static const std::vector<std::uint8_t> fields = detail::split(T{}).first;
    T msg = detail::join<T>(fields.data(), fields.size(), std::move(views));
    return Loan<T>(std::move(handle_), std::move(buffers_), std::move(msg));
  }

private:
  template <typename>
  friend class Publisher;
  template <typename>
  friend class ServiceServer;
  template <typename>
  friend class Client;
  LoanUninit(freight_loan *raw, std::size_t count) : handle_(raw) {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint8_t *ptr = nullptr;
      std::size_t len = 0;
      detail::check(freight_loan_buffer(raw, i, &ptr, &len));
      buffers_.emplace_back(ptr, len);
    }
  }
  typename Loan<T>::Handle handle_;
  std::vector<std::pair<std::uint8_t *, std::size_t>> buffers_;
};

// How a publisher is made (Node::create_publisher).
struct PublisherOptions {
  // The memory its loans lend: "shm" (the default), "cuda" (device memory of
  // this process's device), "cuda-host" (page-locked shared memory mapped for
  // it), "fake-device" (a simulated device, for tests).
  std::string backend = "shm";
};

// How a subscription waits for messages in take() (and an Executor spinning
// it).
enum class WaitMode {
  // Sleep in the OS until a publisher wakes it: no CPU while idle.
  Block = FREIGHT_WAIT_BLOCK,
  // Busy-poll: the lowest latency, one core kept busy while waiting.
  Spin = FREIGHT_WAIT_SPIN,
};

// How a subscription is made (Node::create_subscription).
struct SubscriptionOptions {
  // The memory it takes as it is ("cuda": device memory of publishers on this
  // process's device, "cuda-host", "fake-device"); "cpu" always. For any
  // other it receives a host copy. Empty: "cpu" and "shm", the default.
  std::vector<std::string> accepted_backends;
  WaitMode wait = WaitMode::Block;
};

// How a service server or client is made: where the loans of what it sends
// live and what it takes as it is in what it receives (rclcpp has no such
// thing: its services copy).
struct ServiceOptions {
  // The memory its request (client) or response (server) loans lend: "shm"
  // (the default), "cuda", "cuda-host", "fake-device".
  std::string backend = "shm";
  // The memory it takes as it is in what it receives, as
  // SubscriptionOptions::accepted_backends.
  std::vector<std::string> accepted_backends;
};

namespace detail {
// The C options of `options`; `names` (c_strings of its backends) must
// outlive them.
inline freight_subscription_options c_options(const SubscriptionOptions &options,
                                              const std::vector<const char *> &names) {
  return {names.data(), names.size(), static_cast<freight_wait_mode>(options.wait)};
}

inline freight_service_options c_options(const ServiceOptions &options, const std::vector<const char *> &names) {
  return {options.backend.c_str(), names.data(), names.size()};
}
} // namespace detail

// Publishes messages of type T on one topic. Moves, does not copy.
template <typename T>
class Publisher {
public:
  // Copies each buffer once, into shared memory (and serializes for network
  // readers).
  void publish_copy(const T &msg) const {
    detail::check(detail::send_split(msg, [this](const std::uint8_t *fields, std::size_t len,
                                                 const freight_buffer *buffers, std::size_t count) {
      return freight_publisher_publish_copy(handle_.get(), fields, len, buffers, count);
    }));
  }

  // Lends `bytes` for the message's one buffer field.
  LoanUninit<T> loan(std::size_t bytes) const {
    freight_loan *raw = nullptr;
    detail::check(freight_publisher_loan(handle_.get(), &bytes, 1, &raw));
    return LoanUninit<T>(raw, 1);
  }

  // Lends lens[i] bytes for each buffer field, in field order.
  LoanUninit<T> loan_buffers(const std::vector<std::size_t> &lens) const {
    freight_loan *raw = nullptr;
    detail::check(freight_publisher_loan(handle_.get(), lens.data(), lens.size(), &raw));
    return LoanUninit<T>(raw, lens.size());
  }

  // Publishes a written loan: no copy. Its buffer fields must still be the
  // loan's own memory (a field assigned other memory is an Error).
  void publish(Loan<T> &&loan) const {
    auto [fields, raw] = std::move(loan).release();
    detail::check(freight_publisher_publish_loan(handle_.get(), raw, fields.data(), fields.size()));
  }

  std::size_t get_subscription_count() const { return freight_publisher_subscription_count(handle_.get()); }

private:
  friend class Node;
  explicit Publisher(freight_publisher *raw) : handle_(raw) {}
  detail::Handle<freight_publisher, freight_publisher_destroy> handle_;
};

// A received message: * and -> give it; its buffer fields are read-only views
// of the memory it came in, which stays valid while the sample or any copy
// of those fields lives.
template <typename T>
class Sample {
public:
  const T &operator*() const noexcept { return msg_; }
  const T *operator->() const noexcept { return &msg_; }
  // The memory its buffers are in: "shm", "cpu", "cuda", ...
  std::string backend() const { return info_.backend; }
  // "intra", "shm" or "network".
  std::string transport() const { return info_.transport; }
  std::uint64_t sequence() const noexcept { return info_.sequence; }
  std::uint64_t publish_time_ns() const noexcept { return info_.publish_time_ns; }

  // The sample `raw` (which it takes over) as a typed message.
  static Sample from(freight_sample *raw) {
    std::shared_ptr<freight_sample> sample(raw, freight_sample_destroy);
    freight_sample_contents c{};
    detail::check(freight_sample_view(raw, &c));
    std::vector<cdr::BufferSource::Memory> buffers;
    buffers.reserve(c.buffer_count);
    for (std::size_t i = 0; i < c.buffer_count; ++i) {
      const freight_sample_buffer_view &b = c.buffers[i];
      buffers.push_back(cdr::BufferSource::Memory{b.data, b.len, sample, b.device});
    }
    return Sample(detail::join<T>(c.fields, c.fields_len, std::move(buffers)), c.info, std::move(sample));
  }

  // Orders the work later submitted to `stream` (a cudaStream_t; nullptr
  // the legacy default stream) after the publisher's writes to the
  // message's device buffers, without blocking the host: call it before
  // launching kernels that read them (their device_ptr()).
  void order_on_stream(void *stream) const {
    detail::check(freight_sample_order_on_stream(raw_.get(), detail::stream_id(stream)));
  }

private:
  Sample(T msg, freight_message_info info, std::shared_ptr<freight_sample> raw)
      : msg_(std::move(msg)), info_(info), raw_(std::move(raw)) {}
  T msg_;
  freight_message_info info_;
  std::shared_ptr<freight_sample> raw_;
};

// Receives messages of type T from one topic. Moves, does not copy.
template <typename T>
class Subscription {
public:
  // The next message, waiting up to `timeout` (zero: only look).
  std::optional<Sample<T>> take(std::chrono::nanoseconds timeout = std::chrono::nanoseconds(0)) const {
    freight_sample *raw = nullptr;
    const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
    detail::check(freight_subscription_take(handle_.get(), ns, &raw));
    if (raw == nullptr) {
      return std::nullopt;
    }
    return Sample<T>::from(raw);
  }

  std::size_t get_publisher_count() const { return freight_subscription_publisher_count(handle_.get()); }

private:
  friend class Node;
  explicit Subscription(freight_subscription *raw) : handle_(raw) {}
  detail::Handle<freight_subscription, freight_subscription_destroy> handle_;
};

namespace detail {

// The exception a callback threw on this thread, rethrown by the Executor
// call that ran it (an exception must not cross the C ABI).
inline std::exception_ptr &callback_exception() {
  thread_local std::exception_ptr pending;
  return pending;
}

// Runs a callback's body for the C ABI: whether it returned; an exception
// it threw is kept for the Executor call to rethrow.
template <typename F>
bool run_callback(F &&body) noexcept {
  try {
    body();
    return true;
  } catch (...) {
    callback_exception() = std::current_exception();
    return false;
  }
}

}  // namespace detail

// A subscription whose messages go to a callback when an Executor that its
// node was added to spins. Destroying it ends the callbacks. Moves, does not
// copy.
template <typename T>
class CallbackSubscription {
public:
  using Callback = std::function<void(const Sample<T> &)>;

private:
  friend class Node;
  static bool trampoline(freight_sample *raw, void *user_data) noexcept {
    return detail::run_callback([&] { (*static_cast<Callback *>(user_data))(Sample<T>::from(raw)); });
  }
  explicit CallbackSubscription(Callback callback) : callback_(std::make_unique<Callback>(std::move(callback))) {}
  // Declared first, destroyed last: the handle goes (and the callback with
  // it) before the function it calls.
  std::unique_ptr<Callback> callback_;
  detail::Handle<freight_callback_subscription, freight_callback_subscription_destroy> handle_;
};

// Which call a request is (the client and its call's sequence number); a
// response sent with it reaches that call.
using RequestId = freight_request_id;

namespace detail {
// Sends `response` (its buffers copied) through `server` to the call `id`.
template <typename Response>
void send_response(const freight_service_server *server, const RequestId &id, const Response &response) {
  check(send_split(response, [&](const std::uint8_t *fields, std::size_t len, const freight_buffer *buffers,
                                 std::size_t count) {
    return freight_service_server_send_response(server, id, fields, len, buffers, count);
  }));
}
}  // namespace detail

// The requests of a service of type S (a service of freight/msgs/<package>.hpp,
// such as freight::msgs::std_srvs::SetBool) and the way back to each caller:
// take each request and answer it when and from where you like. Moves, does
// not copy.
template <typename S>
class ServiceServer {
public:
  using Request = typename S::Request;
  using Response = typename S::Response;

  // The next request and the call to answer, waiting up to `timeout` (zero:
  // only look).
  std::optional<std::pair<Sample<Request>, RequestId>> take_request(
      std::chrono::nanoseconds timeout = std::chrono::nanoseconds(0)) const {
    freight_sample *raw = nullptr;
    RequestId id{};
    detail::check(freight_service_server_take_request(handle_.get(), detail::nanoseconds(timeout), &raw, &id));
    if (raw == nullptr) {
      return std::nullopt;
    }
    return std::make_pair(Sample<Request>::from(raw), id);
  }

  // Sends `response` (its buffers copied) to the call `id`; a client that
  // gave up on the call drops it.
  void send_response(const RequestId &id, const Response &response) const {
    detail::send_response(handle_.get(), id, response);
  }

  // Lends lens[i] bytes for each buffer field of a response, in field order.
  LoanUninit<Response> loan_response(const std::vector<std::size_t> &lens) const {
    freight_loan *raw = nullptr;
    detail::check(freight_service_server_loan_response(handle_.get(), lens.data(), lens.size(), &raw));
    return LoanUninit<Response>(raw, lens.size());
  }

  // Sends a written loan as the response to the call `id`: no copy.
  void send_response(const RequestId &id, Loan<Response> &&response) const {
    auto [fields, raw] = std::move(response).release();
    detail::check(freight_service_server_send_loaned_response(handle_.get(), id, raw, fields.data(), fields.size()));
  }

private:
  friend class Node;
  explicit ServiceServer(freight_service_server *raw) : handle_(raw) {}
  detail::Handle<freight_service_server, freight_service_server_destroy> handle_;
};

// A service whose requests go to a callback, which returns the response,
// when an Executor that its node was added to spins. Destroying it ends the
// service. Moves, does not copy.
template <typename S>
class Service {
public:
  using Request = typename S::Request;
  using Response = typename S::Response;
  using Callback = std::function<Response(const Sample<Request> &)>;

private:
  friend class Node;
  static bool trampoline(freight_sample *raw, freight_request_id id, const freight_service_server *server,
                         void *user_data) noexcept {
    return detail::run_callback([&] {
      detail::send_response(server, id, (*static_cast<Callback *>(user_data))(Sample<Request>::from(raw)));
    });
  }

  explicit Service(Callback callback) : callback_(std::make_unique<Callback>(std::move(callback))) {}
  // Declared first, destroyed last: the handle goes (and the callback with
  // it) before the function it calls.
  std::unique_ptr<Callback> callback_;
  detail::Handle<freight_callback_service, freight_callback_service_destroy> handle_;
};

// A call sent with Client::async_send_request, waiting for its reply.
// Destroying it forgets the call. Moves, does not copy.
template <typename S>
class PendingCall {
public:
  using Response = typename S::Response;

  // The reply, waiting up to `timeout`; std::nullopt if it has not come yet
  // (the call stays pending). Throws freight::Error FREIGHT_ERROR_NO_SERVER
  // when every server went away before it answered. A call gives its reply
  // once.
  std::optional<Sample<Response>> wait_for(std::chrono::nanoseconds timeout) {
    freight_sample *raw = nullptr;
    const freight_status status = freight_pending_call_wait(handle_.get(), detail::nanoseconds(timeout), &raw);
    if (status == FREIGHT_ERROR_TIMEOUT) {
      return std::nullopt;
    }
    detail::check(status);
    return Sample<Response>::from(raw);
  }

  // The reply, waiting up to `timeout`; throws freight::Error
  // (FREIGHT_ERROR_TIMEOUT) if none came.
  Sample<Response> get(std::chrono::nanoseconds timeout) {
    freight_sample *raw = nullptr;
    detail::check(freight_pending_call_wait(handle_.get(), detail::nanoseconds(timeout), &raw));
    return Sample<Response>::from(raw);
  }

private:
  template <typename>
  friend class Client;
  explicit PendingCall(freight_pending_call *raw) : handle_(raw) {}
  detail::Handle<freight_pending_call, freight_pending_call_destroy> handle_;
};

// Calls a service of type S. Moves, does not copy.
template <typename S>
class Client {
public:
  using Request = typename S::Request;
  using Response = typename S::Response;

  // Waits up to `timeout` for a server; whether one is there.
  bool wait_for_service(std::chrono::nanoseconds timeout) const {
    return freight_client_wait_for_service(handle_.get(), detail::nanoseconds(timeout));
  }

  // Whether a server is there now.
  bool service_is_ready() const { return freight_client_server_count(handle_.get()) > 0; }

  // Sends `request` (its buffers copied) and returns at once; the
  // PendingCall collects the reply. Throws freight::Error
  // (FREIGHT_ERROR_NO_SERVER) when there is no server.
  PendingCall<S> async_send_request(const Request &request) const {
    freight_pending_call *raw = nullptr;
    detail::check(detail::send_split(request, [&](const std::uint8_t *fields, std::size_t len,
                                                  const freight_buffer *buffers, std::size_t count) {
      return freight_client_call_async(handle_.get(), fields, len, buffers, count, &raw);
    }));
    return PendingCall<S>(raw);
  }

  // Lends lens[i] bytes for each buffer field of a request, in field order.
  LoanUninit<Request> loan_request(const std::vector<std::size_t> &lens) const {
    freight_loan *raw = nullptr;
    detail::check(freight_client_loan_request(handle_.get(), lens.data(), lens.size(), &raw));
    return LoanUninit<Request>(raw, lens.size());
  }

  // Sends a written loan as a request (no copy) and returns at once.
  PendingCall<S> async_send_request(Loan<Request> &&request) const {
    auto [fields, loan] = std::move(request).release();
    freight_pending_call *raw = nullptr;
    detail::check(freight_client_call_loaned(handle_.get(), loan, fields.data(), fields.size(), &raw));
    return PendingCall<S>(raw);
  }

  // Calls and waits up to `timeout` for the reply. Throws freight::Error:
  // FREIGHT_ERROR_TIMEOUT (no reply in time), FREIGHT_ERROR_NO_SERVER (no
  // server, or every server went away before it answered).
  Sample<Response> call(const Request &request, std::chrono::nanoseconds timeout) const {
    freight_sample *raw = nullptr;
    detail::check(detail::send_split(request, [&](const std::uint8_t *fields, std::size_t len,
                                                  const freight_buffer *buffers, std::size_t count) {
      return freight_client_call(handle_.get(), fields, len, buffers, count, detail::nanoseconds(timeout), &raw);
    }));
    return Sample<Response>::from(raw);
  }

private:
  friend class Node;
  explicit Client(freight_client *raw) : handle_(raw) {}
  detail::Handle<freight_client, freight_client_destroy> handle_;
};

// A named participant of the ROS graph; made by Context::create_node. Moves,
// does not copy; it stays valid after its Context is destroyed.
class Node {
public:
  // A subscription of T on `topic` whose messages go to `callback` (any
  // callable taking const freight::Sample<T>&) when an Executor this node
  // was added to spins. Keep the returned object: destroying it ends the
  // subscription.
  template <typename T, typename F, typename = std::enable_if_t<std::is_invocable_v<F, const Sample<T> &>>>
  CallbackSubscription<T> create_subscription(const std::string &topic, const QoS &qos, F &&callback,
                                              const SubscriptionOptions &options = {}) const {
    CallbackSubscription<T> sub{typename CallbackSubscription<T>::Callback(std::forward<F>(callback))};
    const std::vector<const char *> names = detail::c_strings(options.accepted_backends);
    const freight_subscription_options c_options = detail::c_options(options, names);
    freight_callback_subscription *raw = nullptr;
    detail::register_type<T>();
    detail::check(freight_node_create_subscription_callback_with_options(
        handle_.get(), T::TYPE_NAME, topic.c_str(), &qos.c_qos(), &c_options, &CallbackSubscription<T>::trampoline,
        sub.callback_.get(), &raw));
    sub.handle_.reset(raw);
    return sub;
  }

  // A publisher of T (a type of freight/msgs/<package>.hpp, or one that
  // `freight msg cpp` generated from your own .msg files) on `topic`.
  template <typename T>
  Publisher<T> create_publisher(const std::string &topic, const QoS &qos) const {
    freight_publisher *raw = nullptr;
    detail::register_type<T>();
    detail::check(freight_publisher_create(handle_.get(), T::TYPE_NAME, topic.c_str(), &qos.c_qos(), &raw));
    return Publisher<T>(raw);
  }

  // A publisher of T with options: the memory its loans lend.
  template <typename T>
  Publisher<T> create_publisher(const std::string &topic, const QoS &qos, const PublisherOptions &options) const {
    freight_publisher *raw = nullptr;
    detail::register_type<T>();
    detail::check(freight_publisher_create_with_backend(handle_.get(), T::TYPE_NAME, topic.c_str(), &qos.c_qos(),
                                                        options.backend.c_str(), &raw));
    return Publisher<T>(raw);
  }

  // A subscription of T on `topic`; take() receives.
  template <typename T>
  Subscription<T> create_subscription(const std::string &topic, const QoS &qos) const {
    freight_subscription *raw = nullptr;
    detail::register_type<T>();
    detail::check(freight_subscription_create(handle_.get(), T::TYPE_NAME, topic.c_str(), &qos.c_qos(), &raw));
    return Subscription<T>(raw);
  }

  // A subscription of T with options: the memory it takes as it is, how it
  // waits.
  template <typename T>
  Subscription<T> create_subscription(const std::string &topic, const QoS &qos,
                                      const SubscriptionOptions &options) const {
    const std::vector<const char *> names = detail::c_strings(options.accepted_backends);
    const freight_subscription_options c_options = detail::c_options(options, names);
    freight_subscription *raw = nullptr;
    detail::register_type<T>();
    detail::check(freight_subscription_create_with_options(handle_.get(), T::TYPE_NAME, topic.c_str(), &qos.c_qos(),
                                                           &c_options, &raw));
    return Subscription<T>(raw);
  }

  // A service `name` of type S whose requests go to `callback` when an
  // Executor this node was added to spins: a callable taking
  // const freight::Sample<S::Request>& and returning S::Response, or, as
  // rclcpp's, taking it and an S::Response& to fill. Keep the returned
  // object: destroying it ends the service.
  template <typename S, typename F>
  Service<S> create_service(const std::string &name, F &&callback, const ServiceOptions &options = {}) const {
    using Request = typename S::Request;
    using Response = typename S::Response;
    typename Service<S>::Callback call;
    if constexpr (std::is_invocable_r_v<Response, F, const Sample<Request> &>) {
      call = std::forward<F>(callback);
    } else {
      static_assert(std::is_invocable_v<F, const Sample<Request> &, Response &>,
                    "a service callback takes (const Sample<Request>&) and returns the Response, or takes "
                    "(const Sample<Request>&, Response&)");
      call = [f = std::forward<F>(callback)](const Sample<Request> &request) mutable {
        Response response{};
        f(request, response);
        return response;
      };
    }
    Service<S> service{std::move(call)};
    freight_callback_service *raw = nullptr;
    detail::register_service<S>();
    const std::vector<const char *> names = detail::c_strings(options.accepted_backends);
    const freight_service_options c_options = detail::c_options(options, names);
    detail::check(freight_node_create_service_callback_with_options(handle_.get(), S::TYPE_NAME, name.c_str(),
                                                                    &c_options, &Service<S>::trampoline,
                                                                    service.callback_.get(), &raw));
    service.handle_.reset(raw);
    return service;
  }

  // A server of the service `name` of type S; take_request() receives.
  template <typename S>
  ServiceServer<S> create_service_server(const std::string &name, const ServiceOptions &options = {}) const {
    freight_service_server *raw = nullptr;
    detail::register_service<S>();
    const std::vector<const char *> names = detail::c_strings(options.accepted_backends);
    const freight_service_options c_options = detail::c_options(options, names);
    detail::check(
        freight_service_server_create_with_options(handle_.get(), S::TYPE_NAME, name.c_str(), &c_options, &raw));
    return ServiceServer<S>(raw);
  }

  // A client of the service `name` of type S.
  template <typename S>
  Client<S> create_client(const std::string &name, const ServiceOptions &options = {}) const {
    freight_client *raw = nullptr;
    detail::register_service<S>();
    const std::vector<const char *> names = detail::c_strings(options.accepted_backends);
    const freight_service_options c_options = detail::c_options(options, names);
    detail::check(freight_client_create_with_options(handle_.get(), S::TYPE_NAME, name.c_str(), &c_options, &raw));
    return Client<S>(raw);
  }

  std::string get_name() const { return freight_node_name(handle_.get()); }
  std::string get_namespace() const { return freight_node_namespace(handle_.get()); }
  std::string get_fully_qualified_name() const {
    const std::string ns = get_namespace();
    return (ns == "/" ? ns : ns + "/") + get_name();
  }

  // The C handle, for the C ABI; owned by this object.
  freight_node *c_handle() const noexcept { return handle_.get(); }

private:
  friend class Context;
  explicit Node(freight_node *raw) : handle_(raw) {}
  detail::Handle<freight_node, freight_node_destroy> handle_;
};

// Settings of a Context (freight_context_options).
struct ContextOptions {
  // The ROS domain (0..232), or FREIGHT_DOMAIN_FROM_ENV for ROS_DOMAIN_ID.
  std::uint32_t domain_id = FREIGHT_DOMAIN_FROM_ENV;
  // Shared memory only: no network plane (DDS).
  bool local_only = false;
};

// One process's freight on one ROS domain. Moves, does not copy.
class Context {
public:
  // On the domain of ROS_DOMAIN_ID, with the network plane on.
  Context() : Context(ContextOptions{}) {}

  explicit Context(const ContextOptions &options) {
    const freight_context_options c{options.domain_id, options.local_only};
    freight_context *raw = nullptr;
    detail::check(freight_context_create_with(&c, &raw));
    handle_.reset(raw);
  }

  std::uint32_t domain_id() const { return freight_context_domain_id(handle_.get()); }

  // The node `name` in `namespace_` ("" for the root). Throws freight::Error
  // (FREIGHT_ERROR_NAME) for a name that breaks ROS 2's rules.
  Node create_node(const std::string &name, const std::string &namespace_ = "") const {
    freight_node *raw = nullptr;
    detail::check(freight_node_create(handle_.get(), name.c_str(), namespace_.c_str(), &raw));
    return Node(raw);
  }

  // The C handle, for the C ABI; owned by this object.
  freight_context *c_handle() const noexcept { return handle_.get(); }

private:
  detail::Handle<freight_context, freight_context_destroy> handle_;
};

// Runs the callbacks of its nodes' callback subscriptions and services on
// the thread that spins, as rclcpp's SingleThreadedExecutor. An exception a callback throws
// stops the spin and comes out of spin() or spin_once().
class Executor {
public:
  Executor() {
    freight_executor *raw = nullptr;
    detail::check(freight_executor_create(&raw));
    handle_.reset(raw);
  }

  // The node's callback subscriptions and services, those made later too,
  // run here. The
  // node must outlive its use by this executor.
  void add_node(const Node &node) { detail::check(freight_executor_add_node(handle_.get(), node.c_handle())); }

  // Waits up to `timeout` for messages and runs their callbacks; returns how
  // many ran.
  std::size_t spin_once(std::chrono::nanoseconds timeout = std::chrono::nanoseconds(0)) {
    std::size_t ran = 0;
    const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
    rethrow(freight_executor_spin_once(handle_.get(), ns, &ran));
    return ran;
  }

  // Runs callbacks until cancel() (from a callback or another thread).
  void spin() { rethrow(freight_executor_spin(handle_.get())); }

  // Makes a running spin() return (within 100 ms); safe from any thread.
  void cancel() noexcept { freight_executor_stop(handle_.get()); }

private:
  static void rethrow(freight_status status) {
    if (status == FREIGHT_ERROR_CALLBACK && detail::callback_exception()) {
      std::exception_ptr e = std::exchange(detail::callback_exception(), nullptr);
      std::rethrow_exception(e);
    }
    detail::check(status);
  }
  detail::Handle<freight_executor, freight_executor_destroy> handle_;
};

}  // namespace freight

#endif  // FREIGHT_FREIGHT_HPP
