# Unit tests of src/server (writer limits, control routing, slow consumers) and of frames
# leaving the loop (core::WorkerHandoff; also run under TSan). Included from
# tests/unit/CMakeLists.txt.
add_executable(server_tests ${SYNC_ROOT}/tests/unit/server/server_test.cpp
                            ${SYNC_ROOT}/tests/unit/server/ticket_store_test.cpp)
target_link_libraries(server_tests PRIVATE sync_server GTest::gtest_main)
add_test(NAME server_tests COMMAND server_tests)
set_tests_properties(server_tests PROPERTIES TIMEOUT 120)

add_executable(handoff_tests ${SYNC_ROOT}/tests/unit/server/handoff_test.cpp)
target_link_libraries(handoff_tests PRIVATE sync_media sync_core PkgConfig::LIBUV GTest::gtest_main)
add_test(NAME handoff_tests COMMAND handoff_tests)
set_tests_properties(handoff_tests PROPERTIES TIMEOUT 120)
