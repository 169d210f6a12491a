# Unit tests of the camera publisher's core (src/media/publishers/camera): conversion with known
# pixels, against the exact matrix, and of planar frames against libyuv's whole-frame
# conversions (hence libyuv here), the PipeWire node's
# format params (built and read back with spa's headers, hence libpipewire's flags), the
# v4l2loopback backend with a file standing in for the device, the hand-off's drop accounting,
# and an opt-in test on a real loopback device. Included from tests/unit/CMakeLists.txt.
add_executable(camera_tests ${SYNC_ROOT}/tests/unit/media/publishers/camera/camera_test.cpp)
pkg_check_modules(CAMERA_TESTS_PIPEWIRE REQUIRED IMPORTED_TARGET libpipewire-0.3)
target_include_directories(camera_tests PRIVATE ${LIBYUV_INCLUDE})
target_link_libraries(camera_tests PRIVATE sync_camera GTest::gtest_main ${LIBYUV_LIB}
                                           PkgConfig::CAMERA_TESTS_PIPEWIRE)
add_test(NAME camera_tests COMMAND camera_tests)
set_tests_properties(camera_tests PROPERTIES TIMEOUT 120)
