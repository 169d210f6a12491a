# Unit tests for the Opus multistream codec (src/audio_codec). Included from
# tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(audio_codec_tests
  ${SYNC_ROOT}/tests/unit/audio_codec/audio_codec_allocation_test.cpp
  ${SYNC_ROOT}/tests/unit/audio_codec/audio_codec_codec_test.cpp
  ${SYNC_ROOT}/tests/unit/audio_codec/audio_codec_continuity_test.cpp
  ${SYNC_ROOT}/tests/unit/audio_codec/audio_codec_framing_test.cpp
  ${SYNC_ROOT}/tests/unit/audio_codec/audio_codec_playout_test.cpp
)
target_link_libraries(audio_codec_tests PRIVATE sync_audio_codec GTest::gtest_main)
add_test(NAME audio_codec_tests COMMAND audio_codec_tests)
