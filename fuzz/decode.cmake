# libFuzzer target for the decode path of an ingested encoded stream (src/decode: the registry,
# the DecodePublisher and its stage's worker). Included from fuzz/CMakeLists.txt when
# SYNC_BUILD_FUZZ=ON. libavcodec is Debian's, not instrumented (see video_codec.cmake).
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_decode_twin needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_decode_twin ${SYNC_ROOT}/fuzz/decode_twin.cpp)
target_compile_options(fuzz_decode_twin PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_decode_twin PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_decode_twin PRIVATE sync_decode)
