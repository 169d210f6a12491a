# libFuzzer targets for the WebRTC protocol cores (src/webrtc): SDP offers and STUN Binding
# requests. Included from fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON; the top level then compiles
# sync_webrtc with coverage instrumentation.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_webrtc_sdp and fuzz_webrtc_stun need clang (libFuzzer); skipped")
  return()
endif()

foreach(target webrtc_sdp webrtc_stun)
  add_executable(fuzz_${target} ${SYNC_ROOT}/fuzz/${target}.cpp)
  target_compile_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_${target} PRIVATE sync_webrtc)
endforeach()
# fuzz_webrtc_stun repairs FINGERPRINT CRCs of mutated inputs with zlib, as the core checks them.
find_package(ZLIB REQUIRED)
target_link_libraries(fuzz_webrtc_stun PRIVATE ZLIB::ZLIB)
