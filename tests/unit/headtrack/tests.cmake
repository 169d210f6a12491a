# Unit tests for the head tracker (src/headtrack). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(headtrack_tests
  ${SYNC_ROOT}/tests/unit/headtrack/headtrack_descriptor_test.cpp
  ${SYNC_ROOT}/tests/unit/headtrack/headtrack_pose_test.cpp
  ${SYNC_ROOT}/tests/unit/headtrack/headtrack_filter_test.cpp
  ${SYNC_ROOT}/tests/unit/headtrack/headtrack_devices_test.cpp
  ${SYNC_ROOT}/tests/unit/headtrack/headtrack_format_test.cpp
)
target_include_directories(headtrack_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
target_compile_definitions(headtrack_tests PRIVATE
  SYNC_HEADTRACK_DATA_DIR="${SYNC_ROOT}/tests/data/headtrack")
target_link_libraries(headtrack_tests PRIVATE sync_headtrack GTest::gtest_main)
add_test(NAME headtrack_tests COMMAND headtrack_tests)
set_tests_properties(headtrack_tests PROPERTIES TIMEOUT 120)
