# The first frame into each slot of a new pool against later ones (docs/benchmarks.md).
add_executable(first_frame_bench ${SYNC_ROOT}/bench/first_frame_bench.cpp)
target_link_libraries(first_frame_bench PRIVATE sync_media)
