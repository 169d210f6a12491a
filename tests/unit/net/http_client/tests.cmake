# Unit tests for the HTTP client (src/net/http_client). Included from tests/unit/CMakeLists.txt.
add_executable(http_client_tests ${SYNC_ROOT}/tests/unit/net/http_client/http_client_test.cpp)
target_link_libraries(http_client_tests PRIVATE sync_http_client sync_secure GTest::gtest_main)
add_test(NAME http_client_tests COMMAND http_client_tests)
set_tests_properties(http_client_tests PROPERTIES TIMEOUT 60)
