// The sending end of the WAN relay on syncd's main loop (docs/wan.md): relays one stream to the
// peer syncd through the relay thread.
//
// It relays the first stream opened, or the one named with --relay-stream; when that stream
// closes, the next one opened takes its place. An encoded stream (h264) goes as it is: the loop
// only pins the frame's slot and hands it to the relay thread; the slot comes back (kFrameDone)
// once the relay has packetized it, and is unpinned here. A raw stream (rgba8, bgra8, nv12,
// i420) goes through the encoder stage first (encode_stage.h: H.264 on a worker thread), and
// its access units then go to the relay thread the same way. The loop never waits: a frame that
// cannot be handed over now is dropped and counted by reason.
//
// Accounting, per stream relayed: offered == sent + in_flight + sum(dropped[reason]).
//
// Thread: the main loop thread (see media::Publisher), including on_frame_done().
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "egress/encode_stage.h"
#include "media/publisher.h"
#include "media/stream_registry.h"
#include "transport/transport_thread.h"

namespace syncd::egress {

enum class EgressDrop : uint8_t {
  kConsumerSlow,  // kMaxInFlight frames were already with the relay thread
  kPinRefused,    // the stream's pool had no slot left to pin
  kQueueFull,     // the channel to the relay thread was full
  kNotSent,       // the relay thread did not send it (no peer yet, paced out, stopping)
  kEncodeFailed,  // the encoder refused the frame or could not open (raw streams)
  // A stream relayed as it comes (H.264) lost an access unit here: the next ones would decode
  // against a picture the peer never had, so they wait for the source's next IDR.
  kAwaitingKeyframe,
  kCount,
};
const char* egress_drop_name(EgressDrop reason);

struct EgressPublisherCounters {
  uint64_t offered = 0;
  uint64_t sent = 0;
  uint64_t in_flight = 0;
  std::array<uint64_t, size_t(EgressDrop::kCount)> dropped{};
  // A raw stream's encoder, as it was when the stream closed (the live one is the stage's).
  std::optional<EncodeStageCounters> encoder;
  uint64_t dropped_total() const {
    uint64_t t = 0;
    for (uint64_t d : dropped) t += d;
    return t;
  }
};

class EgressPublisher final : public media::Publisher {
 public:
  // stream_name: the stream to relay; empty: the first stream opened. loop: where the encoder
  // stage's results come back (raw streams); without one, only encoded streams are relayed.
  // name: how /stats and /metrics call it ("relay"; a WHEP egress's is "whep").
  EgressPublisher(transport::TransportThread& thread, std::string stream_name,
                  uv_loop_t* loop = nullptr, EncodeSettings encode = {},
                  std::string name = "relay");
  ~EgressPublisher() override;

  std::string_view name() const override { return name_; }
  void on_stream_open(const media::Stream& stream) override;
  void on_stream_close(const media::Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void stop() override;
  void on_frame(const media::Stream& stream, media::FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const media::Stream*>& streams) const override;

  // A frame came back from the relay thread (transport::FromTransport::kFrameDone).
  void on_frame_done(const transport::FromTransport& message);
  // The receiver asked for an IDR (a PLI; transport::FromTransport::kKeyframeRequest): the encoder
  // stage makes one. A producer's own H.264 (a page's WebCodecs stream) is relayed as it comes: the
  // request goes to its source (forward_to_source), whose encoder makes the IDR.
  void on_keyframe_request();
  uint64_t keyframe_requests() const { return keyframe_requests_; }
  // The relay's bandwidth estimate: the encoder of a raw stream follows it (adaptive bitrate);
  // a relayed H.264 stream's source hears it as this consumer's target (forward_to_source), and
  // before the first estimate the start rate (EncodeSettings::bitrate_kbps). media_bps: what an
  // encoder may spend of it, as the sender measured (transport::FromTransport::media_bps; 0:
  // unknown).
  void on_target_rate(uint64_t bits_per_second, uint64_t media_bps = 0);
  // Where a relayed H.264 stream's keyframe requests and bandwidth target go: its source, through
  // the registry (docs/protocol.md, "Messages from syncd to a stream's source"), as `reason`.
  // Without it they are counted only.
  void forward_to_source(media::StreamRegistry* registry, media::KeyframeReason reason) {
    registry_ = registry;
    feedback_reason_ = reason;
  }
  // While inactive, frames are not taken at all (not offered, not encoded): a WHEP egress with
  // no viewer costs its stream nothing, and withdraws its bandwidth target from the source.
  // Active from construction.
  void set_active(bool active);
  bool active() const { return active_; }
  // Relays `stream_name` from now on instead of the stream it had: that one's close goes to the
  // relay thread (as on_stream_close), and `open` (the new stream, if it is open) is taken as if
  // just opened. A WHEP egress whose viewers have all left is reused for another stream so.
  void retarget(std::string stream_name, const media::Stream* open);
  // The encoder stage of the relayed raw stream, or nullptr.
  const EncodeStage* encoder() const { return encoder_.get(); }
  // The encoder counters of a stream: the live stage's, or those kept when it closed.
  const EncodeStageCounters* encoder_counters(uint32_t stream_id) const;

  const EgressPublisherCounters* counters(uint32_t stream_id) const;
  uint32_t relayed_stream() const { return relayed_stream_id_; }
  // Frames with the relay thread at most: a handful covers the relay's packetizing time, and
  // keeps the pool's other slots for ingest and the other publishers.
  static constexpr uint64_t kMaxInFlight = 4;

 private:
  static void on_encoded(const EncodedFrame& frame, void* self);
  // Hands an access unit (a producer's pinned slot, or the encoder's) to the relay thread.
  void send(media::FrameSlot& slot, EgressPublisherCounters& c);
  void stop_encoder();
  // The relayed stream ends here: its encoder retires and the relay thread hears the close.
  void close_relayed();
  // Stops the stage, keeps its final counters with its stream's, and destroys it once the
  // relay has given back its access units.
  void retire_encoder();
  // Gives an access unit back to the encoder stage it came from; false for a pool's slot.
  bool release_access_unit(media::FrameSlot* slot);
  // Tells a relayed H.264 stream's source this consumer's target (forward_to_source).
  void forward_target();
  // Counts a drop; one of a stream relayed as it comes breaks its chain of references.
  void count_drop(EgressPublisherCounters& c, EgressDrop reason);

  transport::TransportThread& thread_;
  std::string stream_name_;
  std::string name_;
  uv_loop_t* loop_;
  EncodeSettings encode_settings_;
  uint32_t relayed_stream_id_ = 0;
  std::unique_ptr<EncodeStage> encoder_;
  std::vector<std::unique_ptr<EncodeStage>> retired_encoders_;  // the relay holds some of theirs
  uint64_t keyframe_requests_ = 0;
  bool active_ = true;
  media::StreamRegistry* registry_ = nullptr;  // forward_to_source
  media::KeyframeReason feedback_reason_ = media::KeyframeReason::kRelay;
  uint64_t target_bps_ = 0;    // the last estimate, or the start rate
  uint64_t media_bps_ = 0;     // what an encoder may spend of it (0: unknown)
  bool awaiting_idr_ = false;  // a relayed H.264 stream lost an access unit here
  std::unordered_map<uint32_t, EgressPublisherCounters> streams_;
};

}  // namespace syncd::egress
