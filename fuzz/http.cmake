# libFuzzer targets for the Host and Origin parsers (net/http/authority.h) and the HTTP client's
# response parser (net/http_client/http_response.h). Included from
# fuzz/CMakeLists.txt; the request-head parser's target (fuzz_http_request) is built there.
if(NOT DEFINED SYNC_ROOT)
  set(SYNC_ROOT ${CMAKE_SOURCE_DIR})
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "fuzz_http_authority needs clang (libFuzzer); skipped")
  return()
endif()

add_executable(fuzz_http_authority ${SYNC_ROOT}/fuzz/http_authority.cpp)
target_compile_options(fuzz_http_authority PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_http_authority PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_http_authority PRIVATE sync_http)

add_executable(fuzz_http_response ${SYNC_ROOT}/fuzz/http_response.cpp)
target_compile_options(fuzz_http_response PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_http_response PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_http_response PRIVATE sync_http_client)
