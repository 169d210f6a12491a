# libFuzzer target for the H.264 decoder (src/video_codec). Included from fuzz/CMakeLists.txt
# when SYNC_BUILD_FUZZ=ON. libavcodec and libx264 are Debian's C libraries, not instrumented:
# the fuzzer sees our code's edges only, but ASan still checks every access made through ours.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_h264_decode needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_h264_decode ${SYNC_ROOT}/fuzz/h264_decode.cpp)
target_compile_options(fuzz_h264_decode PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_h264_decode PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_h264_decode PRIVATE sync_video_codec)
