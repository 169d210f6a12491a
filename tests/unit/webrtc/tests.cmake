# Unit tests for the WebRTC protocol cores (src/webrtc): SDP offer/answer and ICE-lite STUN.
# Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

find_package(ZLIB REQUIRED)
add_executable(webrtc_tests
  ${SYNC_ROOT}/tests/unit/webrtc/webrtc_sdp_test.cpp
  ${SYNC_ROOT}/tests/unit/webrtc/webrtc_stun_test.cpp
)
# zlib: the test computes FINGERPRINT CRCs of hand-built messages on its own.
target_link_libraries(webrtc_tests PRIVATE sync_webrtc ZLIB::ZLIB GTest::gtest_main)
add_test(NAME webrtc_tests COMMAND webrtc_tests)

# The SDP core as a filter (offer on stdin, answer on stdout) for the real-Chromium check in
# tests/browser/browser/whep_sdp.test.js.
add_executable(webrtc_answer ${SYNC_ROOT}/tests/unit/webrtc/webrtc_answer_main.cpp)
target_link_libraries(webrtc_answer PRIVATE sync_webrtc)
