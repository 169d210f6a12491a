# Unit tests for audio capture (src/audio). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(audio_tests
  ${SYNC_ROOT}/tests/unit/audio/audio_ring_test.cpp
  ${SYNC_ROOT}/tests/unit/audio/audio_naud_test.cpp
  ${SYNC_ROOT}/tests/unit/audio/audio_control_test.cpp
)
target_link_libraries(audio_tests PRIVATE sync_audio sync_control GTest::gtest_main)
add_test(NAME audio_tests COMMAND audio_tests)
set_tests_properties(audio_tests PROPERTIES TIMEOUT 120)
