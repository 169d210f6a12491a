// A consumer of accepted frames (test verifier, shared-memory ring, camera, HTTP stream...).
//
// Accounting identity per publisher and stream: frames offered to it == delivered + dropped.
// Thread: every method is called on the loop thread. on_frame() must not block or allocate; a
// publisher that needs the frame after returning takes a reference with FramePool::retain().
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>
#include <vector>

#include "media/frame_pool.h"
#include "media/stream.h"
#include "telemetry/prometheus.h"

namespace syncd::media {

class Publisher {
 public:
  virtual ~Publisher() = default;
  virtual std::string_view name() const = 0;
  // syncd is stopping: finish or drop what is in flight and stop any thread of the publisher.
  virtual void stop() {}
  // Control plane: may allocate per-stream state.
  virtual void on_stream_open(const Stream& stream) = 0;
  // The stream is closing: no more frames will come (its pool may outlive it while held).
  virtual void on_stream_close(const Stream& stream) { (void)stream; }
  // Offered the chance to provide the memory of a new stream's frame pool (the shared-memory
  // publisher puts it in its region). nullptr: the registry makes an anonymous pool.
  virtual FramePool* create_pool(const StreamConfig& config, size_t frame_bytes) {
    (void)config;
    (void)frame_bytes;
    return nullptr;
  }
  // The registry has forgotten the stream (after it closed and aged out of the stats).
  virtual void on_stream_forget(uint32_t stream_id) = 0;
  virtual void on_frame(const Stream& stream, FrameSlot& slot) = 0;
  // Whether this publisher checks frames against their content hash: the ingest then hashes
  // each frame that carries one as it arrives (FrameInfo::received_hash).
  virtual bool verifies_content() const { return false; }
  // Adds this publisher's per-stream figures to a stream's stats object.
  virtual void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const = 0;
  // Adds stream-level fields that this publisher is the authority for (the test publisher's
  // frames_verified), beside the stream's own counters.
  virtual void write_stream_summary(uint32_t stream_id, nlohmann::json& stream) const {
    (void)stream_id;
    (void)stream;
  }
  // Adds this publisher's metric families, with samples for each of the given streams.
  virtual void write_metrics(telemetry::PrometheusText& out,
                             const std::vector<const Stream*>& streams) const = 0;
};

}  // namespace syncd::media
