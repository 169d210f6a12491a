// The verifying test publisher: checks every byte of every accepted frame against what its
// producer put in, and the order of the frames.
//
// A frame carrying a content hash is verified by XXH3-64 over all of its pixels, so nothing is
// sampled. For a frame that came in over a WebSocket the ingest has already hashed the slot's
// bytes, in slot order, as each window landed (FrameInfo::received_hash, asked for by
// verifies_content()); this publisher compares the two. Any other frame (the pattern source's)
// it hashes on its worker thread (~0.5-1 ms for a 1080p frame, off the loop): the frame is
// pinned, handed over (core::WorkerHandoff) and its verdict comes back to the loop. A frame the
// worker cannot take (its pin refused, or 8 frames already waiting) is counted as dropped
// (consumer_slow), never silently skipped. A frame without a content hash (a browser
// canvas) is checked by its sequence marker instead and counted apart, so the two strengths of
// evidence are never mixed; so is a frame that carries the column marker instead
// (frame_flag::kColumnMarker: one that crossed the relay's encoder and decoder), by its low 16
// bits. Frames with nothing to check them by are counted as unchecked, not failed: an encoded
// stream's access unit without a content hash (a page's WebCodecs H.264), whose pixels are
// checked in its decoded twin (decode/decode_publisher.h) by their column marker, and decoded
// pixels (frame_flag::kDecoded) of a source that drew no column marker. Sequence checks:
// duplicates, gaps and reordering.
//
// Thread: the loop thread (see Publisher), apart from the hashing job on its worker.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/worker_handoff.h"
#include "media/publisher.h"

namespace syncd::media {

struct TestVerdicts {
  uint64_t delivered = 0;
  uint64_t verified = 0;         // content hash matched: every byte checked
  uint64_t marker_verified = 0;  // no hash sent; sequence (or column) marker matched
  uint64_t hash_mismatches = 0;
  uint64_t marker_mismatches = 0;
  uint64_t sequence_gaps = 0;  // sequence numbers skipped (frames never seen)
  uint64_t sequence_duplicates = 0;
  uint64_t sequence_reordered = 0;  // lower than one already seen, and not a duplicate of the last
  uint64_t dropped_consumer_slow = 0;  // could not be handed to the worker
  uint64_t verifying = 0;              // with the worker now
  uint64_t unchecked = 0;  // access units without a hash, decoded pictures without a marker
  bool any = false;
  uint64_t last_sequence = 0;
  uint64_t verify_failures() const { return hash_mismatches + marker_mismatches; }
};

class TestPublisher final : public Publisher {
 public:
  // With a loop, frames that need hashing are hashed on a worker thread; without (unit tests),
  // on the caller's thread.
  explicit TestPublisher(uv_loop_t* loop = nullptr);
  ~TestPublisher() override;

  std::string_view name() const override { return "test"; }
  void stop() override;
  void on_stream_open(const Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const Stream& stream, FrameSlot& slot) override;
  bool verifies_content() const override { return true; }
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_stream_summary(uint32_t stream_id, nlohmann::json& stream) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const Stream*>& streams) const override;

  // nullptr for a stream this publisher has not seen.
  const TestVerdicts* verdicts(uint32_t stream_id) const;

 private:
  struct HashJob {
    FrameSlot* slot;
    uint32_t stream_id;
    uint64_t hash;  // computed by the worker
  };
  static void hash_on_worker(HashJob& job, void* self);
  static void verdict_on_loop(HashJob& job, void* self);
  void count_hash(TestVerdicts& v, uint64_t hash, uint64_t expected);

  std::unordered_map<uint32_t, TestVerdicts> streams_;
  std::unique_ptr<core::WorkerHandoff<HashJob, 8>> worker_;
};

}  // namespace syncd::media
