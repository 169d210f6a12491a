# Unit tests for the receiver timing module (src/jitter). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(jitter_tests
  ${SYNC_ROOT}/tests/unit/jitter/jitter_buffer_test.cpp
  ${SYNC_ROOT}/tests/unit/jitter/jitter_nack_test.cpp
  ${SYNC_ROOT}/tests/unit/jitter/jitter_clock_skew_test.cpp
  ${SYNC_ROOT}/tests/unit/jitter/jitter_simulation_test.cpp
)
target_include_directories(jitter_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(jitter_tests PRIVATE sync_jitter GTest::gtest_main)
add_test(NAME jitter_tests COMMAND jitter_tests)
