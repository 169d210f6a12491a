# Unit tests for the WAN relay (src/relay). Included from tests/unit/CMakeLists.txt.
add_executable(relay_tests ${SYNC_ROOT}/tests/unit/relay/relay_wire_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay/relay_link_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay/relay_session_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay/relay_sender_parts_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay/decode_stage_test.cpp)
# decode_stage_test encodes its input with the video codec and draws it with libyuv
# (tests/unit/support/video_codec_pictures.h).
target_include_directories(relay_tests PRIVATE ${LIBYUV_INCLUDE} ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(relay_tests PRIVATE sync_relay sync_decode sync_video_codec PkgConfig::XXHASH
                                          ${LIBYUV_LIB} GTest::gtest_main)
add_test(NAME relay_tests COMMAND relay_tests)
