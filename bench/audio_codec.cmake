# Opus multistream encode and decode of 32 channels against a float->int16 conversion and a
# memcpy of the same samples. Included from bench/CMakeLists.txt.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

add_executable(audio_codec_bench ${SYNC_ROOT}/bench/audio_codec_bench.cpp)
target_link_libraries(audio_codec_bench PRIVATE sync_audio_codec benchmark::benchmark)
