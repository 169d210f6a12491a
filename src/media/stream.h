// A video stream: its configuration, its frame pool and its exact ingest accounting.
//
// Accounting identity, checked by tests: offered == accepted + sum(dropped[reason]).
// Thread: the loop thread only.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "media/frame_header.h"
#include "media/frame_pool.h"
#include "media/pixel_format.h"
#include "telemetry/rate_bins.h"
#include "telemetry/stage_stats.h"

namespace syncd::media {

// Why a frame offered on a stream was not accepted.
enum class DropReason : uint8_t {
  kPoolFull,          // every slot held by publishers: the newest frame is refused
  kSizeMismatch,      // payload length differs from the stream's frame size
  kGeometryMismatch,  // header width/height/format differ from the stream's
  kDisconnected,      // producer went away mid-frame, or its stream closed under the frame
  kUndecodable,       // the relay's decoder made no picture of the access unit (a loss upstream,
                      // waiting for an IDR, a bitstream error): the receiver counts why
  kCount,
};
const char* drop_reason_name(DropReason r);

struct StreamConfig {
  std::string name;
  uint32_t width = 0;
  uint32_t height = 0;
  PixelFormat format = PixelFormat::kRgba8;
  double fps = 60.0;  // nominal: informative, and the low-rate threshold's base
  uint32_t slots = 4;
};

struct StreamCounters {
  uint64_t offered = 0;
  uint64_t accepted = 0;
  uint64_t unique = 0;  // accepted frames whose sequence is higher than any before
  std::array<uint64_t, size_t(DropReason::kCount)> dropped{};
  uint64_t dropped_total() const {
    uint64_t t = 0;
    for (uint64_t d : dropped) t += d;
    return t;
  }
};

// Per-stage timing of the frames a source commits (see docs/protocol.md, "Telemetry"). The
// stages are the source's, whatever its transport: a WebSocket producer's decode time is its
// unmasking, a decoder's would be decoding.
struct StreamStages {
  telemetry::StageStats ingest_gap;  // start to start of consecutive accepted frames
  telemetry::StageStats receive;     // a frame's start to its commit
  telemetry::StageStats decode;      // the source's own work on the frame's bytes (unmasking)
  telemetry::StageStats hash;        // ingest hashing the frame's pixels as they land
  telemetry::StageStats publish;     // fan-out to every publisher
};

// Owners that are syncd's own sources, not connections (connection ids start at 1 and never
// reach the top half): the built-in pattern (0), the decoded twins of encoded streams
// (kSyncdOwnerBase + the encoded stream's id) and the relay's received streams (UINT64_MAX).
inline constexpr uint64_t kSyncdOwnerBase = uint64_t(1) << 63;
constexpr bool owned_by_syncd(uint64_t owner) {
  return owner == 0 || owner >= kSyncdOwnerBase;
}

class Stream;

// Why a consumer of an encoded stream asked its source for a key frame.
enum class KeyframeReason : uint8_t {
  kDecoder,   // syncd's decoder (a decoded twin, or the relay's receiver) waits for an IDR
  kRelay,     // the WAN relay's peer sent a PLI
  kWhep,      // a WebRTC viewer (WHEP, or the SFU of a WHIP push) sent a PLI
  kConsumer,  // a consumer joined and needs a picture to start from
  kCount,
};
const char* keyframe_reason_name(KeyframeReason reason);

// What consumers of an encoded stream ask of its source (docs/protocol.md, "Messages from syncd
// to a stream's source"): a key frame now, or a bitrate that the network carries. The source
// that opened the stream sets it (StreamControl for a connection's stream); a stream without one
// is asked nothing, and the requests are still counted on the stream.
// Thread: the loop thread.
class SourceFeedback {
 public:
  virtual void keyframe_wanted(const Stream& stream, KeyframeReason reason) = 0;
  virtual void target_bitrate(const Stream& stream, uint64_t bits_per_second) = 0;
  // syncd's decoder refused the access unit of `sequence` (`why`: a short sentence). Sources
  // that cannot act on it (a relay's receiver) ignore it.
  virtual void undecodable(const Stream& stream, uint64_t sequence, const char* why) {
    (void)stream;
    (void)sequence;
    (void)why;
  }

 protected:
  ~SourceFeedback() = default;
};

// What consumers asked of a stream's source (StreamRegistry::request_keyframe and
// set_target_bitrate), for /stats.
struct SourceRequests {
  // One consumer's bandwidth target; consumer 0 is a free entry.
  struct Target {
    uintptr_t consumer = 0;
    uint64_t bits_per_second = 0;
  };
  static constexpr size_t kMaxTargets = 8;
  std::array<uint64_t, size_t(KeyframeReason::kCount)> keyframes{};  // asked, by reason
  uint64_t keyframes_passed = 0;                                     // passed to the source
  uint64_t keyframe_passed_ns = 0;                                   // when the last was passed
  // A request inside the interval after the last: passed when the interval is over (at the
  // stream's next frame), since the IDR that answered the last may have gone before its
  // consumer joined.
  bool keyframe_pending = false;
  KeyframeReason pending_reason = KeyframeReason::kConsumer;
  std::array<Target, kMaxTargets> targets{};
  uint64_t bitrate_sent = 0;  // the last target passed to the source (0: none yet)
  uint64_t bitrate_changes = 0;
  uint64_t targets_refused = 0;   // a ninth consumer's target (not counted in the lowest)
  uint64_t undecodable = 0;       // access units syncd's decoder refused
  uint64_t undecodable_told = 0;  // of which the source was told (at most one a second)
  uint64_t undecodable_told_ns = 0;
};

// What a stream's source says about its frames before they reached syncd (a page's canvas
// publisher: frames it captured, sent, dropped by its own reasons), as it last reported them
// (docs/protocol.md, "stream.report"). Cumulative counters; syncd only shows them, so the
// dashboard's numbers agree with the page's own.
struct SourceReport {
  static constexpr size_t kMaxReasons = 8;
  uint64_t offered = 0;
  uint64_t sent = 0;
  uint64_t in_flight = 0;
  std::vector<std::pair<std::string, uint64_t>> dropped;  // reason -> frames, <= kMaxReasons
  uint64_t received_ns = 0;                               // CLOCK_MONOTONIC; 0: never reported
};

// A second of this stream is low-rate below 5/6 of its nominal rate, rounded up: 50 at 60 fps
// (the seed's bar), 25 at 30 fps, so a healthy 30-fps stream is not all low-rate seconds.
uint32_t low_rate_threshold_for(double fps);

class Stream {
 public:
  Stream(uint32_t id, StreamConfig config, const FrameLayout& layout, uint64_t owner,
         FramePool* pool);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  uint32_t id() const { return id_; }
  const StreamConfig& config() const { return config_; }
  uint64_t owner() const { return owner_; }
  size_t frame_bytes() const { return layout_.bytes; }
  const FrameLayout& layout() const { return layout_; }
  // nullptr once the stream is closed (its pool released).
  FramePool* pool() const { return pool_; }
  bool open() const { return pool_ != nullptr; }

  void tick(uint64_t now_ns) { rate_.advance(now_ns / 1'000'000); }
  // Drops the pool reference; counters stay readable.
  void close();
  // Closes the stream and hands its pool reference to the caller (nullptr if already closed).
  FramePool* take_pool() {
    FramePool* p = pool_;
    pool_ = nullptr;
    return p;
  }

  const StreamCounters& counters() const { return counters_; }
  const telemetry::RateBins& rate() const { return rate_; }
  StreamStages& stages() { return stages_; }
  const StreamStages& stages() const { return stages_; }
  // Loop thread. Control plane: the report is copied (a few short strings, once a second).
  void set_source_report(SourceReport report) { source_report_ = std::move(report); }
  const SourceReport& source_report() const { return source_report_; }
  // Loop thread. Who hears consumers' requests (nullptr: nobody); set by the stream's opener.
  void set_source_feedback(SourceFeedback* feedback) { feedback_ = feedback; }
  SourceFeedback* source_feedback() const { return feedback_; }
  SourceRequests& source_requests() { return source_requests_; }
  const SourceRequests& source_requests() const { return source_requests_; }
  uint64_t last_accept_start_ns = 0;  // receive start of the previous accepted frame
  uint64_t last_publish_ns = 0;       // when the publishers last handed back a frame

 private:
  // The ingest API (StreamRegistry::begin, SlotLease) is the only place frames are counted.
  friend class StreamRegistry;
  void count_offered() { ++counters_.offered; }
  void count_dropped(DropReason r) { ++counters_.dropped[size_t(r)]; }
  // A frame was admitted; updates unique-frame bins. Returns true when it was unique.
  bool count_accepted(uint64_t sequence, uint64_t now_ns);

  uint32_t id_;
  StreamConfig config_;
  uint64_t owner_;
  FrameLayout layout_;
  FramePool* pool_;
  StreamCounters counters_;
  bool any_accepted_ = false;
  uint64_t highest_sequence_ = 0;
  telemetry::RateBins rate_;
  StreamStages stages_;
  SourceReport source_report_;
  SourceFeedback* feedback_ = nullptr;
  SourceRequests source_requests_;
};

}  // namespace syncd::media
