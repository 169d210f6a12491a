# Unit tests for the impairment model of sync-impair (tools/impair). Included from
# tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(impair_tests ${SYNC_ROOT}/tests/unit/tools/impair/impair_model_test.cpp)
target_link_libraries(impair_tests PRIVATE sync_impair GTest::gtest_main)
add_test(NAME impair_tests COMMAND impair_tests)
