# Unit tests for the WHEP egress (src/whep). Included from tests/unit/CMakeLists.txt.
add_executable(whep_tests ${SYNC_ROOT}/tests/unit/whep/whep_transport_test.cpp)
target_link_libraries(whep_tests PRIVATE sync_whep GTest::gtest_main)
add_test(NAME whep_tests COMMAND whep_tests)
