# Unit tests for the WAN relay (src/relay). Included from tests/unit/CMakeLists.txt.
add_executable(relay_tests ${SYNC_ROOT}/tests/unit/relay_wire_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay_thread_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay_link_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay_session_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay_encode_ladder_test.cpp
                           ${SYNC_ROOT}/tests/unit/relay_encoder_test.cpp)
target_link_libraries(relay_tests PRIVATE sync_relay PkgConfig::XXHASH GTest::gtest_main)
add_test(NAME relay_tests COMMAND relay_tests)
