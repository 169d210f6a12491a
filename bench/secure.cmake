# SRTP protect/unprotect (ours and libsrtp2) against OpenSSL's AES-128-GCM at 1200 bytes, and the cost of a ClientHello
# to a listening DTLS server against a full handshake. Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(secure_bench ${SYNC_ROOT}/bench/secure_bench.cpp)
target_link_libraries(secure_bench PRIVATE sync_secure sync_secure_reference benchmark::benchmark)
