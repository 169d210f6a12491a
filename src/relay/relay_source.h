// The receiving end of the WAN relay on syncd's main loop (docs/wan.md): opens a local stream
// as the peer describes it, and commits every complete access unit the relay thread hands over
// into that stream's pool, where the local publishers (shared-memory ring, test verifier, HTTP
// stream receivers) take it like any producer's frame.
//
// The access unit is copied from the relay's buffer into the slot (one memcpy of ~40 KB at
// 20 Mbit/s and 60 fps: far less than a microsecond's worth of the loop per frame at memory
// speed), then the buffer goes back to the relay thread. Every frame is accounted for by the
// registry (offered = accepted + dropped by reason), and frames with no stream to go to here.
//
// A stream the sender's relay encoded from raw frames (StreamDescription::source_format != 0)
// opens here as I420 under the same name, at the described size, and its access units go
// through a decode::DecodeStage (decode/decode_stage.h), which decodes them on its worker into the
// stream's leases and gives the buffers back when done.
//
// A stream relayed as it came (H.264 from the sender's producer, source_format == 0) opens
// here as h264; this source is its SourceFeedback, so a consumer that needs an IDR (the stream's
// decoded twin) gets a PLI sent to the sender, whose source makes one. A frame after an access
// unit the relay lost carries frame_flag::kDiscontinuity, so such a decoder waits for that IDR.
//
// Thread: the main loop thread.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "decode/decode_stage.h"
#include "media/stream_registry.h"
#include "relay/relay_wire.h"
#include "telemetry/stage_stats.h"
#include "transport/transport_thread.h"

namespace syncd::relay {

struct RelaySourceCounters {
  uint64_t descriptions = 0;  // stream descriptions taken (a change opens a new stream)
  uint64_t streams_opened = 0;
  uint64_t open_refused = 0;  // the registry refused the described stream (see open_error)
  uint64_t frames_in = 0;     // complete access units from the relay thread
  uint64_t frames_committed = 0;
  uint64_t frames_without_stream = 0;  // no stream open here (none described, or refused)
  uint64_t frames_refused = 0;         // the registry refused them (counted on the stream too)
  // The sender's sequence numbers started again within one local stream (a restarted sender or
  // a reconnected producer); the local numbers went on (local_sequence).
  uint64_t sequence_restarts = 0;
  std::string open_error;
  // Sender accept -> receiver complete, when both ends share a clock (docs/wan.md).
  telemetry::StageStats transport;
};

class RelaySource final : private media::SourceFeedback {
 public:
  // No connection has this owner id: the relay's stream cannot be fed or closed by a client.
  static constexpr uint64_t kOwner = std::numeric_limits<uint64_t>::max();
  static_assert(media::owned_by_syncd(kOwner));
  static constexpr uint32_t kSlots = 8;
  // The decode stage: frames with its worker (each holds one of the kSlots), and frames queued
  // for it in the relay's own buffers (RelaySessionConfig::frame_buffers): what the jitter
  // buffer releases at once after a repair is decoded in turn, not dropped.
  static constexpr size_t kDecodeDepth = 4;
  static constexpr size_t kDecodeQueue = decode::DecodeStage::kMaxQueue;

  // loop: where a decode stage's worker reports back; without one (nullptr) a stream that needs
  // decoding is refused (open_error "no_decoder").
  RelaySource(media::StreamRegistry& registry, transport::TransportThread& thread,
              uv_loop_t* loop = nullptr);
  ~RelaySource();

  void on_description(const StreamDescription& description);
  // Commits the access unit, then gives its buffer back to the relay thread.
  void on_frame_in(const transport::FromTransport& message, uint64_t now_ns);
  // The peer ended its stream or left: the local stream closes.
  void on_peer_ended();
  void close();
  // close(), and the decode stage's worker joined (syncd is stopping). Idempotent.
  void stop();

  const RelaySourceCounters& counters() const { return counters_; }
  const media::Stream* stream() const { return stream_; }
  // The decode stage, once a stream needed one (nullptr before).
  const decode::DecodeStage* decoder() const { return decoder_.get(); }
  void write_stats(nlohmann::json& out) const;

 private:
  media::StreamRegistry& registry_;
  transport::TransportThread& thread_;
  uv_loop_t* loop_ = nullptr;
  media::Stream* stream_ = nullptr;
  bool decoding_ = false;  // stream_ is fed by decoder_
  std::unique_ptr<decode::DecodeStage> decoder_;
  StreamDescription described_{};
  RelaySourceCounters counters_;

  // media::SourceFeedback of a stream relayed as it came: a PLI to the sender. Its rate is the
  // relay's own congestion control's.
  void keyframe_wanted(const media::Stream& stream, media::KeyframeReason reason) override;
  void target_bitrate(const media::Stream&, uint64_t) override {}
  static void free_buffer(uint32_t buffer, void* self);
  static void request_keyframe(void* self);
  bool open_decoder(std::string& error);
  // The local stream's sequence number for the sender's `remote`; restarted: the sender's
  // numbering started again here.
  uint64_t local_sequence(uint64_t remote, bool& restarted);
  bool sequenced_ = false;  // a frame of the local stream has been numbered
  uint64_t last_remote_ = 0, last_local_ = 0, sequence_offset_ = 0;
};

}  // namespace syncd::relay
