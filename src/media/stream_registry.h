// The router: open streams, the publishers, and the fan-out of accepted frames.
//
// Closed streams keep their counters for a while (the most recent kRetainedClosedStreams), so a
// producer that disconnects right after its last frame still leaves an exact account in /stats.
// Thread: the loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "media/publisher.h"
#include "media/stream.h"
#include "telemetry/frame_event_log.h"

namespace syncd::media {

struct StreamLimits {
  uint32_t max_width = 8192;
  uint32_t max_height = 8192;
  uint32_t max_slots = 16;
  uint32_t max_streams = 16;
  size_t max_frame_bytes = 64ull << 20;
  size_t max_pool_bytes_total = 2ull << 30;
  size_t frame_event_records = 1u << 16;  // ~18 min of one 60 fps stream; 2.6 MB
};

// Stable error codes of stream setup (docs/protocol.md, "Errors").
enum class OpenError { kNone, kNameTaken, kBadGeometry, kBadSlots, kTooMany, kNoMemory };
const char* open_error_code(OpenError e);

class StreamRegistry {
 public:
  static constexpr size_t kRetainedClosedStreams = 32;

  explicit StreamRegistry(StreamLimits limits = {})
      : limits_(limits), events_(limits.frame_event_records) {}
  ~StreamRegistry();

  void add_publisher(std::unique_ptr<Publisher> publisher);
  const std::vector<std::unique_ptr<Publisher>>& publishers() const { return publishers_; }
  // Whether any publisher verifies frames by their content hash (Publisher::verifies_content).
  bool verifies_content() const { return verifies_content_; }

  // Control plane: validates the configuration and allocates the stream's pool.
  Stream* open(const StreamConfig& config, uint64_t owner, OpenError& error);
  void close(Stream* stream);
  void close_owned_by(uint64_t owner);

  Stream* find(uint32_t id);  // open streams only
  Stream* find(const std::string& name);

  // Data plane: the frame in slot is complete. Counts it, fans it out to every publisher and
  // drops the writer's reference. Never allocates or throws.
  void admit(Stream& stream, FrameSlot* slot, uint64_t now_ns);

  // Once a second or more: closes rate bins.
  void tick(uint64_t now_ns);

  // Open and retained closed streams, oldest first.
  std::vector<const Stream*> all_streams() const;
  void write_stats(nlohmann::json& out) const;
  void write_metrics(telemetry::PrometheusText& out) const;

  uint64_t total_dropped() const;
  const telemetry::FrameEventLog& frame_events() const { return events_; }
  size_t pool_bytes() const { return pool_bytes_; }

 private:
  StreamLimits limits_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  std::map<uint32_t, std::unique_ptr<Stream>> open_;
  std::deque<std::unique_ptr<Stream>> closed_;
  uint32_t next_id_ = 1;
  size_t pool_bytes_ = 0;
  bool verifies_content_ = false;
  telemetry::FrameEventLog events_;
};

}  // namespace syncd::media
