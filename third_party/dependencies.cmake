# Glue for system packages only: find them and expose one target each.
# A folder of headers carried to machines without a package registry (the GPU machine) can be named with
# MEMREC_EXTRA_INCLUDE (e.g. cereal extracted from Debian's libcereal-dev).
set(MEMREC_EXTRA_INCLUDE "" CACHE PATH "Extra include folder for header-only dependencies")

find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
# Optional: without SQLite, `memrec export --format sqlite` says it is unavailable (Debian: libsqlite3-dev).
find_package(SQLite3)
# Optional: without curses (Debian: libncurses-dev), `memrec top` says it is unavailable.
set(CURSES_NEED_NCURSES TRUE)
set(CURSES_NEED_WIDE TRUE)
find_package(Curses)

add_library(memrec_cereal INTERFACE)
find_package(cereal QUIET)
if(cereal_FOUND)
  target_link_libraries(memrec_cereal INTERFACE cereal::cereal)
else()
  find_path(CEREAL_INCLUDE_DIR cereal/cereal.hpp HINTS ${MEMREC_EXTRA_INCLUDE} REQUIRED)
  target_include_directories(memrec_cereal SYSTEM INTERFACE ${CEREAL_INCLUDE_DIR})
endif()

if(MEMREC_WITH_TORCH)
  find_package(Torch REQUIRED)
  # Torch's imported flags are added per target; its CMake config sets TORCH_CXX_FLAGS for the ABI define.
  add_library(memrec_torch INTERFACE)
  target_link_libraries(memrec_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(memrec_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(memrec_torch INTERFACE ${_torch_flags})
endif()

if(MEMREC_WITH_VIEWER)
  pkg_check_modules(IMGUI REQUIRED IMPORTED_TARGET imgui glfw3 gl)
endif()

if(MEMREC_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MEMREC_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
