// The shared-memory publisher: one stream's frames, published to a ring that any number of local
// readers map (layout: include/sync/shm_ring.h; readers: include/sync/shm_reader.h).
//
// Zero copy: the stream's frame pool is allocated inside the region, so the slot the socket
// wrote into is the slot readers read. Publishing is a few stores and a futex wake. Readers never
// block the writer; they detect overwritten slots through each slot's seqlock.
//
// Thread: the loop thread (see Publisher).
#pragma once

#include <cstdint>
#include <string>

#include "media/publisher.h"
#include "media/publishers/shm_region.h"

namespace syncd::media {

struct ShmPublisherConfig {
  std::string path;         // region file; default_region_path() when empty
  std::string stream_name;  // the stream to publish; empty: the first one opened
  uint32_t min_slots = 8;   // ring depth: readers have (slots - 1) frame periods to read one
};

class ShmPublisher final : public Publisher {
 public:
  explicit ShmPublisher(ShmPublisherConfig config);

  std::string_view name() const override { return "shm"; }
  FramePool* create_pool(const StreamConfig& config, size_t frame_bytes) override;
  void on_stream_open(const Stream& stream) override;
  void on_stream_close(const Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const Stream& stream, FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const Stream*>& streams) const override;

  const std::string& path() const { return config_.path; }
  const std::string& last_error() const { return last_error_; }

 private:
  ShmPublisherConfig config_;
  ShmRegion* region_ = nullptr;        // owned by the pool it backs
  FramePool* pending_pool_ = nullptr;  // created, stream not yet opened
  uint32_t ring_stream_id_ = 0;
  uint64_t delivered_ = 0;  // for the ring stream (kept after it closes)
  uint32_t delivered_stream_id_ = 0;
  uint64_t create_failures_ = 0;
  std::string last_error_;
};

}  // namespace syncd::media
