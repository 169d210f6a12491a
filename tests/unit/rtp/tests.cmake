# Unit tests for RTP, RTCP and H.264 packetization (src/rtp). Included from
# tests/unit/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(rtp_tests
  ${SYNC_ROOT}/tests/unit/rtp/rtp_packet_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_sequence_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_h264_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_rtcp_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_rtx_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_receiver_statistics_test.cpp
  ${SYNC_ROOT}/tests/unit/rtp/rtp_allocation_test.cpp
)
target_link_libraries(rtp_tests PRIVATE sync_rtp GTest::gtest_main)
add_test(NAME rtp_tests COMMAND rtp_tests)
# The allocation test counts allocations with its own operator new over malloc: GCC 12 reads
# the matching operator delete's free() as a mismatch (-Wmismatched-new-delete), wrongly.
set_source_files_properties(${SYNC_ROOT}/tests/unit/rtp/rtp_allocation_test.cpp PROPERTIES
                            COMPILE_OPTIONS -Wno-mismatched-new-delete)
