# libFuzzer target for the SRTP/SRTCP receive path of src/secure (RFC 7714 framing). Included
# from fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_srtp_unprotect needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_srtp_unprotect ${SYNC_ROOT}/fuzz/srtp_unprotect.cpp)
target_compile_options(fuzz_srtp_unprotect PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_srtp_unprotect PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_srtp_unprotect PRIVATE sync_secure)

# The server's DTLS routing by address (re-bind, busy refusal, preemption), with real handshakes.
add_executable(fuzz_dtls_routing ${SYNC_ROOT}/fuzz/dtls_routing.cpp)
target_compile_options(fuzz_dtls_routing PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_dtls_routing PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_dtls_routing PRIVATE sync_secure)
