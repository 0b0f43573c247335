// Built by tests/cmake/CMakeLists.txt against the installed package.
#include <freight/freight.hpp>
#include <freight/msgs/sensor_msgs.hpp>

#include <iostream>

int main() {
  freight::ContextOptions options;
  options.local_only = true;
  freight::Context ctx(options);
  freight::msgs::sensor_msgs::Image image;
  image.data = std::vector<std::uint8_t>(12, 1);
  std::cout << "image " << freight::cdr::to_cdr(image).size() << " bytes\n";
  std::cout << "node " << ctx.create_node("consumer", "/cmake").get_fully_qualified_name() << "\n";
  return 0;
}
