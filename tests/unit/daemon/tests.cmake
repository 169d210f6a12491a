# Unit tests of syncd's command line (src/daemon/options.h): every option into its field, the
# defaults, every refusal and its exit status. Included from tests/unit/CMakeLists.txt.
add_executable(daemon_options_tests ${SYNC_ROOT}/tests/unit/daemon/daemon_options_test.cpp)
target_link_libraries(daemon_options_tests PRIVATE sync_daemon_options GTest::gtest_main)
add_test(NAME daemon_options_tests COMMAND daemon_options_tests)
