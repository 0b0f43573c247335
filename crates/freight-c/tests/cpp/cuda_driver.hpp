// The few CUDA driver calls the C++ device tests make, looked up in
// libcuda.so.1 at run time as freight itself does (no CUDA header): the
// simulated driver's in `make test`, a real one in the GPU checklist.
#ifndef FREIGHT_TESTS_CUDA_DRIVER_HPP
#define FREIGHT_TESTS_CUDA_DRIVER_HPP

#include "check.hpp"

#include <cstddef>
#include <cstdint>
#include <dlfcn.h>

// The CUDA driver calls a test needs, from libcuda.so.1.
struct Driver {
  using Result = int;
  Result (*init)(unsigned);
  Result (*device_get)(int *, int);
  Result (*primary_ctx_retain)(void **, int);
  Result (*ctx_set_current)(void *);
  Result (*htod)(std::uint64_t, const void *, std::size_t);
  Result (*dtoh)(void *, std::uint64_t, std::size_t);

  Driver() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    EXPECT(lib != nullptr);
    auto find = [&](const char *name) {
      void *f = dlsym(lib, name);
      EXPECT(f != nullptr);
      return f;
    };
    init = reinterpret_cast<decltype(init)>(find("cuInit"));
    device_get = reinterpret_cast<decltype(device_get)>(find("cuDeviceGet"));
    primary_ctx_retain = reinterpret_cast<decltype(primary_ctx_retain)>(find("cuDevicePrimaryCtxRetain"));
    ctx_set_current = reinterpret_cast<decltype(ctx_set_current)>(find("cuCtxSetCurrent"));
    htod = reinterpret_cast<decltype(htod)>(find("cuMemcpyHtoD_v2"));
    dtoh = reinterpret_cast<decltype(dtoh)>(find("cuMemcpyDtoH_v2"));
    // This thread on device 0's primary context, as the CUDA runtime does.
    int device = 0;
    void *ctx = nullptr;
    EXPECT(init(0) == 0 && device_get(&device, 0) == 0);
    EXPECT(primary_ctx_retain(&ctx, device) == 0 && ctx_set_current(ctx) == 0);
  }
};

inline std::uint64_t address(void *ptr) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr)); }

#endif  // FREIGHT_TESTS_CUDA_DRIVER_HPP
