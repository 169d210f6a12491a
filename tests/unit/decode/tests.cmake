# Unit tests for the decoded twins of encoded streams (src/decode). Included from
# tests/unit/CMakeLists.txt. (The decode stage itself is tested with the relay's receiver, in
# relay_tests: decode_stage_test.cpp.) The tests encode their input with the video codec and draw
# it with libyuv (tests/unit/support/video_codec_pictures.h).
add_executable(decode_tests ${SYNC_ROOT}/tests/unit/decode/decode_publisher_test.cpp)
target_include_directories(decode_tests PRIVATE ${LIBYUV_INCLUDE} ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(decode_tests PRIVATE sync_decode sync_video_codec ${LIBYUV_LIB}
                                           GTest::gtest_main)
add_test(NAME decode_tests COMMAND decode_tests)
