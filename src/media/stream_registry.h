// The router: open streams, the publishers, the one ingest API, and the fan-out of accepted
// frames.
//
// Ingest: every source (a WebSocket producer, the pattern source, and later shared-memory
// ingest, the WAN receiver, a decoder) asks begin() for a slot lease, fills the lease's slot, and
// commits or aborts it. Admission, drops by reason and the accounting identity
// (offered == accepted + dropped) live here and nowhere else.
//
// Closed streams keep their counters for a while (the most recent kRetainedClosedStreams), so a
// producer that disconnects right after its last frame still leaves an exact account in /stats.
// Thread: the loop thread only.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "media/publisher.h"
#include "media/stream.h"
#include "media/stream_limits.h"
#include "telemetry/frame_event_log.h"

namespace syncd::media {

// What a source knows of a frame when it begins one (a WebSocket producer: the frame header).
struct IngestRequest {
  uint32_t stream_id = 0;
  uint64_t owner = 0;  // the source; must own the stream
  uint32_t flags = 0;
  uint64_t sequence = 0;
  uint64_t capture_time_us = 0;
  uint64_t content_hash = 0;
  uint32_t width = 0;  // 0: the stream's
  uint32_t height = 0;
  PixelFormat format = PixelFormat::kStreamDefault;
  // Bytes the frame will carry when the source knows them up front (0: not known yet, checked
  // at commit): a frame of the wrong size is refused before any byte is read.
  uint64_t payload_bytes = 0;
  uint64_t start_ns = 0;  // first byte of the frame (CLOCK_MONOTONIC)
};

// Why begin() gave no lease. The first two are not the stream's to count (there is no stream
// of the source's); the rest are counted as drops of the stream.
enum class IngestRefusal {
  kNone,
  kUnknownStream,
  kNotOwner,
  kGeometryMismatch,
  kSizeMismatch,
  kPoolFull,
};

class StreamRegistry;

// A frame being filled: one slot of a stream's pool, owned by the source until it commits or
// aborts. Move-only; a lease dropped unfinished is aborted as kDisconnected. The source's thread
// (syncd's loop thread) only.
class SlotLease {
 public:
  SlotLease() = default;
  SlotLease(SlotLease&& other) noexcept { *this = std::move(other); }
  SlotLease& operator=(SlotLease&& other) noexcept;
  ~SlotLease();

  explicit operator bool() const { return slot_ != nullptr; }
  uint8_t* pixels() const { return slot_->pixels; }
  // The bytes the frame must have; for an encoded stream, the most it may have (its access
  // unit's size when the source said it up front, else the slot's).
  size_t frame_bytes() const { return slot_->info.bytes; }
  FrameInfo& info() const { return slot_->info; }
  uint32_t stream_id() const { return slot_->info.stream_id; }

  // The frame is complete: counted, published to every publisher, and the lease's reference
  // dropped. `filled` is how many bytes the source wrote; a frame short of (or past) the
  // stream's frame size is dropped as kSizeMismatch instead, and one whose stream closed under
  // it as kDisconnected (both return false). An encoded stream's access unit may be any size
  // from 1 to frame_bytes(); FrameInfo::bytes becomes `filled`.
  bool commit(size_t filled, uint64_t now_ns);
  // The frame will not be completed: counted as dropped for `reason`, slot released.
  void abort(DropReason reason);

 private:
  friend class StreamRegistry;
  SlotLease(StreamRegistry* registry, FrameSlot* slot) : registry_(registry), slot_(slot) {}
  StreamRegistry* registry_ = nullptr;
  FrameSlot* slot_ = nullptr;
};

// Stable error codes of stream setup (docs/protocol.md, "Errors").
enum class OpenError {
  kNone,
  kNameTaken,
  kBadGeometry,
  kBadSlots,
  kTooMany,          // max_streams open in the process
  kTooManyForOwner,  // max_streams_per_owner open by this owner
  kNoMemory,         // over max_pool_bytes_total, or the memory could not be had
  kOwnerNoMemory,    // over max_pool_bytes_per_owner with this owner's open streams
  kCount
};
const char* open_error_code(OpenError e);

class StreamRegistry {
 public:
  static constexpr size_t kRetainedClosedStreams = 32;

  explicit StreamRegistry(StreamLimits limits = {})
      : limits_(limits),
        pool_bytes_(std::make_shared<std::atomic<size_t>>(0)),
        events_(limits.frame_event_records) {}
  ~StreamRegistry();

  void add_publisher(std::unique_ptr<Publisher> publisher);
  // syncd is stopping: each publisher finishes or drops what it holds (Publisher::stop).
  void stop_publishers() {
    for (auto& p : publishers_) p->stop();
  }
  const std::vector<std::unique_ptr<Publisher>>& publishers() const { return publishers_; }
  // Whether any publisher verifies frames by their content hash (Publisher::verifies_content).
  bool verifies_content() const { return verifies_content_; }

  // How a closed stream's pool reference is dropped. Unmapping a pool of small pages takes
  // ~0.1 ms a MiB (a 1 GiB ring: ~100 ms), so syncd hands it to a pool thread; by default it is
  // dropped at once, on the caller's thread.
  void set_pool_release(std::function<void(FramePool*)> release) { release_ = std::move(release); }

  // Control plane: validates the configuration and allocates the stream's pool. With
  // Prefault::kDeferred the pool's pages are not faulted in yet: the caller runs
  // stream->pool()->prefault() off the loop before it tells the source the stream is ready.
  // Refusals are counted by code (write_stats: "open_refused").
  // `feedback` hears the consumers' requests (Stream::set_source_feedback), from the publishers'
  // on_stream_open on.
  Stream* open(const StreamConfig& config, uint64_t owner, OpenError& error,
               FramePool::Prefault prefault = FramePool::Prefault::kNow,
               SourceFeedback* feedback = nullptr);
  void close(Stream* stream);
  void close_owned_by(uint64_t owner);

  Stream* find(uint32_t id);  // open streams only
  Stream* find(const std::string& name);
  // Open or retained closed streams.
  Stream* find_any(uint32_t id);

  // Data plane: a source begins a frame. A lease with a slot for it, or an empty lease and the
  // reason (already counted on the stream when it is the stream's). Never allocates or throws.
  SlotLease begin(const IngestRequest& request, IngestRefusal& refusal);

  // Consumers of an encoded stream ask its source (SourceFeedback; docs/protocol.md, "Messages
  // from syncd to a stream's source"). A key frame: counted by reason, and passed on at once
  // unless one was passed less than kKeyframeIntervalNs ago; then it is passed at the stream's
  // first frame after the interval, and requests meanwhile merge into it (one IDR answers them
  // all; a PLI from every viewer would otherwise make IDR after IDR). A bandwidth target per
  // consumer
  // (`consumer`: a key of its own, e.g. its address; 0 bits/s withdraws it): the source hears
  // the lowest, when it first exists and when it moves by kBitrateStep or more. Unknown or
  // closed streams are ignored. Loop thread; control plane (no allocation).
  static constexpr uint64_t kKeyframeIntervalNs = 200'000'000;
  static constexpr double kBitrateStep = 0.05;
  void request_keyframe(uint32_t stream_id, KeyframeReason reason, uint64_t now_ns);
  void set_target_bitrate(uint32_t stream_id, uintptr_t consumer, uint64_t bits_per_second);
  // A decoder of the stream refused an access unit (not H.264, truncated, corrupt): counted,
  // and the source is told at most once per kUndecodableIntervalNs (a stream of garbage is one
  // message a second, not sixty).
  static constexpr uint64_t kUndecodableIntervalNs = 1'000'000'000;
  void report_undecodable(uint32_t stream_id, uint64_t sequence, const char* why, uint64_t now_ns);

  // Once a second or more: closes rate bins.
  void tick(uint64_t now_ns);

  // Open and retained closed streams, oldest first.
  std::vector<const Stream*> all_streams() const;
  void write_stats(nlohmann::json& out) const;
  void write_metrics(telemetry::PrometheusText& out) const;

  uint64_t total_dropped() const;
  const telemetry::FrameEventLog& frame_events() const { return events_; }
  // Pool memory mapped now, including pools of closed streams that consumers still hold.
  size_t pool_bytes() const { return pool_bytes_->load(std::memory_order_relaxed); }
  const StreamLimits& limits() const { return limits_; }

 private:
  friend class SlotLease;
  // The first reason to refuse a stream.open, in the documented precedence, or kNone.
  OpenError check_open(const StreamConfig& config, uint64_t owner) const;
  bool commit(FrameSlot* slot, uint64_t now_ns);
  void abort(FrameSlot* slot, DropReason reason);
  void pass_keyframe_request(Stream& stream, KeyframeReason reason, uint64_t now_ns);

  StreamLimits limits_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  std::map<uint32_t, std::unique_ptr<Stream>> open_;
  std::deque<std::unique_ptr<Stream>> closed_;
  uint32_t next_id_ = 1;
  // Charged by every pool until it is unmapped; a worker may drop a pool's last reference.
  std::shared_ptr<std::atomic<size_t>> pool_bytes_;
  std::array<uint64_t, size_t(OpenError::kCount)> open_refused_{};
  std::function<void(FramePool*)> release_;
  bool verifies_content_ = false;
  telemetry::FrameEventLog events_;
};

}  // namespace syncd::media
