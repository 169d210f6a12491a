# The camera's colour conversion per frame against a memcpy, and the camera publisher's loop and
# worker time per frame (docs/benchmarks.md, docs/camera.md).
add_executable(camera_convert_bench ${SYNC_ROOT}/bench/camera_convert_bench.cpp)
target_link_libraries(camera_convert_bench PRIVATE sync_camera PkgConfig::LIBUV)
