# freight's C ABI and C++17 API for CMake projects:
#
#   find_package(freight CONFIG REQUIRED)
#   target_link_libraries(my_node PRIVATE freight::freight)
#
# freight::freight is libfreight_c.so with include/freight/ (freight.h,
# freight.hpp) and C++17. Installed by `make install PREFIX=...` to
# PREFIX/lib/cmake/freight/.
#
# Messages and services of your own packages (directories holding msg/*.msg
# and srv/*.srv, named as the package):
#
#   freight_generate_messages(my_node src/my_msgs [more packages...])
#
# generates freight/msgs/<package>.hpp for each at build time (with
# `freight msg cpp`, again when a .msg or .srv file changes) and puts them on
# my_node's include path. FREIGHT_EXECUTABLE is the freight tool it runs.
get_filename_component(_freight_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET freight::freight)
  add_library(freight::freight SHARED IMPORTED)
  set_target_properties(freight::freight PROPERTIES
    IMPORTED_LOCATION "${_freight_prefix}/lib/libfreight_c.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_freight_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
set(FREIGHT_EXECUTABLE "${_freight_prefix}/bin/freight" CACHE FILEPATH "the freight tool")
unset(_freight_prefix)

function(freight_generate_messages target)
  if(NOT ARGN)
    message(FATAL_ERROR "freight_generate_messages(${target}): name at least one package directory")
  endif()
  set(out "${CMAKE_CURRENT_BINARY_DIR}/freight_msgs/${target}")
  set(dirs "")
  set(headers "")
  set(inputs "")
  foreach(dir IN LISTS ARGN)
    get_filename_component(dir "${dir}" ABSOLUTE)
    if(NOT IS_DIRECTORY "${dir}")
      message(FATAL_ERROR "freight_generate_messages(${target}): ${dir} is not a directory")
    endif()
    get_filename_component(package "${dir}" NAME)
    file(GLOB definitions CONFIGURE_DEPENDS "${dir}/msg/*.msg" "${dir}/srv/*.srv")
    list(APPEND dirs "${dir}")
    list(APPEND headers "${out}/freight/msgs/${package}.hpp")
    list(APPEND inputs ${definitions})
  endforeach()
  add_custom_command(
    OUTPUT ${headers}
    COMMAND "${FREIGHT_EXECUTABLE}" msg cpp --out "${out}" ${dirs}
    DEPENDS ${inputs}
    COMMENT "freight: C++ types of ${ARGN}"
    VERBATIM)
  add_custom_target(${target}_freight_msgs DEPENDS ${headers})
  add_dependencies(${target} ${target}_freight_msgs)
  target_include_directories(${target} PRIVATE "${out}")
endfunction()
