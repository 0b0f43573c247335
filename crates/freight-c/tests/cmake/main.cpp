// Built by tests/cmake/CMakeLists.txt against the installed package.
#include <freight/freight.hpp>

#include <iostream>

int main() {
  freight::ContextOptions options;
  options.local_only = true;
  freight::Context ctx(options);
  std::cout << "node " << ctx.create_node("consumer", "/cmake").get_fully_qualified_name() << "\n";
  return 0;
}
