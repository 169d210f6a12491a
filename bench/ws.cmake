# Unmask kernel throughput against memcpy on one 1080p RGBA frame. Included from
# bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(unmask_bench ${SYNC_ROOT}/bench/unmask_bench.cpp)
target_link_libraries(unmask_bench PRIVATE sync_ws benchmark::benchmark)

# The ingest's unmask + content hash per window, two passes against core::UnmaskingHasher's one.
add_executable(ingest_hash_bench ${SYNC_ROOT}/bench/ingest_hash_bench.cpp)
target_link_libraries(ingest_hash_bench PRIVATE sync_ws sync_core)
