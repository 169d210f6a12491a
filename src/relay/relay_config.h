// The WAN relay's settings, plain data (relay.h), what the command line fills.
//
// Any thread.
#pragma once

#include <cstdint>
#include <string>

#include "egress/encode_settings.h"
#include "secure/fingerprint.h"

namespace syncd::audio {
class CaptureRing;  // audio/capture_ring.h: set by the server
}

namespace syncd::relay {

struct RelayConfig {
  // --relay-to HOST:PORT: send; else --relay-listen [HOST:]PORT: receive.
  bool sender = false;
  std::string host;  // the peer (sender) or the address to listen on (receiver)
  uint16_t port = 0;
  secure::Fingerprint peer_fingerprint;  // --peer-fingerprint
  std::string identity_path;             // --relay-cert: this syncd's key and certificate
  uint64_t rekey_interval_s = 300;       // --dtls-rekey-interval
  std::string stream;                    // --relay-stream: the stream to send (empty: the first)
  egress::EncodeSettings encode;         // --relay-bitrate, --relay-keyframe-interval
  // Audio (docs/wan.md, "Audio"). Sender: --relay-audio-channels ("all", "none", "0-7,16"), of
  // the --audio-source capture; --relay-audio-bitrate per channel. Receiver (--audio-source
  // relay:N): --relay-audio-target-ms, the playout buffer's target.
  std::string audio_channels = "all";
  uint32_t audio_bitrate = 32000;
  uint32_t audio_target_ms = 60;
  // Set by the server, not the command line: the sender's capture ring (lent: the relay thread
  // reads it) or the receiver's relay-written ring; null without audio.
  audio::CaptureRing* audio_ring = nullptr;
};

}  // namespace syncd::relay
