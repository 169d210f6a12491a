# Unit tests for bandwidth estimation and pacing (src/congestion), with a simulated bottleneck
# link (tests/unit/congestion/congestion_link_sim.h). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(congestion_tests
  ${SYNC_ROOT}/tests/unit/congestion/congestion_abs_send_time_test.cpp
  ${SYNC_ROOT}/tests/unit/congestion/congestion_delay_test.cpp
  ${SYNC_ROOT}/tests/unit/congestion/congestion_loss_test.cpp
  ${SYNC_ROOT}/tests/unit/congestion/congestion_pacer_test.cpp
  ${SYNC_ROOT}/tests/unit/congestion/congestion_probe_test.cpp
  ${SYNC_ROOT}/tests/unit/congestion/congestion_sim_test.cpp
)
target_include_directories(congestion_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(congestion_tests PRIVATE sync_congestion GTest::gtest_main)
add_test(NAME congestion_tests COMMAND congestion_tests)
set_tests_properties(congestion_tests PROPERTIES TIMEOUT 300)
