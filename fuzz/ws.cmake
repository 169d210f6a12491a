# libFuzzer target for the RFC 6455 frame decoder. Included from fuzz/CMakeLists.txt when
# SYNC_BUILD_FUZZ=ON; the top level then compiles sync_ws with coverage instrumentation.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_ws_frame_decoder needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_ws_frame_decoder ${SYNC_ROOT}/fuzz/ws_frame_decoder.cpp)
target_compile_options(fuzz_ws_frame_decoder PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_ws_frame_decoder PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_ws_frame_decoder PRIVATE sync_ws)
