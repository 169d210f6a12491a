# H.264 encode and decode (src/video_codec) at 720p and 1080p against libyuv's RGBA -> I420 and a
# memcpy of the frame. Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(video_codec_bench ${SYNC_ROOT}/bench/video_codec_bench.cpp)
target_include_directories(video_codec_bench PRIVATE ${LIBYUV_INCLUDE} ${SYNC_ROOT}/tests/unit/support)
target_link_libraries(video_codec_bench PRIVATE sync_video_codec sync_media ${LIBYUV_LIB} benchmark::benchmark)
