# Module boundaries: a target can include only the modules it links.
#
# Sources include module headers as "media/stream.h", "net/ws/frame_decoder.h" or "sync/shm_ring.h",
# so adding src/ (or include/) as an include directory would expose every module to everyone. Each
# module gets instead its own include root in the build tree that holds one symlink, to its own
# folder only (build/include-roots/media/media -> src/media), published by its library. A target
# then sees "media/..." only if it links sync_media, directly or through a PUBLIC dependency; an
# include of an unlinked module fails to compile. A library whose headers include another module
# links it PUBLIC; one whose sources alone do links it PRIVATE.
#
# Included by the top-level CMakeLists.txt; the modules that also build on their own include it
# themselves.
include_guard(GLOBAL)

# sync_module(<target> <prefix> [DIR <folder>])
# Publishes "<prefix>/..." (e.g. media, net/ws) to <target> and to whatever links it. <folder> is
# the module's folder, by default <root>/src/<prefix>.
function(sync_module target prefix)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "DIR" "")
  if(NOT arg_DIR)
    # This file lives in <root>/cmake.
    get_filename_component(arg_DIR "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../src/${prefix}" ABSOLUTE)
  endif()
  if(NOT IS_DIRECTORY "${arg_DIR}")
    message(FATAL_ERROR "sync_module(${target} ${prefix}): no folder ${arg_DIR}")
  endif()
  # One root per module, named after its prefix, so net/ws and net/http do not share a "net".
  string(REPLACE "/" "_" root_name "${prefix}")
  set(root "${CMAKE_BINARY_DIR}/include-roots/${root_name}")
  get_filename_component(link_parent "${root}/${prefix}" DIRECTORY)
  file(MAKE_DIRECTORY "${link_parent}")
  file(CREATE_LINK "${arg_DIR}" "${root}/${prefix}" RESULT link_result SYMBOLIC)
  if(NOT link_result EQUAL 0)
    message(FATAL_ERROR "sync_module(${target} ${prefix}): cannot link ${root}/${prefix}: "
                        "${link_result}")
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE "${root}")
  else()
    target_include_directories(${target} PUBLIC "${root}")
  endif()
endfunction()
