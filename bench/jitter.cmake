# Jitter buffer insert+release cost per packet against std::map. Included from
# bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(jitter_bench ${SYNC_ROOT}/bench/jitter_bench.cpp)
target_link_libraries(jitter_bench PRIVATE sync_jitter benchmark::benchmark)
