# Unit tests for the RFC 6455 core (src/net/ws). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(ws_tests
  ${SYNC_ROOT}/tests/unit/net/ws/ws_frame_decoder_test.cpp
  ${SYNC_ROOT}/tests/unit/net/ws/ws_frame_encoder_test.cpp
  ${SYNC_ROOT}/tests/unit/net/ws/ws_unmask_test.cpp
  ${SYNC_ROOT}/tests/unit/net/ws/ws_utf8_test.cpp
)
target_link_libraries(ws_tests PRIVATE sync_ws GTest::gtest_main)
add_test(NAME ws_tests COMMAND ws_tests)
