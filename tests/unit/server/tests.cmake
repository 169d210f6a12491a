# Unit tests of src/server (writer limits, control routing, slow consumers) and of frames
# leaving the loop (core::WorkerHandoff; also run under TSan). Included from
# tests/unit/CMakeLists.txt.
add_executable(server_tests ${SYNC_ROOT}/tests/unit/server/server_test.cpp
                            ${SYNC_ROOT}/tests/unit/server/ticket_store_test.cpp)
target_link_libraries(server_tests PRIVATE sync_server GTest::gtest_main)
target_include_directories(server_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
add_test(NAME server_tests COMMAND server_tests)
set_tests_properties(server_tests PROPERTIES TIMEOUT 120)

add_executable(handoff_tests ${SYNC_ROOT}/tests/unit/server/handoff_test.cpp)
target_link_libraries(handoff_tests PRIVATE sync_media sync_core PkgConfig::LIBUV GTest::gtest_main)
add_test(NAME handoff_tests COMMAND handoff_tests)
set_tests_properties(handoff_tests PROPERTIES TIMEOUT 120)

# The server's routes and services through a live Server on a loopback port (HTTP routes, stream
# control, HTTP stream receivers, frame ingest, audio and pose services), with the plain-socket
# clients of tests/unit/support/live_server.h.
add_executable(server_live_tests ${SYNC_ROOT}/tests/unit/server/http_routes_test.cpp
                                 ${SYNC_ROOT}/tests/unit/server/stream_control_test.cpp
                                 ${SYNC_ROOT}/tests/unit/server/frame_ingest_test.cpp
                                 ${SYNC_ROOT}/tests/unit/server/stream_receivers_test.cpp
                                 ${SYNC_ROOT}/tests/unit/server/audio_service_test.cpp
                                 ${SYNC_ROOT}/tests/unit/server/pose_service_test.cpp)
target_include_directories(server_live_tests PRIVATE ${SYNC_ROOT}/tests/unit/support)
target_compile_definitions(server_live_tests PRIVATE
  SYNC_HEADTRACK_DATA_DIR="${SYNC_ROOT}/tests/data/headtrack")
target_link_libraries(server_live_tests PRIVATE sync_server GTest::gtest_main)
add_test(NAME server_live_tests COMMAND server_live_tests)
set_tests_properties(server_live_tests PROPERTIES TIMEOUT 300)
