// The shared-memory publisher: one stream's frames, published to a ring that any number of local
// readers map (layout: include/sync/shm_ring.h; readers: include/sync/shm_reader.h). The ring
// takes the stream named by --shm-stream, or else the first raw stream opened: an encoded
// stream (h264) reaches it as pictures, through its decoded twin "<name>.decoded".
//
// Zero copy: the stream's frame pool is allocated inside the region, so the slot the socket
// wrote into is the slot readers read. Publishing is a few stores and a futex wake. Readers never
// block the writer; they detect overwritten slots through each slot's seqlock.
//
// Liveness: while a ring is live, a loop timer stamps its heartbeat every
// SYNC_SHM_HEARTBEAT_PERIOD_MS (one store; the timer is unreferenced, so it never keeps the loop
// alive), so readers can tell a quiet stream from a dead syncd.
//
// A ring that cannot be created (a file another user planted at the path, for instance) is
// refused with a code: the stream runs on an ordinary pool, the code and message are in the
// stream's /stats (publishers.shm.error) and the refusal is counted in /metrics.
//
// Thread: the loop thread (see Publisher).
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>

#include "media/publisher.h"
#include "media/publishers/shm_config.h"
#include "media/publishers/shm_region.h"

namespace syncd::media {

class ShmPublisher final : public Publisher {
 public:
  // With a loop, live rings get a heartbeat timer; without (unit tests), none.
  ShmPublisher(ShmPublisherConfig config, uv_loop_t* loop = nullptr);
  ~ShmPublisher() override;
  ShmPublisher(const ShmPublisher&) = delete;
  ShmPublisher& operator=(const ShmPublisher&) = delete;

  std::string_view name() const override { return "shm"; }
  void stop() override;
  FramePool* create_pool(const StreamConfig& config, size_t frame_bytes) override;
  void on_stream_open(const Stream& stream) override;
  void on_stream_close(const Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const Stream& stream, FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const Stream*>& streams) const override;

  const std::string& path() const { return config_.path; }
  const std::string& last_error() const { return last_error_.message; }
  const char* last_error_code() const { return last_error_.code; }
  uint64_t foreign_file_refusals() const { return foreign_file_refusals_; }

 private:
  static void on_heartbeat(uv_timer_t* timer);
  void close_timer();

  ShmPublisherConfig config_;
  ShmRegion* region_ = nullptr;        // owned by the pool it backs
  FramePool* pending_pool_ = nullptr;  // created, stream not yet opened
  uint32_t ring_stream_id_ = 0;
  uint64_t delivered_ = 0;  // for the ring stream (kept after it closes)
  uint32_t delivered_stream_id_ = 0;
  uint64_t create_failures_ = 0;
  uint64_t foreign_file_refusals_ = 0;  // shm_foreign_file and shm_exists
  ShmRegionError last_error_;
  bool failed_pending_ = false;      // create_pool failed; the stream's open comes next
  uint32_t failed_stream_id_ = 0;    // the stream whose ring was refused (its /stats say why)
  uv_timer_t* heartbeat_ = nullptr;  // heap: freed in its close callback, after the loop is done
};

}  // namespace syncd::media
