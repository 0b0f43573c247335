// What the C++ test programs share: EXPECT, which ends the program at the
// first surprise with its place, and a context on shared memory only.
#ifndef FREIGHT_TESTS_CHECK_HPP
#define FREIGHT_TESTS_CHECK_HPP

#include <freight/freight.hpp>

#include <cstdlib>
#include <iostream>

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::cerr << __FILE__ << ":" << __LINE__ << ": " #cond " failed\n"; \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

// A local-only context: shared memory, nothing on the network.
inline freight::Context local_context() {
  freight::ContextOptions options;
  options.local_only = true;
  return freight::Context(options);
}

#endif  // FREIGHT_TESTS_CHECK_HPP
