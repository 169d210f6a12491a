# Unit tests for the transports' floor (src/transport), the RTP media layer (src/rtp_media) and
# the egress (src/egress). Included from tests/unit/CMakeLists.txt.
add_executable(transport_tests ${SYNC_ROOT}/tests/unit/transport/transport_test.cpp
                               ${SYNC_ROOT}/tests/unit/transport/transport_thread_test.cpp)
target_link_libraries(transport_tests PRIVATE sync_transport GTest::gtest_main)
add_test(NAME transport_tests COMMAND transport_tests)

add_executable(egress_tests ${SYNC_ROOT}/tests/unit/transport/encode_ladder_test.cpp
                            ${SYNC_ROOT}/tests/unit/transport/encode_stage_test.cpp)
target_link_libraries(egress_tests PRIVATE sync_egress sync_video_codec GTest::gtest_main)
add_test(NAME egress_tests COMMAND egress_tests)

add_executable(rtp_media_tests ${SYNC_ROOT}/tests/unit/transport/send_stream_test.cpp
                               ${SYNC_ROOT}/tests/unit/transport/receive_stream_test.cpp)
target_link_libraries(rtp_media_tests PRIVATE sync_rtp_media GTest::gtest_main)
add_test(NAME rtp_media_tests COMMAND rtp_media_tests)
