# H.264 packetize/depacketize of 1080p-sized access units against memcpy. Included from
# bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(rtp_bench ${SYNC_ROOT}/bench/rtp_bench.cpp)
target_link_libraries(rtp_bench PRIVATE sync_rtp benchmark::benchmark)
