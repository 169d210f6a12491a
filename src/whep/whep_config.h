// WHEP playback's and the WHIP push's settings, plain data (whep_service.h, whep_transport.h),
// what the command line fills.
//
// Any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "egress/encode_settings.h"
#include "secure/dtls_config.h"

namespace syncd::audio {
class AudioTap;  // audio/audio_tap.h: open_audio_tap hands one out
}

namespace syncd::whep {

struct WhepTransportConfig {
  // RFC 7675: consent lapses 30 s after the last successful check (browsers check every ~5 s).
  uint64_t consent_timeout_ns = 30'000'000'000ull;
  // A session whose browser never sends a check within this long after the answer ends.
  uint64_t ice_timeout_ns = 20'000'000'000ull;
  // A session whose stream closed ends if it has not opened again within this long: a viewer
  // kept its slot (one of WhepService::kMaxSessions) for as long as its browser kept consent.
  uint64_t stream_gone_ns = 10'000'000'000ull;
  // Keyframe requests to the encoder, at most one per this (a PLI each from several viewers,
  // or a viewer's repeats, make one IDR).
  uint64_t keyframe_interval_ns = 300'000'000ull;
  secure::DtlsConfig dtls;
  // The encoder's rate (--whep-bitrate / --whip-bitrate): where every viewer's loss-based
  // estimate starts, and the most it climbs back to.
  uint64_t max_bps = 2'000'000;
};

// WHIP push (docs/whep.md, "WHIP"): syncd offers one stream to an SFU's WHIP endpoint (RFC
// 9725), keeps the session up, and offers again after it ends.
struct WhipTarget {
  std::string url;                // http:// or https:// WHIP endpoint (--whip-to)
  std::string token;              // the bearer token, may be empty (--whip-token)
  std::string stream;             // empty: the first stream opened (--whip-stream)
  egress::EncodeSettings encode;  // --whip-bitrate
  bool verify_tls = true;         // --whip-insecure turns certificate checks off (tests, labs)
};

struct WhepConfig {
  // The address the egresses' UDP sockets bind to, and the host candidate the answer offers:
  // syncd's --host. A wildcard binds all and offers 127.0.0.1.
  std::string host = "127.0.0.1";
  egress::EncodeSettings encode;  // --whep-bitrate (the start and the most)
  WhepTransportConfig transport;
  std::string audio_channels;  // --whep-audio-channels as given (parse_whep_audio_channels)
  // A tap of the audio to send, asked once per egress; empty or returning nullptr: no audio.
  std::function<std::shared_ptr<audio::AudioTap>()> open_audio_tap;
  std::optional<WhipTarget> whip;
};

}  // namespace syncd::whep
