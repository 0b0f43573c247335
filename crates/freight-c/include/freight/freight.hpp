// freight's C++17 API: RAII over the C ABI of freight.h, named as rclcpp
// names things. Errors are exceptions derived from std::runtime_error.
//
//   freight::Context ctx;                       // reads ROS_DOMAIN_ID
//   freight::Node node = ctx.create_node("camera");
//   std::cout << node.get_fully_qualified_name() << "\n";   // "/camera"
//
// Link with -lfreight_c.
#ifndef FREIGHT_FREIGHT_HPP
#define FREIGHT_FREIGHT_HPP

#include <freight/freight.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

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

// A named participant of the ROS graph; made by Context::create_node. Moves,
// does not copy; it stays valid after its Context is destroyed.
class Node {
public:
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

}  // namespace freight

#endif  // FREIGHT_FREIGHT_HPP
