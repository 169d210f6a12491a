# libFuzzer target for the FEC decoder (src/fec). Included from fuzz/CMakeLists.txt when
# SYNC_BUILD_FUZZ=ON; the top level then compiles sync_fec with coverage instrumentation.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_fec_decoder needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_fec_decoder ${SYNC_ROOT}/fuzz/fec_decoder.cpp)
target_compile_options(fuzz_fec_decoder PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_fec_decoder PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_fec_decoder PRIVATE sync_fec)
