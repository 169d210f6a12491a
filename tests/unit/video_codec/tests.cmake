# Unit tests for the H.264 encoder, decoder and column marker (src/video_codec). Included from
# tests/unit/CMakeLists.txt. The tests draw and convert pictures with libyuv.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(video_codec_tests
  ${SYNC_ROOT}/tests/unit/video_codec/video_codec_decoder_test.cpp
  ${SYNC_ROOT}/tests/unit/video_codec/video_codec_encoder_test.cpp
  ${SYNC_ROOT}/tests/unit/video_codec/video_codec_marker_test.cpp
)
target_include_directories(video_codec_tests PRIVATE ${LIBYUV_INCLUDE} ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(video_codec_tests PRIVATE sync_video_codec sync_media ${LIBYUV_LIB} GTest::gtest_main)
add_test(NAME video_codec_tests COMMAND video_codec_tests)
