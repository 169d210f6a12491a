# libFuzzer targets of the WAN relay's own formats. Included from fuzz/CMakeLists.txt.
add_executable(fuzz_relay_wire ${SYNC_ROOT}/fuzz/relay_wire.cpp)
target_compile_options(fuzz_relay_wire PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_relay_wire PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_relay_wire PRIVATE sync_relay)
