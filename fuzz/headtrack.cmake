# libFuzzer targets for the head tracker: the HID descriptor parser and report decoding (through
# the pose pipeline). Included from fuzz/CMakeLists.txt when SYNC_BUILD_FUZZ=ON.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_hid_descriptor/fuzz_hid_report need clang (libFuzzer); skipped")
  return()
endif()

foreach(target hid_descriptor hid_report)
  add_executable(fuzz_${target} ${SYNC_ROOT}/fuzz/${target}.cpp)
  target_compile_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_include_directories(fuzz_${target} PRIVATE ${SYNC_ROOT}/tests/unit/headtrack)
  target_link_libraries(fuzz_${target} PRIVATE sync_headtrack)
endforeach()
