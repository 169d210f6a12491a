# Reed-Solomon FEC encode and decode of a 1080p frame's packets against memcpy. Included from
# bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(fec_bench ${SYNC_ROOT}/bench/fec_bench.cpp)
target_link_libraries(fec_bench PRIVATE sync_fec benchmark::benchmark)
