// syncd's configuration (the command line fills it) and the server's own counters.
// Plain data, and so are the headers it includes: each module's settings have a header of their
// own (relay_config.h, whep_config.h, ...), so that what includes this one (every connection's
// code) does not compile the relay's, WHEP's or OpenSSL's headers. The loop thread reads and
// bumps them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audio/audio_source_config.h"
#include "media/pattern_config.h"
#include "media/publishers/camera/camera_config.h"
#include "media/publishers/shm_config.h"
#include "media/stream_limits.h"
#include "relay/relay_config.h"
#include "server/socket_writer.h"
#include "whep/whep_config.h"

namespace syncd::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 54997;  // 0: pick a free port
  // Publishers by name, from the table in media/publisher_factory.h ("test", "shm",
  // "camera").
  std::vector<std::string> publishers = {"test"};
  media::ShmPublisherConfig shm;
  media::CameraConfig camera;  // --camera-*
  std::optional<media::PatternConfig> pattern;
  std::optional<audio::AudioSourceConfig> audio;  // --audio-source
  std::optional<relay::RelayConfig> relay;        // --relay-to / --relay-listen (docs/wan.md)
  // WHEP playback (docs/whep.md): on unless --no-whep; nothing runs before the first offer.
  std::optional<whep::WhepConfig> whep = whep::WhepConfig{};
  std::vector<std::string> allowed_origins;  // exact Origin values allowed besides loopback
  std::vector<std::string> allowed_hosts;    // Host names allowed besides loopback (--allow-host)
  // CORS headers for loopback origins too, not only --allow-origin values (--cors-loopback).
  bool cors_loopback = false;
  // Lowered at start to fit the descriptor limit (raised to its hard value), less a reserve.
  size_t max_connections = 1024;
  size_t max_header_bytes = 8192;
  size_t max_message_bytes = 64ull << 20;  // data messages (frames); 1009 above
  size_t max_text_bytes = 1ull << 20;      // control messages
  uint32_t handshake_timeout_ms = 10'000;  // HTTP request head must complete within this
  uint32_t silent_timeout_ms = 3'000;      // a connection that sends no byte at all: closed
  uint32_t idle_timeout_ms = 120'000;      // WebSocket: nothing received (pings are sent at half)
  size_t read_window_bytes = 256 * 1024;   // largest read straight into a frame slot
  size_t read_turn_bytes = 1024 * 1024;    // bytes one connection reads per loop turn
  size_t receive_low_water_bytes = 256 * 1024;  // SO_RCVLOWAT while a frame's payload arrives
  // Output limits of every connection's writer (docs/architecture.md, "Output limits").
  WriterLimits writer;
  size_t output_budget_bytes = 64ull << 20;  // copied output queued across all connections
  bool status_line = false;                  // live status line on stderr
  std::string headtracker;                   // "", "auto", "/dev/hidrawN" or "replay:FILE"
  uint32_t receiver_max_frames = 2;          // HTTP stream receivers: frames in flight at most
  media::StreamLimits stream_limits;
};

// Counters of the server itself (bad input and connections). Exact; loop thread only.
struct ServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections, none to evict
  uint64_t connections_evicted = 0;  // at max_connections: the oldest without a request went
  uint64_t silent_closes = 0;        // nothing sent within silent_timeout_ms: closed
  uint64_t handshake_timeouts = 0;
  uint64_t idle_timeouts = 0;
  uint64_t write_timeouts = 0;           // nothing taken for --write-timeout-ms: closed
  uint64_t slow_consumer_closes = 0;     // a reply past the output limits: closed
  uint64_t reads_paused_for_output = 0;  // a peer's replies went unread: its requests wait
  uint64_t http_responses[6] = {};       // by status class: index status/100
  uint64_t http_bad_requests = 0;        // 400
  uint64_t http_headers_too_large = 0;   // 431
  uint64_t http_not_found = 0;           // 404
  uint64_t http_method_not_allowed = 0;  // 405
  uint64_t origin_refused = 0;           // 403
  uint64_t http_host_refused = 0;        // 421: Host names neither loopback nor --allow-host
  uint64_t http_host_invalid = 0;        // 400: Host missing (HTTP/1.1), repeated or malformed
  uint64_t http_framing_refused = 0;     // 400: smuggling-prone framing or a body
  uint64_t http_body_too_large = 0;      // 413: a POST body past ServerConfig::max_body_bytes
  uint64_t origin_missing_refused = 0;   // 403: POST with neither Origin nor Sync-Client
  uint64_t cors_preflights = 0;          // 204: OPTIONS approved for a CORS origin
  uint64_t cors_preflight_refused = 0;   // 403: OPTIONS from an origin without CORS, or asking
                                         // a method or header syncd does not take cross-origin
  uint64_t tickets_refused = 0;          // 403 on /streams/
  uint64_t version_refused = 0;          // 426
  uint64_t ws_protocol_errors = 0;       // closes we initiated for 1002/1007/1009
  uint64_t ws_close_1002 = 0;
  uint64_t ws_close_1007 = 0;
  uint64_t ws_close_1009 = 0;
  uint64_t control_errors = 0;                  // error replies to control messages
  uint64_t frames_rejected_unknown_stream = 0;  // frames naming no stream of theirs
  uint64_t frames_rejected_bad_header = 0;
  // Read turns that reached --read-turn-kb: yielded to others waiting, or went on (nobody was).
  uint64_t read_turns_yielded = 0;
  uint64_t read_turns_continued = 0;
};

}  // namespace syncd::server
