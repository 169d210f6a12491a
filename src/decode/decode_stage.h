// The decode stage: H.264 access units in, raw I420 frames out in a local stream, decoded on a
// worker. Two sources use it: the WAN relay's receiver (docs/wan.md, "Decoding at the receiver"),
// for a relayed stream the sender's relay encoded from raw frames, and the decoded twin of an
// encoded stream that a page or a native producer publishes (decode/decode_publisher.h), so
// consumers that want pixels (shared-memory readers, a camera, the test publisher's column-marker
// check, raw HTTP receivers) get them from one decode.
//
// Per access unit, on the main loop: a lease is begun in the local I420 stream, and {the access
// unit, the lease's planes} go to the stage's worker (core::WorkerHandoff, config.depth jobs),
// whose H264Decoder writes the picture straight into the lease. Back on the loop the lease is
// committed (a picture) or aborted as media::DropReason::kUndecodable, the stage's reason counted.
// The access unit's bytes are the source's buffer (a relay buffer, or a pinned slot of the encoded
// stream), lent for the job and given back (buffer_done) when the worker is done: no second copy,
// as the decoder copies the access unit once already into its padded input. In steady state one
// buffer is held for the decode time (the `held` figure).
//
// Loss: an access unit the source lost (AccessUnitIn::loss_before: the relay's jitter buffer gave
// one up, the sender restarted, or the stage dropped one) or a decode error makes the decoder wait
// for an IDR. While it waits, every frame is dropped as awaiting_keyframe and a keyframe is asked
// for (keyframe_wanted: a PLI to the relay's sender, a stream.keyframe message to a page), at most
// once per keyframe_request_interval_ns (200 ms): the encoder's IDR needs one round trip plus up
// to 100 ms of VBV to arrive (docs/codec.md), so a request per dropped frame (60 a second) would
// only make the encoder emit IDR after IDR, each several times a P-frame's size.
//
// Another size: after an adaptive-bitrate step (or a source that changes its SPS mid-stream) the
// pictures come at another size while the local stream keeps its described size (a camera
// consumer cannot change size mid-stream). The worker then decodes into a scratch picture
// (allocated once per size change) and scales it into the lease with libyuv's I420Scale
// (bilinear).
//
// Accounting: frames_in == decoded + dropped (by reason) + in_flight, at any moment on the loop.
//
// Thread: the main loop thread for every public member; the decoder and scratch picture live on
// the stage's worker. One instance per decoded stream.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/worker_handoff.h"
#include "media/stream_registry.h"
#include "telemetry/prometheus.h"
#include "telemetry/stage_stats.h"
#include "video_codec/h264_decoder.h"

namespace syncd::decode {

// What the stage tells its owner (the RelaySource, or a test). Both run on the loop thread.
struct DecodeStageHooks {
  // The access unit in the source's buffer `buffer` is no longer read: give it back.
  void (*buffer_done)(uint32_t buffer, void* context) = nullptr;
  // The decoder waits for an IDR: ask the sender for one (kKeyframeRequest). Throttled here.
  void (*keyframe_wanted)(void* context) = nullptr;
  void* context = nullptr;
  // The decoder refused the access unit of `sequence` (decode_error or refused; not one it only
  // waited past for an IDR). `why` is a short sentence with static storage. Optional.
  void (*undecodable)(uint64_t sequence, const char* why, void* context) = nullptr;
};

struct DecodeStageConfig {
  // Frames with the worker at most (1 to DecodeStage::kMaxDepth), each holding a slot of the
  // local stream. A decoded twin copies into buffers of its own and takes 8 (133 ms of 60 fps).
  size_t depth = 4;
  // Access units waiting on the loop for a place with the worker (0 to DecodeStage::kMaxQueue),
  // in order, holding only their source's buffer: what a burst may bring beyond `depth` before
  // frames are dropped as worker_busy. The relay's receiver queues what its jitter buffer can
  // release at once after a repair (docs/wan.md "Decoding at the receiver").
  size_t queue = 0;
  // The least time between two keyframe requests (see above).
  uint64_t keyframe_request_interval_ns = 200'000'000;
  video_codec::DecoderConfig decoder;
};

// One access unit handed to the stage (from the relay thread, or an encoded stream's slot).
struct AccessUnitIn {
  const uint8_t* data = nullptr;  // valid until buffer_done(buffer)
  size_t bytes = 0;
  uint32_t buffer = 0;
  uint64_t sequence = 0;
  uint64_t capture_time_us = 0;
  uint32_t flags = 0;        // the sender's frame flags; kHasContentHash is cleared here
  uint64_t start_ns = 0;     // when the source completed the frame
  bool loss_before = false;  // the source lost an access unit before this one
};

// Why a frame was not decoded into the local stream.
enum class DecodeDrop : uint8_t {
  kAwaitingKeyframe,  // the decoder waits for an IDR after a loss or at the start
  kDecodeError,       // libavcodec refused the bitstream, or the picture came out corrupt
  kRefused,           // empty, too large, not Annex B, not 8-bit 4:2:0, no picture
  kPoolFull,          // the local stream had no free slot (the registry counts it too)
  kWorkerBusy,        // config.depth frames with the worker and config.queue waiting
  kCommitRefused,     // decoded, but the registry refused the commit (its stream closed)
  kStopped,           // the stage is not running (no stream, or stopped)
  kCount,
};
const char* decode_drop_name(DecodeDrop drop);

struct DecodeStageCounters {
  uint64_t frames_in = 0;
  uint64_t decoded = 0;  // committed into the local stream
  std::array<uint64_t, size_t(DecodeDrop::kCount)> dropped{};
  uint64_t in_flight = 0;   // with the worker now
  uint64_t queued = 0;      // waiting for the worker now
  uint64_t queued_max = 0;  // the most ever waiting
  uint64_t gaps = 0;        // losses the source signalled (each makes the decoder wait for an IDR)
  uint64_t keyframes = 0;   // IDRs decoded
  uint64_t keyframe_requests = 0;
  uint64_t keyframe_requests_throttled = 0;  // wanted, but within the interval of the last
  uint64_t scaled = 0;                       // pictures of another size scaled into the lease
  uint64_t scratch_allocations = 0;          // size changes that (re)allocated the scratch
  uint32_t picture_width = 0;                // the last decoded picture's size
  uint32_t picture_height = 0;
  telemetry::StageStats decode;  // the worker's decode (and scale) of one access unit
  telemetry::StageStats held;    // submit on the loop -> result back on the loop
  uint64_t dropped_total() const {
    uint64_t t = 0;
    for (uint64_t d : dropped) t += d;
    return t;
  }
};

class DecodeStage {
 public:
  // Jobs with the worker at most (DecodeStageConfig::depth, up to kMaxDepth), and access units
  // waiting for it (DecodeStageConfig::queue, up to kMaxQueue).
  static constexpr size_t kMaxDepth = 8;
  static constexpr size_t kMaxQueue = 32;

  DecodeStage(media::StreamRegistry& registry, DecodeStageHooks hooks,
              DecodeStageConfig config = {});
  ~DecodeStage();
  DecodeStage(const DecodeStage&) = delete;
  DecodeStage& operator=(const DecodeStage&) = delete;

  // Starts the worker (once per stage). False with a sentence in error.
  bool start(uv_loop_t* loop, std::string& error);
  // Decodes into `stream` from now on (an open I420 stream of `owner`; frames are written at the
  // stream's size): the decoder is reopened and waits for an IDR. False (with error) when the
  // stream is not I420 or the decoder cannot open. Finishes the previous stream first.
  bool open(const media::Stream& stream, uint64_t owner, std::string& error);
  // Takes one access unit: to the worker, or to the queue while the worker has config.depth. Its
  // buffer always comes back through buffer_done: at once when the frame is dropped here, else
  // when the worker is done with it. Never blocks.
  void submit(const AccessUnitIn& au, uint64_t now_ns);
  // Drops the queued access units (stopped), finishes the frames the worker holds (waits for at
  // most config.depth decodes, then commits or aborts each and gives its buffer back) and
  // forgets the stream. Call before the stream closes. Idempotent.
  void close_stream();
  // close_stream(), then joins the worker. Idempotent; the stage cannot start again.
  void stop();
  bool has_stream() const { return stream_id_ != 0; }

  const DecodeStageCounters& counters() const { return counters_; }
  void write_stats(nlohmann::json& out) const;
  // Families <family>_frames_total, _keyframe_requests_total, _scaled_total, _seconds (e.g.
  // family "syncd_relay_decoder"), each declared once with a sample set per stage; `labels`
  // e.g. stream="cam".
  struct Labelled {
    std::string labels;
    const DecodeStage* stage;
  };
  static void write_metrics(telemetry::PrometheusText& out, const std::string& family,
                            const std::vector<Labelled>& stages);

 private:
  struct Job {
    uint32_t index;  // into leases_ and buffers_
    uint32_t width;  // the stream's size
    uint32_t height;
    const uint8_t* data;
    size_t bytes;
    video_codec::OutputPicture out;  // the lease's planes
    bool loss_before;                // a gap precedes this frame: note_loss() first
    uint64_t submitted_ns;
    uint64_t decode_ns;                // worker
    video_codec::DecodeResult result;  // worker
    bool scaled;                       // worker
    bool scratch_allocated;            // worker
  };
  static void decode_on_worker(Job& job, void* self);
  static void result_on_loop(Job& job, void* self);
  void decode(Job& job);    // worker
  void finish(Job& job);    // loop
  void complete(Job& job);  // loop: the job's outcome
  // Hands queued access units to the worker while it has room (loop).
  void dispatch();
  // One access unit to the worker now, at job index `index` (loop); false when it was dropped
  // (the local stream had no slot).
  bool hand_over(const AccessUnitIn& au, bool loss_before, uint64_t submitted_ns, size_t index);
  // Jobs with the worker at most, and a free job index (depth() when it has that many).
  size_t depth() const;
  size_t free_index() const;
  void drop(DecodeDrop reason, uint32_t buffer);
  void want_keyframe(uint64_t now_ns);
  void tell_undecodable(uint64_t sequence, video_codec::DecodeStatus status);

  media::StreamRegistry& registry_;
  DecodeStageHooks hooks_;
  DecodeStageConfig config_;
  uint32_t stream_id_ = 0;
  uint64_t owner_ = 0;
  uint32_t width_ = 0;
  uint32_t height_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  uint64_t last_now_ns_ = 0;
  // A frame never reached the decoder: the next one in order must note_loss() first.
  bool pending_loss_ = false;
  bool closing_ = false;  // close_stream() is flushing: nothing more goes to the worker
  struct Queued {
    AccessUnitIn au;
    bool loss_before;
    uint64_t submitted_ns;
  };
  std::array<Queued, kMaxQueue> queue_{};
  size_t queue_head_ = 0;
  size_t queue_size_ = 0;
  // Loop thread.
  std::array<media::SlotLease, kMaxDepth> leases_;
  std::array<uint32_t, kMaxDepth> buffers_{};
  std::array<bool, kMaxDepth> busy_{};
  bool awaiting_keyframe_ = true;
  bool requested_ = false;
  uint64_t last_request_ns_ = 0;
  DecodeStageCounters counters_;
  // Worker thread (after start()).
  video_codec::H264Decoder decoder_;
  std::vector<uint8_t> scratch_;  // a picture of decode_width_ x decode_height_ when scaling
  uint32_t decode_width_ = 0;     // the size the decoder now makes (set by open(), idle)
  uint32_t decode_height_ = 0;
  std::unique_ptr<core::WorkerHandoff<Job, kMaxDepth>> worker_;
};

}  // namespace syncd::decode
