// The shared-memory publisher's settings (--shm-*), plain data (shm_publisher.h).
//
// Any thread.
#pragma once

#include <cstdint>
#include <string>

namespace syncd::media {

struct ShmPublisherConfig {
  std::string path;         // region file; default_region_path() when empty
  std::string stream_name;  // the stream to publish; empty: the first one opened
  uint32_t min_slots = 8;   // ring depth: readers have (slots - 1) frame periods to read one
};

}  // namespace syncd::media
