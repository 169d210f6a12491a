#include "daemon/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "audio/backend.h"
#include "media/pattern_source.h"
#include "media/publisher_factory.h"
#include "media/publishers/camera/camera_format.h"
#include "net/http/authority.h"
#include "net/http_client/http_response.h"
#include "relay/relay.h"
#include "secure/certificate.h"
#include "whep/whep_service.h"

namespace syncd::daemon {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The values CLI11 fills that are not a ServerConfig field as they stand: strings checked and
// turned into configuration after parsing, and sizes given in KiB or MiB. Their initial values
// are the defaults the help shows.
struct CommandLine {
  std::string publishers = "test";
  std::string source;
  std::string status = "auto";
  std::vector<std::string> origins;
  size_t max_message_mb = 0;
  uint32_t idle_timeout_s = 0;
  size_t read_window_kb = 0;
  std::string camera_format;
  CLI::Option* camera_format_option = nullptr;  // its count(): whether it was given
  size_t max_pool_mb = 0;
  size_t max_pool_mb_per_connection = 0;  // 0: half of max_pool_mb
  size_t read_turn_kb = 0;
  size_t low_water_kb = 0;
  size_t max_queued_kb = 0;
  size_t output_budget_mb = 0;
  std::string audio_source;
  std::string audio_connect = "system";
  uint32_t audio_ring_ms = 1000;
  std::string relay_to, relay_listen, peer_fingerprint, crypto = "srtp-aes-gcm";
  relay::RelayConfig relay;
  bool print_fingerprint = false;
  bool no_whep = false;
  whep::WhepConfig whep;
  whep::WhipTarget whip;
  bool whip_insecure = false;

  explicit CommandLine(const server::ServerConfig& cfg)
      : max_message_mb(cfg.max_message_bytes >> 20),
        idle_timeout_s(cfg.idle_timeout_ms / 1000),
        read_window_kb(cfg.read_window_bytes / 1024),
        camera_format(media::camera_format_name(cfg.camera.format)),
        max_pool_mb(cfg.stream_limits.max_pool_bytes_total >> 20),
        read_turn_kb(cfg.read_turn_bytes / 1024),
        low_water_kb(cfg.receive_low_water_bytes / 1024),
        max_queued_kb(cfg.writer.max_queued_bytes / 1024),
        output_budget_mb(cfg.output_budget_bytes >> 20) {}
};

// Every option, in the order --help lists them. Names, defaults and help text are what users,
// scripts and the docs rely on: change them only on purpose.
void add_options(CLI::App& app, server::ServerConfig& cfg, CommandLine& c) {
  app.add_option("--host", cfg.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", cfg.port, "TCP port (0 = pick a free one)")->capture_default_str();
  app.add_option("--publisher", c.publishers,
                 "Publishers, comma-separated: " + media::publisher_names())
      ->capture_default_str();
  app.add_option("--shm-path", cfg.shm.path,
                 "Shared-memory ring file (default /dev/shm/sync-<uid>.frames)");
  app.add_option("--shm-stream", cfg.shm.stream_name,
                 "Stream published to the ring (default: the first raw stream opened; an encoded "
                 "stream's pictures reach it as its decoded twin, NAME.decoded)");
  app.add_option("--shm-slots", cfg.shm.min_slots, "Ring depth in frames (at least)")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app.add_option("--camera-device", cfg.camera.device,
                 "Camera publisher: v4l2loopback device to write (/dev/videoN); without it, a "
                 "PipeWire node (docs/camera.md)");
  app.add_option("--camera-name", cfg.camera.name, "Camera publisher: the name consumers list")
      ->capture_default_str();
  c.camera_format_option =
      app.add_option("--camera-format", c.camera_format,
                     "Camera publisher: yuy2|i420|nv12 (a PipeWire node offers all three; without "
                     "this option, the cheapest for the stream's pixels first)")
          ->check(CLI::IsMember({"yuy2", "i420", "nv12"}))
          ->capture_default_str();
  app.add_option("--source", c.source, "Built-in producer: pattern[:WIDTHxHEIGHT@FPS]");
  app.add_option("--allow-origin", c.origins,
                 "Extra browser Origin allowed to open /ws (repeatable; loopback always is)");
  app.add_flag("--cors-loopback", cfg.cors_loopback,
               "Let pages on other loopback origins (a dev server on :5173) read responses: "
               "import /web/sync.js, receive streams (CORS; --allow-origin values always may)");
  app.add_option("--allow-host", cfg.allowed_hosts,
                 "Extra Host name (NAME or NAME:PORT) requests may use (repeatable; loopback and "
                 "the --host address always are)")
      ->check([](const std::string& v) {
        return http::parse_host_header(v) ? std::string() : "not a host name: " + v;
      });
  app.add_option("--max-connections", cfg.max_connections)->capture_default_str();
  app.add_option("--max-header-bytes", cfg.max_header_bytes)->capture_default_str();
  app.add_option("--max-message-mb", c.max_message_mb, "Largest WebSocket data message")
      ->capture_default_str();
  app.add_option("--max-streams", cfg.stream_limits.max_streams)->capture_default_str();
  app.add_option("--max-streams-per-connection", cfg.stream_limits.max_streams_per_owner,
                 "Streams one connection may have open at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--max-pool-mb", c.max_pool_mb,
                 "Frame pool memory of all streams, counted until it is unmapped")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  app.add_option("--max-pool-mb-per-connection", c.max_pool_mb_per_connection,
                 "Frame pool memory of one connection's open streams (default: half of "
                 "--max-pool-mb)")
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  app.add_option("--handshake-timeout-ms", cfg.handshake_timeout_ms)->capture_default_str();
  app.add_option("--silent-timeout-ms", cfg.silent_timeout_ms,
                 "Close connections that send no byte this long")
      ->capture_default_str()
      ->check(CLI::Range(100u, 600'000u));
  app.add_option("--idle-timeout-s", c.idle_timeout_s, "Close WebSockets silent this long")
      ->capture_default_str();
  app.add_option("--read-turn-kb", c.read_turn_kb,
                 "Bytes one connection may read per loop turn before others are served")
      ->capture_default_str();
  app.add_option("--receive-low-water-kb", c.low_water_kb,
                 "Bytes queued before a socket filling a frame slot wakes the loop (SO_RCVLOWAT)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{64} * 1024));
  app.add_option("--read-window-kb", c.read_window_kb, "Largest single read into a frame slot")
      ->capture_default_str();
  app.add_option("--headtracker", cfg.headtracker,
                 "Head tracker for the pose topic: auto, /dev/hidrawN or replay:FILE");
  app.add_option("--max-queued-kb", c.max_queued_kb,
                 "Per connection: bytes copied for a peer and not yet written")
      ->check(CLI::Range(size_t{16}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--output-budget-mb", c.output_budget_mb,
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
  app.add_option("--status-line", c.status, "Live status line on stderr: auto|on|off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--audio-source", c.audio_source,
                 "Audio capture: synthetic[:CHANNELS[@RATE]][,tone], jack[:CHANNELS], or "
                 "relay[:CHANNELS] (a relay receiver's audio; 1-64 channels)");
  app.add_option("--audio-ring-ms", c.audio_ring_ms, "Audio capture ring capacity")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_option("--audio-connect", c.audio_connect,
                 "JACK ports to capture: system, none, or a comma list")
      ->capture_default_str();
  // The WAN relay (docs/wan.md).
  app.add_option("--relay-to", c.relay_to,
                 "WAN relay: send the first stream opened (or --relay-stream) to HOST:PORT; a "
                 "raw stream is encoded to H.264 first");
  app.add_option("--relay-listen", c.relay_listen,
                 "WAN relay: receive on [HOST:]PORT (UDP; 0 picks one) and publish what arrives");
  app.add_option("--relay-stream", c.relay.stream, "WAN relay: the stream to send");
  app.add_option("--relay-bitrate", c.relay.encode.bitrate_kbps,
                 "WAN relay: kbit/s a raw stream is encoded at before the bandwidth estimate "
                 "takes over")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--relay-max-bitrate", c.relay.encode.max_bitrate_kbps,
                 "WAN relay: the most kbit/s a raw stream is encoded at, whatever the estimate")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--relay-audio-channels", c.relay.audio_channels,
                 "WAN relay sender: the --audio-source channels to send, e.g. 0-7,16; 'all' or "
                 "'none' (the relay thread then reads the capture, not audio.read)")
      ->default_str("all");
  app.add_option("--relay-audio-bitrate", c.relay.audio_bitrate,
                 "WAN relay sender: Opus bit/s per audio channel")
      ->default_str("32000")
      ->check(CLI::Range(6000, 256000));
  app.add_option("--relay-audio-target-ms", c.relay.audio_target_ms,
                 "WAN relay receiver (--audio-source relay:N): the audio playout buffer's delay")
      ->default_str("60")
      ->check(CLI::Range(10, 500));
  app.add_option("--relay-keyframe-interval", c.relay.encode.keyframe_interval,
                 "WAN relay: frames between IDRs of an encoded raw stream (and one on every PLI)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option(
      "--peer-fingerprint", c.peer_fingerprint,
      "WAN relay: the peer's certificate, 'sha-256 AB:CD:...' (its --print-fingerprint)");
  // The default shown is where the certificate would be; the value stays empty, which
  // relay::load_relay_identity reads as that same default path.
  app.add_option("--relay-cert", c.relay.identity_path,
                 "WAN relay: this syncd's key and certificate (made on first use, mode 0600)")
      ->default_str(relay::default_identity_path());
  app.add_option("--dtls-rekey-interval", c.relay.rekey_interval_s,
                 "WAN relay: seconds between re-keys (a fresh DTLS handshake, no stall)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--crypto", c.crypto, "WAN relay: SRTP suite (AES-128-GCM, RFC 7714, is the one)")
      ->check(CLI::IsMember({"srtp-aes-gcm"}))
      ->capture_default_str();
  // WHEP playback (docs/whep.md).
  app.add_flag("--no-whep", c.no_whep, "Refuse WHEP offers (POST /whep/NAME answers 404)");
  app.add_option("--whep-bitrate", c.whep.encode.bitrate_kbps,
                 "WHEP: kbit/s a raw stream is encoded at for browsers (the most; lower while a "
                 "viewer reports loss)")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_option("--whep-audio-channels", c.whep.audio_channels,
                 "WHEP: the --audio-source channels browsers hear as Opus: L,R (stereo), N "
                 "(mono) or none")
      ->default_str("0,1");
  // WHIP push (docs/whep.md, "WHIP").
  app.add_option("--whip-to", c.whip.url,
                 "WHIP: offer a stream to this WHIP endpoint (an SFU's ingest URL, http or https)");
  app.add_option("--whip-stream", c.whip.stream,
                 "WHIP: the stream to push (default: the first opened)");
  app.add_option("--whip-token", c.whip.token, "WHIP: the bearer token the endpoint asks for");
  app.add_option("--whip-bitrate", c.whip.encode.bitrate_kbps,
                 "WHIP: kbit/s a raw stream is encoded at for the SFU (the most; lower while it "
                 "reports loss)")
      ->check(CLI::Range(100, 200000))
      ->capture_default_str();
  app.add_flag("--whip-insecure", c.whip_insecure,
               "WHIP: do not check the endpoint's TLS certificate (a lab's self-signed SFU)");
  app.add_flag("--print-fingerprint", c.print_fingerprint,
               "Print this syncd's relay certificate fingerprint (making the certificate if "
               "needed) and exit");
}

// The relay's address: HOST:PORT (--relay-to) or [HOST:]PORT (--relay-listen), HOST possibly a
// bracketed IPv6 address. The port is the text after the last colon, so an IPv6 address without
// brackets keeps all but its last group (::1:5004 is host ::1, port 5004). A sender needs a host
// and a port other than 0; a listener may name neither (port 0 picks one). Nothing is resolved:
// a host that is no address fails when the relay starts.
bool parse_relay_address(const std::string& where, bool sender, std::string& host, uint16_t& port) {
  const size_t colon = where.rfind(':');
  host = colon == std::string::npos ? "" : where.substr(0, colon);
  const std::string digits = colon == std::string::npos ? where : where.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const unsigned long p = std::strtoul(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || p > 65535 || (sender && (host.empty() || p == 0)))
    return false;
  port = uint16_t(p);
  return true;
}

// The relay's options, when --relay-to or --relay-listen asks for one: nullopt when accepted
// (cfg.relay set), else the refusal.
std::optional<std::string> finish_relay(CommandLine& c, server::ServerConfig& cfg) {
  if (c.relay_to.empty() && c.relay_listen.empty()) return std::nullopt;
  if (!c.relay_to.empty() && !c.relay_listen.empty())
    return "--relay-to and --relay-listen: one syncd sends or receives";
  if (c.peer_fingerprint.empty())
    return "the relay needs --peer-fingerprint (the peer's --print-fingerprint): it accepts no "
           "other peer";
  if (const auto e = secure::parse_fingerprint(c.peer_fingerprint, c.relay.peer_fingerprint);
      e != secure::FingerprintParseError::kOk)
    return std::string("--peer-fingerprint: ") + secure::to_string(e);
  c.relay.sender = !c.relay_to.empty();
  if (!parse_relay_address(c.relay.sender ? c.relay_to : c.relay_listen, c.relay.sender,
                           c.relay.host, c.relay.port))
    return c.relay.sender ? "--relay-to: expected HOST:PORT"
                          : "--relay-listen: expected [HOST:]PORT";
  cfg.relay = c.relay;
  return std::nullopt;
}

// WHEP playback and WHIP push: nullopt when accepted (cfg.whep set or, with --no-whep, reset).
std::optional<std::string> finish_whep(CommandLine& c, server::ServerConfig& cfg) {
  // Start at the most: the viewers' reported loss only lowers it (docs/whep.md, "Rate").
  c.whep.encode.max_bitrate_kbps = c.whep.encode.bitrate_kbps;
  if (!c.whip.url.empty()) {
    c.whip.encode.max_bitrate_kbps = c.whip.encode.bitrate_kbps;
    c.whip.verify_tls = !c.whip_insecure;
    if (c.no_whep) return "--whip-to needs the WebRTC egress that --no-whep turns off";
    // WhepService::start refuses it too, but a URL that does not parse is a usage error.
    http::Url url;
    std::string why;
    if (!http::parse_url(c.whip.url, url, why)) return "--whip-to: " + why;
    c.whep.whip = c.whip;
  }
  if (c.no_whep) {
    cfg.whep.reset();
    return std::nullopt;
  }
  // The same refusal as Server::start's, made here so that it is a usage error: which channels
  // exist is known only once the source runs, but that there is none is known now.
  if (c.audio_source.empty() && !c.whep.audio_channels.empty() && c.whep.audio_channels != "none")
    return "--whep-audio-channels needs an --audio-source";
  cfg.whep = c.whep;
  return std::nullopt;
}

// The checks after CLI11's and the values derived from the parsed ones, in the order syncd has
// always made them (so a command line with two faults names the same one). nullopt when
// accepted, else the refusal, without the "syncd: " prefix.
std::optional<std::string> finish(CommandLine& c, server::ServerConfig& cfg) {
  if (auto refused = finish_relay(c, cfg)) return refused;
  if (auto refused = finish_whep(c, cfg)) return refused;
  if (!c.audio_source.empty()) {
    audio::AudioSourceConfig audio;
    std::string error;
    if (!audio::parse_audio_source_spec(c.audio_source, audio, error)) return error;
    audio.ring_ms = c.audio_ring_ms;
    audio.connect = split_commas(c.audio_connect);
    cfg.audio = audio;
  }
  media::parse_camera_format(c.camera_format, cfg.camera.format);  // CLI11 checked the name
  cfg.camera.format_given = c.camera_format_option && c.camera_format_option->count() > 0;
  cfg.publishers = split_commas(c.publishers);
  for (const std::string& p : cfg.publishers)
    if (!media::find_publisher(p))
      return "unknown publisher '" + p + "' (available: " + media::publisher_names() + ")";
  if (!c.source.empty()) {
    media::PatternConfig pattern;
    std::string error;
    if (!media::parse_pattern_spec(c.source, pattern, error)) return error;
    cfg.pattern = pattern;
  }
  // --allow-origin is repeatable and each value may be a comma list.
  for (const std::string& o : c.origins)
    for (const std::string& item : split_commas(o)) cfg.allowed_origins.push_back(item);
  cfg.writer.max_queued_bytes = c.max_queued_kb * 1024;
  cfg.output_budget_bytes = c.output_budget_mb << 20;
  cfg.max_message_bytes = c.max_message_mb << 20;
  cfg.stream_limits.max_frame_bytes = cfg.max_message_bytes;
  cfg.stream_limits.max_pool_bytes_total = c.max_pool_mb << 20;
  cfg.stream_limits.max_pool_bytes_per_owner =
      c.max_pool_mb_per_connection ? std::min(c.max_pool_mb_per_connection, c.max_pool_mb) << 20
                                   : cfg.stream_limits.max_pool_bytes_total / 2;
  cfg.idle_timeout_ms = c.idle_timeout_s * 1000;
  // Floors rather than refusals, as syncd always had: smaller reads would cost more turns than
  // they save.
  cfg.read_window_bytes = std::max<size_t>(c.read_window_kb, 4) * 1024;
  cfg.read_turn_bytes = std::max<size_t>(c.read_turn_kb, 64) * 1024;
  cfg.receive_low_water_bytes = c.low_water_kb * 1024;  // 1..65536, checked by CLI11
  return std::nullopt;
}

StatusLineMode status_line_mode(const std::string& name) {
  if (name == "on") return StatusLineMode::kOn;
  if (name == "off") return StatusLineMode::kOff;
  return StatusLineMode::kAuto;  // CLI11 let only auto, on and off through
}

}  // namespace

OptionsResult parse_options(int argc, const char* const* argv) {
  DaemonOptions options;
  server::ServerConfig& cfg = options.server;
  CommandLine c(cfg);
  CLI::App app{"syncd: native media I/O for browser live-visuals instruments"};
  add_options(app, cfg, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own rendering (help, or the refusal and "Run with --help ..."), captured rather
    // than printed; its exit code (105 for a failed check, 109 for an unknown option, ...) is
    // replaced by ours.
    std::ostringstream out, err;
    app.exit(e, out, err);
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return OptionsError{OptionsStop::kHelp, out.str()};
    return OptionsError{OptionsStop::kUsage, err.str()};
  }
  options.status_line_mode = status_line_mode(c.status);
  options.relay_cert = c.relay.identity_path;
  if (c.print_fingerprint) {
    options.print_fingerprint = true;
    return options;
  }
  if (std::optional<std::string> refused = finish(c, cfg))
    return OptionsError{OptionsStop::kUsage, "syncd: " + *refused + "\n"};
  return options;
}

int exit_status(const OptionsError& error) {
  return error.kind == OptionsStop::kHelp ? kExitOk : kExitUsage;
}

bool status_line_enabled(StatusLineMode mode, bool stderr_is_terminal) {
  return mode == StatusLineMode::kOn || (mode == StatusLineMode::kAuto && stderr_is_terminal);
}

}  // namespace syncd::daemon
