# The loop thread's cost of a decoded twin (src/decode) against none, at 720p and 1080p.
# Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(decode_twin_bench ${SYNC_ROOT}/bench/decode_twin_bench.cpp)
target_include_directories(decode_twin_bench PRIVATE ${LIBYUV_INCLUDE} ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(decode_twin_bench PRIVATE sync_decode sync_video_codec ${LIBYUV_LIB}
                                                benchmark::benchmark)
