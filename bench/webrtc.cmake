# ICE-lite STUN: parse and integrity-check a Binding request against a plain HMAC-SHA1 of the same
# bytes. Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(webrtc_bench ${SYNC_ROOT}/bench/webrtc_bench.cpp)
target_link_libraries(webrtc_bench PRIVATE sync_webrtc OpenSSL::Crypto benchmark::benchmark)
