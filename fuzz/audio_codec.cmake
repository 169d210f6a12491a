# libFuzzer target for the Opus multistream decoder (src/audio_codec). Included from
# fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_opus_decode needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_opus_decode ${SYNC_ROOT}/fuzz/opus_decode.cpp)
target_compile_options(fuzz_opus_decode PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_opus_decode PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_opus_decode PRIVATE sync_audio_codec)
