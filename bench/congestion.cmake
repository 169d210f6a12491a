# Per-packet cost of the delay-based estimate and the pacer, as ratios against a ring store of the
# same packet information (see bench/congestion_bench.cpp). Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(congestion_bench ${SYNC_ROOT}/bench/congestion_bench.cpp)
target_link_libraries(congestion_bench PRIVATE sync_congestion benchmark::benchmark)
