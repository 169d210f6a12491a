# Frame hand-off to a worker thread and back, against a memcpy of the frame (docs/benchmarks.md).
add_executable(handoff_bench ${SYNC_ROOT}/bench/handoff_bench.cpp)
target_link_libraries(handoff_bench PRIVATE sync_media sync_core PkgConfig::LIBUV)
