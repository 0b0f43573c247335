# freight's C ABI and C++17 API for CMake projects:
#
#   find_package(freight CONFIG REQUIRED)
#   target_link_libraries(my_node PRIVATE freight::freight)
#
# freight::freight is libfreight_c.so with include/freight/ (freight.h,
# freight.hpp) and C++17. Installed by `make install PREFIX=...` to
# PREFIX/lib/cmake/freight/.
get_filename_component(_freight_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET freight::freight)
  add_library(freight::freight SHARED IMPORTED)
  set_target_properties(freight::freight PROPERTIES
    IMPORTED_LOCATION "${_freight_prefix}/lib/libfreight_c.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_freight_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
unset(_freight_prefix)
