// Decoded twins: an encoded stream (format h264: a page publishing with WebCodecs, a native
// producer's access units, a relayed page stream) is decoded once, on a worker, into a raw I420
// stream of its own, "<name>.decoded", which the consumers that want pixels take like any raw
// stream: the test publisher's column-marker check, the shared-memory ring, the system camera,
// raw HTTP receivers. Consumers that take H.264 (the relay, WHEP, WHIP, HTTP receivers of the
// stream itself) get the source's access units untouched. docs/web.md, "Encoded publishing".
//
// Per encoded stream, on the loop: the twin opens at the stream's first frame (so the fan-out of
// the stream's own open is over: a relay that relays the first stream it sees takes the encoded
// one), with the same size and nominal rate. The decoder runs only while something wants pixels
// (pixel publishers configured, or has_pixel_consumer(twin) says so, e.g. an HTTP receiver of
// the twin); when one appears the decoder restarts at the next IDR and asks the source for one
// (KeyframeReason::kConsumer). Each access unit is copied into one of the twin's own buffers
// and lent to the DecodeStage until the worker is done with it. Why a copy rather than a pin of
// the source's slot: the decoder may hold 8 frames after a burst, and pins are capped at
// the pool's slots - 1 (3 for a page's default 4), which the relay, WHEP and HTTP receivers
// share; an access unit is tens of KB (a 1080p60 page at 8 Mbit/s: 17 KB mean), a few
// microseconds of memcpy. The buffers grow to the largest access unit seen (at most the
// stream's frame_bytes), so steady state allocates nothing.
//
// Losses: a frame the registry dropped before it reached the publishers (pool_full,
// disconnected...), one the source lost (frame_flag::kDiscontinuity: the relay's receiver gave
// one up) or one dropped here breaks the decoder's chain of references; the next is
// submitted as loss_before, and the stage waits for an IDR and asks the source for one
// (KeyframeReason::kDecoder, at most every 200 ms). An access unit the decoder refuses (not
// H.264, truncated, corrupt) is reported to the registry, which tells a source that asked for
// feedback (an `undecodable` error, at most one a second). A twin that cannot open (its name
// taken, odd size, no memory) is reported in /stats with its reason, and the stream's frames are
// counted dropped as twin_unavailable.
//
// Accounting per encoded stream: offered == submitted + dropped (by reason); the stage's own:
// frames_in == decoded + dropped (by reason) + in_flight. The twin stream's registry counters
// show what was committed.
//
// Thread: the loop thread for every member (a media::Publisher); each stage's worker is its
// own.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "decode/decode_stage.h"
#include "media/publisher.h"
#include "media/stream_registry.h"

namespace syncd::decode {

// Why an encoded stream's frame did not reach its decoder.
enum class TwinDrop : uint8_t {
  kNoConsumer,       // nothing wants pixels now: the decoder is idle
  kTwinUnavailable,  // the twin stream could not open (see twin_error)
  kCount,
};
const char* twin_drop_name(TwinDrop drop);

struct DecodePublisherConfig {
  // A publisher that wants pixels runs (test, shm, camera): every encoded stream is decoded
  // while it is open.
  bool pixel_publishers = false;
  // The twin's pool: the stage's leases (stage.depth) plus frames pinned by the pixel consumers.
  uint32_t twin_slots = 12;
  DecodeStageConfig stage{.depth = DecodeStage::kMaxDepth};
};

struct TwinCounters {
  uint64_t offered = 0;    // frames of the encoded stream that reached this publisher
  uint64_t submitted = 0;  // handed to the decode stage
  std::array<uint64_t, size_t(TwinDrop::kCount)> dropped{};
  uint64_t losses = 0;  // frames lost before the decoder: by the registry, here, or upstream
  uint64_t consumer_starts = 0;  // the decoder started because something wanted pixels
  uint64_t buffer_growths = 0;   // a buffer grew for a larger access unit than any before
  uint64_t dropped_total() const {
    uint64_t t = 0;
    for (uint64_t d : dropped) t += d;
    return t;
  }
};

class DecodePublisher final : public media::Publisher {
 public:
  static constexpr std::string_view kTwinSuffix = ".decoded";

  // Whether something besides the pixel publishers wants the twin's frames now (an HTTP
  // receiver of it). Called per frame on the loop: must be cheap.
  using PixelDemand = std::function<bool(uint32_t twin_stream_id)>;

  DecodePublisher(uv_loop_t* loop, media::StreamRegistry& registry, DecodePublisherConfig config,
                  PixelDemand demand = {});
  ~DecodePublisher() override;

  std::string_view name() const override { return "decode"; }
  void stop() override;
  void on_stream_open(const media::Stream& stream) override;
  void on_stream_close(const media::Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const media::Stream& stream, media::FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const media::Stream*>& streams) const override;

  // The twin's id of an encoded stream (0: none open).
  uint32_t twin_of(uint32_t stream_id) const;
  const TwinCounters* counters(uint32_t stream_id) const;
  const DecodeStage* stage(uint32_t stream_id) const;

 private:
  // One encoded stream's decode: its twin, its stage and the slots lent to the stage.
  struct Twin {
    DecodePublisher* self = nullptr;
    uint32_t source_id = 0;
    std::string source_name;
    uint32_t twin_id = 0;
    bool open_tried = false;
    std::string twin_error;  // why the twin did not open
    bool decoding = false;   // the stage decodes into the twin now
    bool source_open = true;
    uint64_t registry_dropped = 0;  // the source stream's drops when its last frame came
    bool loss_pending = false;      // a frame never reached the decoder
    std::unique_ptr<DecodeStage> stage;
    // Access-unit copies lent to the stage, by buffer index: at most kMaxDepth in flight, and a
    // drop inside submit() gives its buffer back at once, so kMaxDepth + 1 always have a free
    // one.
    std::array<std::vector<uint8_t>, DecodeStage::kMaxDepth + 1> buffers;
    std::array<bool, DecodeStage::kMaxDepth + 1> lent{};
    TwinCounters counters;
  };

  void open_twin(Twin& t, const media::Stream& stream);
  bool wants_pixels(const Twin& t) const;
  void start_decoding(Twin& t);
  void stop_decoding(Twin& t);
  void drop(Twin& t, TwinDrop reason);
  static void buffer_done(uint32_t buffer, void* twin);
  static void keyframe_wanted(void* twin);
  static void undecodable(uint64_t sequence, const char* why, void* twin);

  uv_loop_t* loop_;
  media::StreamRegistry& registry_;
  DecodePublisherConfig config_;
  PixelDemand demand_;
  bool stopped_ = false;
  // By the encoded stream's id; kept after it closes (for /stats) until the registry forgets it.
  std::map<uint32_t, std::unique_ptr<Twin>> twins_;
};

}  // namespace syncd::decode
