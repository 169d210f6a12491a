// The registry's limits on streams, plain data (stream_registry.h), what the command line fills.
//
// Any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncd::media {

struct StreamLimits {
  uint32_t max_width = 8192;
  uint32_t max_height = 8192;
  uint32_t max_slots = 16;
  uint32_t max_streams = 16;
  uint32_t max_streams_per_owner = 8;  // one connection's share of max_streams
  size_t max_frame_bytes = 64ull << 20;
  // Frame pool memory of the whole process, counted until a pool is unmapped (which may be after
  // its stream closed, while a consumer still holds a frame).
  size_t max_pool_bytes_total = 2ull << 30;
  // One connection's share of it (its open streams' pools), so that another client can always
  // open a stream: half the total by default (--max-pool-mb-per-connection).
  size_t max_pool_bytes_per_owner = 1ull << 30;
  size_t frame_event_records = 1u << 16;  // ~18 min of one 60 fps stream; 2.6 MB
};

}  // namespace syncd::media
