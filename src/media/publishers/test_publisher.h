// The verifying test publisher: checks every byte of every accepted frame against what its
// producer put in, and the order of the frames.
//
// A frame carrying a content hash is verified by XXH3-64 over all of its pixels, so nothing is
// sampled. For a frame that came in over a WebSocket the ingest has already hashed the slot's
// bytes, in slot order, as each window landed (FrameInfo::received_hash, asked for by
// verifies_content()); this publisher compares the two. Any other frame (the pattern source's)
// it hashes itself (~0.2 ms for a 1080p frame). A frame without a content hash (a browser
// canvas) is checked by its sequence marker instead and counted apart, so the two strengths of
// evidence are never mixed. Sequence checks: duplicates, gaps and reordering.
//
// Thread: the loop thread (see Publisher).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "media/publisher.h"

namespace syncd::media {

struct TestVerdicts {
  uint64_t delivered = 0;
  uint64_t verified = 0;         // content hash matched: every byte checked
  uint64_t marker_verified = 0;  // no hash sent; sequence marker matched
  uint64_t hash_mismatches = 0;
  uint64_t marker_mismatches = 0;
  uint64_t sequence_gaps = 0;  // sequence numbers skipped (frames never seen)
  uint64_t sequence_duplicates = 0;
  uint64_t sequence_reordered = 0;  // lower than one already seen, and not a duplicate of the last
  bool any = false;
  uint64_t last_sequence = 0;
  uint64_t verify_failures() const { return hash_mismatches + marker_mismatches; }
};

class TestPublisher final : public Publisher {
 public:
  std::string_view name() const override { return "test"; }
  void on_stream_open(const Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const Stream& stream, FrameSlot& slot) override;
  bool verifies_content() const override { return true; }
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const Stream*>& streams) const override;

  // nullptr for a stream this publisher has not seen.
  const TestVerdicts* verdicts(uint32_t stream_id) const;

 private:
  std::unordered_map<uint32_t, TestVerdicts> streams_;
};

}  // namespace syncd::media
