# Unit tests for src/secure: certificate and fingerprint, DTLS endpoint, SRTP sessions, key
# schedule. Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(secure_tests
  ${SYNC_ROOT}/tests/unit/secure/secure_certificate_test.cpp
  ${SYNC_ROOT}/tests/unit/secure/secure_dtls_test.cpp
  ${SYNC_ROOT}/tests/unit/secure/secure_srtp_test.cpp
  ${SYNC_ROOT}/tests/unit/secure/secure_key_schedule_test.cpp
)
target_link_libraries(secure_tests PRIVATE sync_secure sync_secure_reference GTest::gtest_main)
add_test(NAME secure_tests COMMAND secure_tests)
