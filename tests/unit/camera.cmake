# Unit tests of the camera publisher's core (src/media/publishers/camera): conversion with known
# pixels, the v4l2loopback backend with a file standing in for the device, the hand-off's drop
# accounting, and an opt-in test on a real loopback device. Included from
# tests/unit/CMakeLists.txt.
add_executable(camera_tests ${SYNC_ROOT}/tests/unit/camera_test.cpp)
target_link_libraries(camera_tests PRIVATE sync_camera GTest::gtest_main)
add_test(NAME camera_tests COMMAND camera_tests)
set_tests_properties(camera_tests PROPERTIES TIMEOUT 120)
