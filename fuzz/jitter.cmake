# libFuzzer target for the jitter buffer (with the NACK scheduler and the skew estimate).
# Included from fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_jitter_buffer needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_jitter_buffer ${SYNC_ROOT}/fuzz/jitter_buffer.cpp)
target_compile_options(fuzz_jitter_buffer PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_jitter_buffer PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_jitter_buffer PRIVATE sync_jitter)
