# Unit tests for the WHEP egress (src/whep). Included from tests/unit/CMakeLists.txt.
add_executable(whep_tests ${SYNC_ROOT}/tests/unit/whep/whep_transport_test.cpp)
target_link_libraries(whep_tests PRIVATE sync_whep GTest::gtest_main)
add_test(NAME whep_tests COMMAND whep_tests)

# WhepService's offers, sessions and WHIP push error paths, on a real loop and real egress
# threads (no browser; the WHIP endpoint is a loopback HTTP server in the test).
add_executable(whep_service_tests ${SYNC_ROOT}/tests/unit/whep/whep_service_test.cpp
                                  ${SYNC_ROOT}/tests/unit/whep/whip_push_test.cpp)
target_include_directories(whep_service_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(whep_service_tests PRIVATE sync_whep GTest::gtest_main)
add_test(NAME whep_service_tests COMMAND whep_service_tests)
set_tests_properties(whep_service_tests PROPERTIES TIMEOUT 300)
