# Unit tests for the Reed-Solomon FEC (src/fec). Included from tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(fec_tests
  ${SYNC_ROOT}/tests/unit/fec/fec_codec_test.cpp
  ${SYNC_ROOT}/tests/unit/fec/fec_payload_test.cpp
  ${SYNC_ROOT}/tests/unit/fec/fec_policy_test.cpp
)
target_link_libraries(fec_tests PRIVATE sync_fec GTest::gtest_main)
add_test(NAME fec_tests COMMAND fec_tests)
