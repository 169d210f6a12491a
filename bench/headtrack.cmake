# Head-tracker per-packet costs with equivalence gates (see bench/headtrack_bench.cpp). Included
# from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(headtrack_bench ${SYNC_ROOT}/bench/headtrack_bench.cpp)
target_include_directories(headtrack_bench PRIVATE ${SYNC_ROOT}/tests/unit/headtrack)
target_compile_definitions(headtrack_bench PRIVATE SYNC_ROOT_DIR="${SYNC_ROOT}")
target_link_libraries(headtrack_bench PRIVATE sync_headtrack)

# Filter quality next to upstream's on seeded traces (docs/headtracker.md, "Filter"). Reads no
# clock: its table is reproducible and the unit tests assert the same figures.
add_executable(headtrack_filter_bench ${SYNC_ROOT}/bench/headtrack_filter_bench.cpp)
target_link_libraries(headtrack_filter_bench PRIVATE sync_headtrack)
