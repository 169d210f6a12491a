# libFuzzer targets for RTP, RTCP and H.264 packetization (src/rtp). Included from
# fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON; the top level then compiles sync_rtp with coverage
# instrumentation.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_rtp and fuzz_rtcp need clang (libFuzzer); skipped")
  return()
endif()

foreach(target rtp rtcp)
  add_executable(fuzz_${target} ${SYNC_ROOT}/fuzz/${target}.cpp)
  target_compile_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_${target} PRIVATE sync_rtp)
endforeach()
