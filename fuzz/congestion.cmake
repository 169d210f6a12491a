# libFuzzer target for the congestion module (delay-based estimator, rate controller, pacer).
# Included from fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON; the top level then compiles
# sync_congestion with coverage instrumentation.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_congestion needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_congestion ${SYNC_ROOT}/fuzz/congestion.cpp)
target_compile_options(fuzz_congestion PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_congestion PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_congestion PRIVATE sync_congestion)
