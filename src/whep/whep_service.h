// WHEP egress (RFC 9725, docs/whep.md): a browser plays one of syncd's streams as a <video> with
// a plain RTCPeerConnection. `POST /whep/NAME` with an SDP offer (application/sdp) answers 201
// with syncd's SDP answer and a Location for the session; `DELETE` of that Location ends it.
//
// Per stream watched, an egress: a relay thread (transport/transport_thread.h) with its own UDP
// socket, whose handler is a WhepTransport (ICE-lite, DTLS-SRTP, RTP to every viewer), fed by a
// egress::EgressPublisher that hands it the stream's access units; a raw stream is encoded to H.264
// once for all its viewers (encode_stage.h), an h264 stream goes as the producer sent it. The
// publisher is active only while the stream has viewers: a stream nobody watches is not encoded.
// An egress, once made, stays until syncd stops (its thread sleeps), at most kMaxStreams of them;
// when a fifth stream is asked for, one whose viewers have all left is reused for it.
//
// Audio (docs/whep.md, "Audio"): with an audio source, each egress asks for a tap of two capture
// channels (WhepConfig::open_audio_tap) and encodes them once for its sessions; an offer with an
// Opus m-line bundled with its video gets stereo (or mono) Opus on it.
//
// The certificate is made in memory when the service starts (a browser takes the fingerprint the
// answer carries; nothing is pinned, so nothing needs to persist).
//
// Thread: the main loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "egress/egress_publisher.h"
#include "egress/encode_stage.h"
#include "media/stream_registry.h"
#include "secure/certificate.h"
#include "telemetry/prometheus.h"
#include "transport/transport_thread.h"
#include "whep/whep_config.h"
#include "whep/whep_transport.h"

namespace syncd::whep {

// --whep-audio-channels: which capture channels a browser hears.
struct WhepAudioChannels {
  bool enabled = false;
  uint32_t left = 0, right = 0;  // equal: mono
};
// "none"; "N" (mono: channel N on both sides); "L,R" (stereo). Empty text is the default: "0,1",
// or "0" when the source has one channel. False, with why, for bad syntax or an index at or past
// source_channels. Any thread.
bool parse_whep_audio_channels(std::string_view text, uint32_t source_channels,
                               WhepAudioChannels& out, std::string& why);

// Counted on the main loop (/stats whep, /metrics syncd_whep_*).
struct WhepServiceCounters {
  uint64_t offers = 0;
  uint64_t answered = 0;
  uint64_t refused_bad_sdp = 0;         // 400: the offer did not parse (reason in the body)
  uint64_t refused_no_h264 = 0;         // 400: no video m-line offers H.264 packetization mode 1
  uint64_t answered_with_audio = 0;     // of the answered, those that took syncd's audio
  uint64_t refused_content_type = 0;    // 415: not application/sdp
  uint64_t refused_unknown_stream = 0;  // 404
  uint64_t refused_format = 0;          // 409: a stream neither H.264 nor encodable
  uint64_t refused_busy = 0;            // 503: kMaxSessions or kMaxStreams reached
  uint64_t egresses_reused = 0;         // idle egresses moved to another stream
  uint64_t refused_failed = 0;          // 500: the egress could not start (socket, identity)
  uint64_t deleted = 0;
  uint64_t delete_unknown = 0;  // 404: no such session
};

class WhepService {
 public:
  WhepService(WhepConfig config, media::StreamRegistry& registry, uv_loop_t* loop);
  // Starts the WHIP push when one is configured (a timer that waits for the stream, posts the
  // offer, and posts again after a session ends). False, with why, for a URL that cannot work.
  bool start(std::string& why);
  ~WhepService();
  WhepService(const WhepService&) = delete;
  WhepService& operator=(const WhepService&) = delete;

  struct Response {
    int status = 500;
    std::string content_type = "text/plain";
    std::string body;
    std::string headers;  // extra header lines, each ending in CRLF
  };
  // POST /whep/NAME. The caller has checked Host, Origin and access (docs/security.md).
  Response offer(std::string_view stream_name, std::string_view content_type, std::string_view sdp);
  // DELETE /whep/NAME/SESSION.
  Response remove(std::string_view stream_name, std::string_view session);

  // Stops every egress (their threads joined, frames they held given back), and ends the WHIP
  // session with a DELETE (blocking, at most 2 s: syncd is stopping). Idempotent.
  void stop();
  void write_stats(nlohmann::json& out) const;
  void write_metrics(telemetry::PrometheusText& out) const;

  static constexpr size_t kMaxStreams = 4;
  // Viewers at once across all streams (each costs its own SRTP and sends on a 2-core machine).
  static constexpr size_t kMaxSessions = WhepTransport::kMaxSessions;

 private:
  struct Egress;
  struct WhipPush;
  struct SessionRecord {
    std::string stream;
    Egress* egress = nullptr;
    std::shared_ptr<WhepSessionStats> stats;
    bool audio = false;  // the answer took the offer's Opus m-line
    bool whip = false;   // our offer to an SFU, not a viewer's
  };
  // The egress under `key` (the stream's name for viewers, "whip:" + name for the push), made on
  // first use with its socket bound to bind_host; nullptr when kMaxStreams have one (busy =
  // true) or it could not start (why says so).
  Egress* egress_for(const std::string& key, const std::string& stream_name,
                     const std::string& bind_host, const egress::EncodeSettings& encode,
                     const char* label, bool& busy, std::string& why);
  // At kMaxStreams: a viewers' egress with no session, moved to `key` and `stream_name`; else
  // nullptr.
  Egress* reuse_idle_egress(const std::string& key, const std::string& stream_name);
  // Sends a new session to its egress's thread; false when the thread's queue is full.
  bool add_session(Egress& egress, std::unique_ptr<WhepSessionSetup> setup, bool whip);
  // WHIP (whip_push.cpp).
  static void on_whip_timer(uv_timer_t* timer);
  void whip_tick();
  void whip_post(Egress& egress);
  void whip_failed(const std::string& why, uint64_t now_ns);
  void whip_session_ended(uint64_t now_ns);
  void stop_whip();
  void write_whip_stats(nlohmann::json& out) const;
  static void on_message(transport::FromTransport& message, void* egress);
  void on_session_ended(Egress& egress, uint64_t id);
  void update_activity(Egress& egress);

  WhepConfig config_;
  media::StreamRegistry& registry_;
  uv_loop_t* loop_;
  secure::Identity identity_;
  bool identity_ready_ = false;
  std::map<std::string, std::unique_ptr<Egress>> egresses_;
  std::map<uint64_t, SessionRecord> sessions_;  // live ones, by id
  // What ended sessions sent and dropped, summed (their records go when they end).
  uint64_t ended_frames_sent_ = 0;
  uint64_t ended_frames_dropped_ = 0;
  uint64_t ended_audio_frames_sent_ = 0;
  uint64_t ended_audio_frames_dropped_ = 0;
  uint64_t next_id_ = 1;
  WhepServiceCounters counters_;
  std::unique_ptr<WhipPush> whip_;
  bool stopped_ = false;
};

}  // namespace syncd::whep
