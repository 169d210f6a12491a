// syncd: the command line. The only code not linked into tests.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "media/publisher_factory.h"
#include "net/http/authority.h"
#include "relay/relay.h"
#include "secure/certificate.h"
#include "server/server.h"

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  syncd::server::ServerConfig cfg;
  CLI::App app{"syncd: native media I/O for browser live-visuals instruments"};
  std::string publishers = "test";
  std::string source;
  std::string status = "auto";
  std::vector<std::string> origins;
  size_t max_message_mb = cfg.max_message_bytes >> 20;
  uint32_t idle_timeout_s = cfg.idle_timeout_ms / 1000;
  size_t read_window_kb = cfg.read_window_bytes / 1024;
  app.add_option("--host", cfg.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", cfg.port, "TCP port (0 = pick a free one)")->capture_default_str();
  app.add_option("--publisher", publishers,
                 "Publishers, comma-separated: " + syncd::media::publisher_names())
      ->capture_default_str();
  app.add_option("--shm-path", cfg.shm.path,
                 "Shared-memory ring file (default /dev/shm/sync-<uid>.frames)");
  app.add_option("--shm-stream", cfg.shm.stream_name,
                 "Stream published to the ring (default: the first raw stream opened; an encoded "
                 "stream's pictures reach it as its decoded twin, NAME.decoded)");
  app.add_option("--shm-slots", cfg.shm.min_slots, "Ring depth in frames (at least)")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  std::string camera_format = syncd::media::camera_format_name(cfg.camera.format);
  app.add_option("--camera-device", cfg.camera.device,
                 "Camera publisher: v4l2loopback device to write (/dev/videoN); without it, a "
                 "PipeWire node (docs/camera.md)");
  app.add_option("--camera-name", cfg.camera.name, "Camera publisher: the name consumers list")
      ->capture_default_str();
  app.add_option("--camera-format", camera_format, "Camera publisher: yuy2|i420|nv12")
      ->check(CLI::IsMember({"yuy2", "i420", "nv12"}))
      ->capture_default_str();
  app.add_option("--source", source, "Built-in producer: pattern[:WIDTHxHEIGHT@FPS]");
  app.add_option("--allow-origin", origins,
                 "Extra browser Origin allowed to open /ws (repeatable; loopback always is)");
  app.add_flag("--cors-loopback", cfg.cors_loopback,
               "Let pages on other loopback origins (a dev server on :5173) read responses: "
               "import /web/sync.js, receive streams (CORS; --allow-origin values always may)");
  app.add_option("--allow-host", cfg.allowed_hosts,
                 "Extra Host name (NAME or NAME:PORT) requests may use (repeatable; loopback and "
                 "the --host address always are)")
      ->check([](const std::string& v) {
        return syncd::http::parse_host_header(v) ? std::string() : "not a host name: " + v;
      });
  app.add_option("--max-connections", cfg.max_connections)->capture_default_str();
  app.add_option("--max-header-bytes", cfg.max_header_bytes)->capture_default_str();
  app.add_option("--max-message-mb", max_message_mb, "Largest WebSocket data message")
      ->capture_default_str();
  app.add_option("--max-streams", cfg.stream_limits.max_streams)->capture_default_str();
  app.add_option("--max-streams-per-connection", cfg.stream_limits.max_streams_per_owner,
                 "Streams one connection may have open at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  size_t max_pool_mb = cfg.stream_limits.max_pool_bytes_total >> 20;
  app.add_option("--max-pool-mb", max_pool_mb,
                 "Frame pool memory of all streams, counted until it is unmapped")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  size_t max_pool_mb_per_connection = 0;
  app.add_option("--max-pool-mb-per-connection", max_pool_mb_per_connection,
                 "Frame pool memory of one connection's open streams (default: half of "
                 "--max-pool-mb)")
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  app.add_option("--handshake-timeout-ms", cfg.handshake_timeout_ms)->capture_default_str();
  app.add_option("--silent-timeout-ms", cfg.silent_timeout_ms,
                 "Close connections that send no byte this long")
      ->capture_default_str()
      ->check(CLI::Range(100u, 600'000u));
  app.add_option("--idle-timeout-s", idle_timeout_s, "Close WebSockets silent this long")
      ->capture_default_str();
  size_t read_turn_kb = cfg.read_turn_bytes / 1024;
  app.add_option("--read-turn-kb", read_turn_kb,
                 "Bytes one connection may read per loop turn before others are served")
      ->capture_default_str();
  size_t low_water_kb = cfg.receive_low_water_bytes / 1024;
  app.add_option("--receive-low-water-kb", low_water_kb,
                 "Bytes queued before a socket filling a frame slot wakes the loop (SO_RCVLOWAT)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{64} * 1024));
  app.add_option("--read-window-kb", read_window_kb, "Largest single read into a frame slot")
      ->capture_default_str();
  app.add_option("--headtracker", cfg.headtracker,
                 "Head tracker for the pose topic: auto, /dev/hidrawN or replay:FILE");
  size_t max_queued_kb = cfg.writer.max_queued_bytes / 1024;
  app.add_option("--max-queued-kb", max_queued_kb,
                 "Per connection: bytes copied for a peer and not yet written")
      ->check(CLI::Range(size_t{16}, size_t{1} << 20))
      ->capture_default_str();
  size_t output_budget_mb = cfg.output_budget_bytes >> 20;
  app.add_option("--output-budget-mb", output_budget_mb,
                 "All connections: bytes copied for peers and not yet written")
      ->check(CLI::Range(size_t{1}, size_t{1} << 14))
      ->capture_default_str();
  app.add_option("--max-pinned-frames", cfg.writer.max_pinned_slots,
                 "Per connection: frame slots its writes may hold")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--write-timeout-ms", cfg.writer.write_timeout_ms,
                 "Close a connection whose writes make no progress this long (0: never)")
      ->capture_default_str();
  app.add_option("--receiver-max-frames", cfg.receiver_max_frames,
                 "HTTP stream receivers: frames in flight per receiver at most")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--status-line", status, "Live status line on stderr: auto|on|off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  std::string audio_source, audio_connect = "system";
  uint32_t audio_ring_ms = 1000;
  app.add_option("--audio-source", audio_source,
                 "Audio capture: synthetic[:CHANNELS[@RATE]][,tone], jack[:CHANNELS], or "
                 "relay[:CHANNELS] (a relay receiver's audio; 1-64 channels)");
  app.add_option("--audio-ring-ms", audio_ring_ms, "Audio capture ring capacity")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_option("--audio-connect", audio_connect,
                 "JACK ports to capture: system, none, or a comma list")
      ->capture_default_str();
  // The WAN relay (docs/wan.md).
  std::string relay_to, relay_listen, peer_fingerprint, crypto = "srtp-aes-gcm";
  syncd::relay::RelayConfig relay;
  bool print_fingerprint = false;
  app.add_option("--relay-to", relay_to,
                 "WAN relay: send the first stream opened (or --relay-stream) to HOST:PORT; a "
                 "raw stream is encoded to H.264 first");
  app.add_option("--relay-listen", relay_listen,
                 "WAN relay: receive on [HOST:]PORT (UDP; 0 picks one) and publish what arrives");
  app.add_option("--relay-stream", relay.stream, "WAN relay: the stream to send");
  app.add_option("--relay-bitrate", relay.encode.bitrate_kbps,
                 "WAN relay: kbit/s a raw stream is encoded at before the bandwidth estimate "
                 "takes over")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--relay-max-bitrate", relay.encode.max_bitrate_kbps,
                 "WAN relay: the most kbit/s a raw stream is encoded at, whatever the estimate")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--relay-audio-channels", relay.audio_channels,
                 "WAN relay sender: the --audio-source channels to send, e.g. 0-7,16; 'all' or "
                 "'none' (the relay thread then reads the capture, not audio.read)")
      ->default_str("all");
  app.add_option("--relay-audio-bitrate", relay.audio_bitrate,
                 "WAN relay sender: Opus bit/s per audio channel")
      ->default_str("32000")
      ->check(CLI::Range(6000, 256000));
  app.add_option("--relay-audio-target-ms", relay.audio_target_ms,
                 "WAN relay receiver (--audio-source relay:N): the audio playout buffer's delay")
      ->default_str("60")
      ->check(CLI::Range(10, 500));
  app.add_option("--relay-keyframe-interval", relay.encode.keyframe_interval,
                 "WAN relay: frames between IDRs of an encoded raw stream (and one on every PLI)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option(
      "--peer-fingerprint", peer_fingerprint,
      "WAN relay: the peer's certificate, 'sha-256 AB:CD:...' (its --print-fingerprint)");
  app.add_option("--relay-cert", relay.identity_path,
                 "WAN relay: this syncd's key and certificate (made on first use, mode 0600)")
      ->default_str(syncd::relay::default_identity_path());
  app.add_option("--dtls-rekey-interval", relay.rekey_interval_s,
                 "WAN relay: seconds between re-keys (a fresh DTLS handshake, no stall)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--crypto", crypto, "WAN relay: SRTP suite (AES-128-GCM, RFC 7714, is the one)")
      ->check(CLI::IsMember({"srtp-aes-gcm"}))
      ->capture_default_str();
  // WHEP playback (docs/whep.md).
  bool no_whep = false;
  syncd::whep::WhepConfig whep;
  app.add_flag("--no-whep", no_whep, "Refuse WHEP offers (POST /whep/NAME answers 404)");
  app.add_option("--whep-bitrate", whep.encode.bitrate_kbps,
                 "WHEP: kbit/s a raw stream is encoded at for browsers (the most; lower while a "
                 "viewer reports loss)")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--whep-audio-channels", whep.audio_channels,
                 "WHEP: the --audio-source channels browsers hear as Opus: L,R (stereo), N "
                 "(mono) or none")
      ->default_str("0,1");
  // WHIP push (docs/whep.md, "WHIP").
  syncd::whep::WhipTarget whip;
  app.add_option("--whip-to", whip.url,
                 "WHIP: offer a stream to this WHIP endpoint (an SFU's ingest URL, http or https)");
  app.add_option("--whip-stream", whip.stream,
                 "WHIP: the stream to push (default: the first opened)");
  app.add_option("--whip-token", whip.token, "WHIP: the bearer token the endpoint asks for");
  app.add_option("--whip-bitrate", whip.encode.bitrate_kbps,
                 "WHIP: kbit/s a raw stream is encoded at for the SFU (the most; lower while it "
                 "reports loss)")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  bool whip_insecure = false;
  app.add_flag("--whip-insecure", whip_insecure,
               "WHIP: do not check the endpoint's TLS certificate (a lab's self-signed SFU)");
  app.add_flag("--print-fingerprint", print_fingerprint,
               "Print this syncd's relay certificate fingerprint (making the certificate if "
               "needed) and exit");
  CLI11_PARSE(app, argc, argv);
  if (print_fingerprint) {
    syncd::secure::Identity identity;
    const syncd::secure::IdentityResult r =
        syncd::relay::load_relay_identity(relay.identity_path, identity);
    if (!r.ok()) {
      std::fprintf(stderr, "syncd: %s\n", r.message.c_str());
      return 2;
    }
    std::printf("%s\n", syncd::secure::format_fingerprint(identity.fingerprint).c_str());
    return 0;
  }
  if (!relay_to.empty() || !relay_listen.empty()) {
    if (!relay_to.empty() && !relay_listen.empty()) {
      std::fprintf(stderr, "syncd: --relay-to and --relay-listen: one syncd sends or receives\n");
      return 2;
    }
    if (peer_fingerprint.empty()) {
      std::fprintf(stderr,
                   "syncd: the relay needs --peer-fingerprint (the peer's "
                   "--print-fingerprint): it accepts no other peer\n");
      return 2;
    }
    if (const auto e = syncd::secure::parse_fingerprint(peer_fingerprint, relay.peer_fingerprint);
        e != syncd::secure::FingerprintParseError::kOk) {
      std::fprintf(stderr, "syncd: --peer-fingerprint: %s\n", syncd::secure::to_string(e));
      return 2;
    }
    relay.sender = !relay_to.empty();
    const std::string& where = relay.sender ? relay_to : relay_listen;
    // HOST:PORT, [V6]:PORT, or (listen) PORT alone.
    const size_t colon = where.rfind(':');
    std::string host = colon == std::string::npos ? "" : where.substr(0, colon);
    const std::string port = colon == std::string::npos ? where : where.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    char* end = nullptr;
    const unsigned long p = std::strtoul(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p > 65535 || (relay.sender && (host.empty() || p == 0))) {
      std::fprintf(stderr, "syncd: %s: expected %s\n",
                   relay.sender ? "--relay-to" : "--relay-listen",
                   relay.sender ? "HOST:PORT" : "[HOST:]PORT");
      return 2;
    }
    relay.host = host;
    relay.port = uint16_t(p);
    cfg.relay = relay;
  }
  // Start at the most: the viewers' reported loss only lowers it (docs/whep.md, "Rate").
  whep.encode.max_bitrate_kbps = whep.encode.bitrate_kbps;
  if (!whip.url.empty()) {
    whip.encode.max_bitrate_kbps = whip.encode.bitrate_kbps;
    whip.verify_tls = !whip_insecure;
    if (no_whep) {
      std::fprintf(stderr, "syncd: --whip-to needs the WebRTC egress that --no-whep turns off\n");
      return 2;
    }
    whep.whip = whip;
  }
  if (no_whep) {
    cfg.whep.reset();
  } else {
    cfg.whep = whep;
  }
  if (!audio_source.empty()) {
    syncd::audio::AudioSourceConfig audio;
    std::string error;
    if (!syncd::audio::parse_audio_source_spec(audio_source, audio, error)) {
      std::fprintf(stderr, "syncd: %s\n", error.c_str());
      return 2;
    }
    audio.ring_ms = audio_ring_ms;
    audio.connect = split_commas(audio_connect);
    cfg.audio = audio;
  }

  syncd::media::parse_camera_format(camera_format, cfg.camera.format);  // checked above
  cfg.publishers = split_commas(publishers);
  for (const std::string& p : cfg.publishers) {
    if (!syncd::media::find_publisher(p)) {
      std::fprintf(stderr, "syncd: unknown publisher '%s' (available: %s)\n", p.c_str(),
                   syncd::media::publisher_names().c_str());
      return 2;
    }
  }
  if (!source.empty()) {
    syncd::media::PatternConfig pattern;
    std::string error;
    if (!syncd::media::parse_pattern_spec(source, pattern, error)) {
      std::fprintf(stderr, "syncd: %s\n", error.c_str());
      return 2;
    }
    cfg.pattern = pattern;
  }
  for (const std::string& o : origins)
    for (const std::string& item : split_commas(o)) cfg.allowed_origins.push_back(item);
  cfg.writer.max_queued_bytes = max_queued_kb * 1024;
  cfg.output_budget_bytes = output_budget_mb << 20;
  cfg.max_message_bytes = max_message_mb << 20;
  cfg.stream_limits.max_frame_bytes = cfg.max_message_bytes;
  cfg.stream_limits.max_pool_bytes_total = max_pool_mb << 20;
  cfg.stream_limits.max_pool_bytes_per_owner =
      max_pool_mb_per_connection ? std::min(max_pool_mb_per_connection, max_pool_mb) << 20
                                 : cfg.stream_limits.max_pool_bytes_total / 2;
  cfg.idle_timeout_ms = idle_timeout_s * 1000;
  cfg.read_window_bytes = std::max<size_t>(read_window_kb, 4) * 1024;
  cfg.read_turn_bytes = std::max<size_t>(read_turn_kb, 64) * 1024;
  cfg.receive_low_water_bytes = low_water_kb * 1024;  // 1..65536, checked above
  cfg.status_line = status == "on" || (status == "auto" && ::isatty(STDERR_FILENO));

  // A peer that vanishes must cost an error code, not the process.
  std::signal(SIGPIPE, SIG_IGN);

  syncd::server::Server server(cfg);
  if (const int rc = server.start(); rc < 0) {
    std::fprintf(stderr, "syncd: cannot start on %s:%u: %s\n", cfg.host.c_str(), unsigned(cfg.port),
                 uv_strerror(rc));
    return 1;
  }
  server.run();
  return 0;
}
