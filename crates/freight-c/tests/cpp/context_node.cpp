// The C++17 API: RAII handles, rclcpp's names, freight::Error. Prints what
// the Rust test (tests/programs.rs) checks; exits non-zero at the first
// surprise.
#include "check.hpp"

#include <freight/freight.hpp>

#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <type_traits>
#include <utility>

static_assert(std::is_base_of_v<std::runtime_error, freight::Error>);
static_assert(!std::is_copy_constructible_v<freight::Node> && std::is_move_constructible_v<freight::Node>);
static_assert(!std::is_copy_constructible_v<freight::Context> && std::is_move_constructible_v<freight::Context>);

int main() {
  freight::ContextOptions options;
  options.local_only = true;
  freight::Node node = [&] {
    freight::Context ctx(options);  // ROS_DOMAIN_ID from the test's environment
    std::cout << "domain " << ctx.domain_id() << "\n";
    return ctx.create_node("camera", "/robot");
  }();  // the context is gone; the node is not
  freight::Node moved = std::move(node);
  std::cout << "node " << moved.get_fully_qualified_name() << "\n";
  EXPECT(moved.get_name() == "camera" && moved.get_namespace() == "/robot");

  freight::Context ctx(options);
  EXPECT(ctx.create_node("root_node").get_fully_qualified_name() == "/root_node");
  try {
    ctx.create_node("bad-name");
    EXPECT(false);
  } catch (const freight::Error &e) {
    EXPECT(e.status() == FREIGHT_ERROR_NAME);
    std::cout << "caught " << e.what() << "\n";
  }
  try {
    freight::ContextOptions far;
    far.domain_id = 500;
    freight::Context nowhere(far);
    EXPECT(false);
  } catch (const std::runtime_error &e) {  // freight::Error is one
    std::cout << "caught " << e.what() << "\n";
  }
  std::cout << "version " << freight::version() << "\n";
  return 0;
}
