#!/bin/sh
# Installs the freight tool and freight's C and C++ API into PREFIX (default
# /usr/local): bin/freight, the library (lib/libfreight_c.so,
# lib/libfreight_c.a), the headers (include/freight/, the messages' in
# include/freight/msgs/), the CMake package (lib/cmake/freight/), freight.pc,
# and, when `make build` made it, the C++ side of `freight bench latency --lang
# cpp` (libexec/freight/freight-bench-cpp), from a release build (`make build`).
# Usage: scripts/install.sh [PREFIX] [LIBDIR of the build, default target/release]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-/usr/local}
built=${2:-$root/target/release}
crate=$root/crates/freight-c
for f in freight libfreight_c.so libfreight_c.a; do
    [ -f "$built/$f" ] || { echo "install: no $built/$f: run \`make build\` first" >&2; exit 1; }
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
mkdir -p "$prefix/bin" "$prefix/lib/cmake/freight" "$prefix/lib/pkgconfig" "$prefix/include/freight/msgs"
install -m 0755 "$built/freight" "$prefix/bin/"
# The C++ side of `freight bench latency --lang cpp`, where the tool looks for it.
if [ -f "$built/freight-bench-cpp" ]; then
    mkdir -p "$prefix/libexec/freight"
    install -m 0755 "$built/freight-bench-cpp" "$prefix/libexec/freight/"
fi
install -m 0755 "$built/libfreight_c.so" "$prefix/lib/"
install -m 0644 "$built/libfreight_c.a" "$prefix/lib/"
install -m 0644 "$crate/include/freight/"*.h "$crate/include/freight/"*.hpp "$prefix/include/freight/"
install -m 0644 "$crate/include/freight/msgs/"*.hpp "$prefix/include/freight/msgs/"
install -m 0644 "$crate/cmake/freightConfig.cmake" "$prefix/lib/cmake/freight/"
# A request for 0.x is met by any 0.x.y at least as new (semantic versioning
# before 1.0); a find_package without a version by any.
cat > "$prefix/lib/cmake/freight/freightConfigVersion.cmake" <<VERSION
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^[0-9]+\\\\.[0-9]+" _have "\${PACKAGE_VERSION}")
  string(REGEX MATCH "^[0-9]+\\\\.[0-9]+" _want "\${PACKAGE_FIND_VERSION}")
  if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR NOT _have STREQUAL _want)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
    if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
      set(PACKAGE_VERSION_EXACT TRUE)
    endif()
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
VERSION
cat > "$prefix/lib/pkgconfig/freight.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: freight
Description: freight's C ABI and C++17 API: large ROS 2 messages at the cost physics allows
Version: $version
Libs: -L\${libdir} -lfreight_c
Cflags: -I\${includedir}
PC
echo "freight $version installed in $prefix: find_package(freight) with CMAKE_PREFIX_PATH=$prefix, or pkg-config freight with PKG_CONFIG_PATH=$prefix/lib/pkgconfig"
