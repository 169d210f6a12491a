// syncd's command line (src/daemon/options.h): every option lands in its configuration field,
// every default holds when an option is absent, and every refusal is a usage error (exit 2) that
// names what was wrong, in the order syncd has always checked.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <variant>
#include <vector>

#include "daemon/options.h"

using syncd::daemon::DaemonOptions;
using syncd::daemon::exit_status;
using syncd::daemon::kExitOk;
using syncd::daemon::kExitStartFailed;
using syncd::daemon::kExitUsage;
using syncd::daemon::OptionsError;
using syncd::daemon::OptionsResult;
using syncd::daemon::OptionsStop;
using syncd::daemon::parse_options;
using syncd::daemon::status_line_enabled;
using syncd::daemon::StatusLineMode;

namespace {

// Whether `text` holds `part`; says both when not.
testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << part << "\" not in:\n" << text;
}

// parse_options on "syncd" followed by `args`, as main() would receive them.
OptionsResult parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"syncd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_options(int(argv.size()), argv.data());
}

// The options of a command line that must be accepted; a failure (with CLI11's or our message)
// and default options otherwise.
DaemonOptions accepted(const std::vector<std::string>& args) {
  OptionsResult r = parse(args);
  if (const auto* e = std::get_if<OptionsError>(&r)) {
    ADD_FAILURE() << "refused: " << testing::PrintToString(args) << ": " << e->text;
    return DaemonOptions{};
  }
  return std::get<DaemonOptions>(std::move(r));
}

// The refusal of a command line that must be refused as a usage error.
std::string refused(const std::vector<std::string>& args) {
  OptionsResult r = parse(args);
  const auto* e = std::get_if<OptionsError>(&r);
  if (!e) {
    ADD_FAILURE() << "accepted: " << testing::PrintToString(args);
    return "";
  }
  EXPECT_EQ(e->kind, OptionsStop::kUsage) << testing::PrintToString(args);
  EXPECT_EQ(exit_status(*e), kExitUsage);
  EXPECT_FALSE(e->text.empty());
  EXPECT_EQ(e->text.back(), '\n') << "main() prints it verbatim";
  return e->text;
}

// A valid --peer-fingerprint: 32 pairs, the first 0x00, the last 0x1F.
std::string fingerprint_text() {
  std::string text = "sha-256 ";
  const char* hex = "0123456789ABCDEF";
  for (int i = 0; i < 32; ++i) {
    if (i) text += ':';
    text += hex[i >> 4];
    text += hex[i & 15];
  }
  return text;
}

constexpr size_t kMiB = size_t(1) << 20;

}  // namespace

// ---- Exit status and status line ----

TEST(DaemonOptions, ExitStatusesAreDistinctPerClass) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitStartFailed, 1);
  EXPECT_EQ(kExitUsage, 2);
  EXPECT_EQ(exit_status(OptionsError{OptionsStop::kHelp, "x\n"}), 0);
  EXPECT_EQ(exit_status(OptionsError{OptionsStop::kUsage, "x\n"}), 2);
}

TEST(DaemonOptions, StatusLineFollowsModeAndTerminal) {
  EXPECT_TRUE(status_line_enabled(StatusLineMode::kOn, false));
  EXPECT_TRUE(status_line_enabled(StatusLineMode::kOn, true));
  EXPECT_FALSE(status_line_enabled(StatusLineMode::kOff, true));
  EXPECT_FALSE(status_line_enabled(StatusLineMode::kOff, false));
  EXPECT_TRUE(status_line_enabled(StatusLineMode::kAuto, true));
  EXPECT_FALSE(status_line_enabled(StatusLineMode::kAuto, false));
}

// ---- Help ----

TEST(DaemonOptions, HelpIsReturnedForStdoutWithStatusZero) {
  for (const char* flag : {"--help", "-h"}) {
    OptionsResult r = parse({"--port", "1", flag, "--bogus-after-help"});
    const auto* e = std::get_if<OptionsError>(&r);
    ASSERT_NE(e, nullptr) << flag;
    EXPECT_EQ(e->kind, OptionsStop::kHelp);
    EXPECT_EQ(exit_status(*e), 0);
    EXPECT_TRUE(Contains(e->text, "syncd: native media I/O for browser live-visuals instruments"));
    EXPECT_TRUE(Contains(e->text, "Usage: syncd [OPTIONS]"));
  }
}

// Names, defaults, checks and help text are what users, scripts and docs rely on: the help shows
// each option with its default as it always has.
TEST(DaemonOptions, HelpListsEveryOptionWithItsDefault) {
  OptionsResult r = parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<OptionsError>(r));
  const std::string help = std::get<OptionsError>(r).text;
  for (const char* shown : {
           "--host TEXT=127.0.0.1 ",
           "--port UINT=54997 ",
           "--publisher TEXT=test ",
           "--shm-path TEXT ",
           "--shm-stream TEXT ",
           "--shm-slots UINT:INT in [2 - 64]=8\n",
           "--camera-device TEXT ",
           "--camera-name TEXT=Sync Camera\n",
           "--camera-format TEXT:{yuy2,i420,nv12}=yuy2\n",
           "--source TEXT ",
           "--allow-origin TEXT ... ",
           "--cors-loopback ",
           "--allow-host TEXT ... ",
           "--max-connections UINT=1024 ",
           "--max-header-bytes UINT=8192",
           "--max-message-mb UINT=64 ",
           "--max-streams UINT=16 ",
           "--max-streams-per-connection UINT:UINT in [1 - 1024]=8\n",
           "--max-pool-mb UINT:UINT in [1 - 1048576]=2048\n",
           "--max-pool-mb-per-connection UINT:UINT in [1 - 1048576]\n",
           "--handshake-timeout-ms UINT=10000",
           "--silent-timeout-ms UINT:UINT in [100 - 600000]=3000\n",
           "--idle-timeout-s UINT=120 ",
           "--read-turn-kb UINT=1024 ",
           "--receive-low-water-kb UINT:UINT in [1 - 65536]=256\n",
           "--read-window-kb UINT=256 ",
           "--headtracker TEXT ",
           "--max-queued-kb UINT:UINT in [16 - 1048576]=1024\n",
           "--output-budget-mb UINT:UINT in [1 - 16384]=64\n",
           "--max-pinned-frames UINT:INT in [1 - 16]=2\n",
           "--write-timeout-ms UINT=15000",
           "--receiver-max-frames UINT:INT in [1 - 16]=2\n",
           "--status-line TEXT:{auto,on,off}=auto\n",
           "--audio-source TEXT ",
           "--audio-ring-ms UINT:INT in [10 - 60000]=1000\n",
           "--audio-connect TEXT=system ",
           "--relay-to TEXT ",
           "--relay-listen TEXT ",
           "--relay-stream TEXT ",
           "--relay-bitrate UINT:INT in [100 - 200000]=8000\n",
           "--relay-max-bitrate UINT:INT in [100 - 200000]=20000\n",
           "--relay-audio-channels TEXT=all\n",
           "--relay-audio-bitrate UINT:INT in [6000 - 256000]=32000\n",
           "--relay-audio-target-ms UINT:INT in [10 - 500]=60\n",
           "--relay-keyframe-interval UINT:INT in [1 - 100000]=120\n",
           "--peer-fingerprint TEXT ",
           "relay-identity.pem\n",  // --relay-cert's default: see relay::default_identity_path
           "--dtls-rekey-interval UINT:INT in [1 - 86400]=300\n",
           "--crypto TEXT:{srtp-aes-gcm}=srtp-aes-gcm\n",
           "--no-whep ",
           "--whep-bitrate UINT:INT in [100 - 200000]=8000\n",
           "--whep-audio-channels TEXT=0,1\n",
           "--whip-to TEXT ",
           "--whip-stream TEXT ",
           "--whip-token TEXT ",
           "--whip-bitrate UINT:INT in [100 - 200000]=8000\n",
           "--whip-insecure ",
           "--print-fingerprint ",
       })
    EXPECT_TRUE(Contains(help, shown));
  EXPECT_TRUE(Contains(help, "Publishers, comma-separated: test, shm, camera"));
  EXPECT_TRUE(Contains(help, "Live status line on stderr: auto|on|off"));
  EXPECT_TRUE(Contains(help, "--relay-cert TEXT="));
}

// ---- Defaults ----

TEST(DaemonOptions, NoOptionsGiveTheDocumentedDefaults) {
  const DaemonOptions o = accepted({});
  const auto& c = o.server;
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.port, 54997);
  EXPECT_EQ(c.publishers, std::vector<std::string>{"test"});
  EXPECT_EQ(c.shm.path, "");
  EXPECT_EQ(c.shm.stream_name, "");
  EXPECT_EQ(c.shm.min_slots, 8u);
  EXPECT_EQ(c.camera.device, "");
  EXPECT_EQ(c.camera.name, "Sync Camera");
  EXPECT_EQ(c.camera.format, syncd::media::CameraFormat::kYuy2);
  EXPECT_FALSE(c.pattern);
  EXPECT_TRUE(c.allowed_origins.empty());
  EXPECT_FALSE(c.cors_loopback);
  EXPECT_TRUE(c.allowed_hosts.empty());
  EXPECT_EQ(c.max_connections, 1024u);
  EXPECT_EQ(c.max_header_bytes, 8192u);
  EXPECT_EQ(c.max_message_bytes, 64 * kMiB);
  EXPECT_EQ(c.stream_limits.max_frame_bytes, 64 * kMiB);
  EXPECT_EQ(c.stream_limits.max_streams, 16u);
  EXPECT_EQ(c.stream_limits.max_streams_per_owner, 8u);
  EXPECT_EQ(c.stream_limits.max_pool_bytes_total, 2048 * kMiB);
  EXPECT_EQ(c.stream_limits.max_pool_bytes_per_owner, 1024 * kMiB);  // half the total
  EXPECT_EQ(c.handshake_timeout_ms, 10'000u);
  EXPECT_EQ(c.silent_timeout_ms, 3'000u);
  EXPECT_EQ(c.idle_timeout_ms, 120'000u);
  EXPECT_EQ(c.read_turn_bytes, 1024u * 1024);
  EXPECT_EQ(c.receive_low_water_bytes, 256u * 1024);
  EXPECT_EQ(c.read_window_bytes, 256u * 1024);
  EXPECT_EQ(c.headtracker, "");
  EXPECT_EQ(c.writer.max_queued_bytes, 1024u * 1024);
  EXPECT_EQ(c.output_budget_bytes, 64 * kMiB);
  EXPECT_EQ(c.writer.max_pinned_slots, 2u);
  EXPECT_EQ(c.writer.write_timeout_ms, 15'000u);
  EXPECT_EQ(c.receiver_max_frames, 2u);
  EXPECT_EQ(o.status_line_mode, StatusLineMode::kAuto);
  EXPECT_FALSE(c.status_line) << "main() decides it";
  EXPECT_FALSE(c.audio);
  EXPECT_FALSE(c.relay);
  ASSERT_TRUE(c.whep);  // WHEP is on unless --no-whep
  EXPECT_EQ(c.whep->encode.bitrate_kbps, 8000u);
  EXPECT_EQ(c.whep->encode.max_bitrate_kbps, 8000u);  // starts at the most
  EXPECT_EQ(c.whep->audio_channels, "");              // the service's default, 0,1
  EXPECT_FALSE(c.whep->whip);
  EXPECT_FALSE(o.print_fingerprint);
  EXPECT_EQ(o.relay_cert, "");  // relay::default_identity_path()
}

// ---- Each option into its field ----

TEST(DaemonOptions, ListeningAddress) {
  const DaemonOptions o = accepted({"--host", "::1", "--port", "0"});
  EXPECT_EQ(o.server.host, "::1");
  EXPECT_EQ(o.server.port, 0);
  EXPECT_EQ(accepted({"--port", "65535"}).server.port, 65535);
}

TEST(DaemonOptions, PublishersAndTheirOptions) {
  const DaemonOptions o =
      accepted({"--publisher", "test,shm,,camera", "--shm-path", "/dev/shm/x.frames",
                "--shm-stream", "cam", "--shm-slots", "32", "--camera-device", "/dev/video10",
                "--camera-name", "Stage", "--camera-format", "nv12"});
  EXPECT_EQ(o.server.publishers, (std::vector<std::string>{"test", "shm", "camera"}));
  EXPECT_EQ(o.server.shm.path, "/dev/shm/x.frames");
  EXPECT_EQ(o.server.shm.stream_name, "cam");
  EXPECT_EQ(o.server.shm.min_slots, 32u);
  EXPECT_EQ(o.server.camera.device, "/dev/video10");
  EXPECT_EQ(o.server.camera.name, "Stage");
  EXPECT_EQ(o.server.camera.format, syncd::media::CameraFormat::kNv12);
  EXPECT_EQ(accepted({"--camera-format", "i420"}).server.camera.format,
            syncd::media::CameraFormat::kI420);
  EXPECT_EQ(accepted({"--camera-format", "yuy2"}).server.camera.format,
            syncd::media::CameraFormat::kYuy2);
  // An empty list is no publisher at all.
  EXPECT_TRUE(accepted({"--publisher", ""}).server.publishers.empty());
}

TEST(DaemonOptions, PatternSource) {
  const DaemonOptions o = accepted({"--source", "pattern:1280x720@30"});
  ASSERT_TRUE(o.server.pattern);
  EXPECT_EQ(o.server.pattern->width, 1280u);
  EXPECT_EQ(o.server.pattern->height, 720u);
  EXPECT_EQ(o.server.pattern->fps, 30.0);
  const DaemonOptions plain = accepted({"--source", "pattern"});
  ASSERT_TRUE(plain.server.pattern);
  EXPECT_EQ(plain.server.pattern->width, 1920u);
}

TEST(DaemonOptions, OriginsAndHosts) {
  const DaemonOptions o =
      accepted({"--allow-origin", "https://a.example,https://b.example", "--allow-origin",
                "http://c.example:8080", "--cors-loopback", "--allow-host", "studio.local",
                "--allow-host", "studio.local:8443"});
  EXPECT_EQ(o.server.allowed_origins,
            (std::vector<std::string>{"https://a.example", "https://b.example",
                                      "http://c.example:8080"}));
  EXPECT_TRUE(o.server.cors_loopback);
  EXPECT_EQ(o.server.allowed_hosts,
            (std::vector<std::string>{"studio.local", "studio.local:8443"}));
}

TEST(DaemonOptions, ConnectionAndStreamLimits) {
  const DaemonOptions o = accepted({"--max-connections",
                                    "100",
                                    "--max-header-bytes",
                                    "4096",
                                    "--max-message-mb",
                                    "16",
                                    "--max-streams",
                                    "4",
                                    "--max-streams-per-connection",
                                    "3",
                                    "--max-pool-mb",
                                    "512",
                                    "--max-pool-mb-per-connection",
                                    "100",
                                    "--handshake-timeout-ms",
                                    "500",
                                    "--silent-timeout-ms",
                                    "1000",
                                    "--idle-timeout-s",
                                    "30",
                                    "--read-turn-kb",
                                    "128",
                                    "--receive-low-water-kb",
                                    "32",
                                    "--read-window-kb",
                                    "64",
                                    "--receiver-max-frames",
                                    "4"});
  const auto& c = o.server;
  EXPECT_EQ(c.max_connections, 100u);
  EXPECT_EQ(c.max_header_bytes, 4096u);
  EXPECT_EQ(c.max_message_bytes, 16 * kMiB);
  EXPECT_EQ(c.stream_limits.max_frame_bytes, 16 * kMiB);  // a frame is one data message
  EXPECT_EQ(c.stream_limits.max_streams, 4u);
  EXPECT_EQ(c.stream_limits.max_streams_per_owner, 3u);
  EXPECT_EQ(c.stream_limits.max_pool_bytes_total, 512 * kMiB);
  EXPECT_EQ(c.stream_limits.max_pool_bytes_per_owner, 100 * kMiB);
  EXPECT_EQ(c.handshake_timeout_ms, 500u);
  EXPECT_EQ(c.silent_timeout_ms, 1000u);
  EXPECT_EQ(c.idle_timeout_ms, 30'000u);
  EXPECT_EQ(c.read_turn_bytes, 128u * 1024);
  EXPECT_EQ(c.receive_low_water_bytes, 32u * 1024);
  EXPECT_EQ(c.read_window_bytes, 64u * 1024);
  EXPECT_EQ(c.receiver_max_frames, 4u);
}

TEST(DaemonOptions, PoolShareDefaultsToHalfAndNeverExceedsTheTotal) {
  EXPECT_EQ(accepted({"--max-pool-mb", "300"}).server.stream_limits.max_pool_bytes_per_owner,
            150 * kMiB);
  EXPECT_EQ(accepted({"--max-pool-mb", "300", "--max-pool-mb-per-connection", "900"})
                .server.stream_limits.max_pool_bytes_per_owner,
            300 * kMiB);
}

TEST(DaemonOptions, ReadSizesHaveFloors) {
  const DaemonOptions o = accepted({"--read-turn-kb", "1", "--read-window-kb", "0"});
  EXPECT_EQ(o.server.read_turn_bytes, 64u * 1024);
  EXPECT_EQ(o.server.read_window_bytes, 4u * 1024);
}

TEST(DaemonOptions, OutputLimits) {
  const DaemonOptions o = accepted({"--max-queued-kb", "64", "--output-budget-mb", "8",
                                    "--max-pinned-frames", "5", "--write-timeout-ms", "0"});
  EXPECT_EQ(o.server.writer.max_queued_bytes, 64u * 1024);
  EXPECT_EQ(o.server.output_budget_bytes, 8 * kMiB);
  EXPECT_EQ(o.server.writer.max_pinned_slots, 5u);
  EXPECT_EQ(o.server.writer.write_timeout_ms, 0u);
}

TEST(DaemonOptions, HeadtrackerAndStatusLine) {
  EXPECT_EQ(accepted({"--headtracker", "replay:/tmp/x.hid"}).server.headtracker,
            "replay:/tmp/x.hid");
  EXPECT_EQ(accepted({"--status-line", "on"}).status_line_mode, StatusLineMode::kOn);
  EXPECT_EQ(accepted({"--status-line", "off"}).status_line_mode, StatusLineMode::kOff);
  EXPECT_EQ(accepted({"--status-line", "auto"}).status_line_mode, StatusLineMode::kAuto);
}

TEST(DaemonOptions, AudioSource) {
  const DaemonOptions o = accepted({"--audio-source", "synthetic:4@96000,tone", "--audio-ring-ms",
                                    "250", "--audio-connect", "a:out_1,,b:out_2"});
  ASSERT_TRUE(o.server.audio);
  EXPECT_EQ(o.server.audio->backend, "synthetic");
  EXPECT_EQ(o.server.audio->channels, 4u);
  EXPECT_EQ(o.server.audio->rate, 96000u);
  EXPECT_TRUE(o.server.audio->tone);
  EXPECT_EQ(o.server.audio->ring_ms, 250u);
  EXPECT_EQ(o.server.audio->connect, (std::vector<std::string>{"a:out_1", "b:out_2"}));
  const DaemonOptions jack = accepted({"--audio-source", "jack"});
  ASSERT_TRUE(jack.server.audio);
  EXPECT_EQ(jack.server.audio->backend, "jack");
  EXPECT_EQ(jack.server.audio->ring_ms, 1000u);
  EXPECT_EQ(jack.server.audio->connect, std::vector<std::string>{"system"});
  // Without --audio-source, the audio options configure nothing.
  EXPECT_FALSE(accepted({"--audio-ring-ms", "500"}).server.audio);
}

TEST(DaemonOptions, RelaySender) {
  const DaemonOptions o = accepted({"--relay-to",
                                    "receiver.example:5004",
                                    "--peer-fingerprint",
                                    fingerprint_text(),
                                    "--relay-stream",
                                    "cam",
                                    "--relay-bitrate",
                                    "4000",
                                    "--relay-max-bitrate",
                                    "9000",
                                    "--relay-audio-channels",
                                    "0-7,16",
                                    "--relay-audio-bitrate",
                                    "64000",
                                    "--relay-audio-target-ms",
                                    "80",
                                    "--relay-keyframe-interval",
                                    "60",
                                    "--relay-cert",
                                    "/tmp/id.pem",
                                    "--dtls-rekey-interval",
                                    "30",
                                    "--crypto",
                                    "srtp-aes-gcm"});
  ASSERT_TRUE(o.server.relay);
  const auto& r = *o.server.relay;
  EXPECT_TRUE(r.sender);
  EXPECT_EQ(r.host, "receiver.example");
  EXPECT_EQ(r.port, 5004);
  EXPECT_EQ(r.peer_fingerprint.sha256[0], 0x00);
  EXPECT_EQ(r.peer_fingerprint.sha256[31], 0x1F);
  EXPECT_EQ(r.stream, "cam");
  EXPECT_EQ(r.encode.bitrate_kbps, 4000u);
  EXPECT_EQ(r.encode.max_bitrate_kbps, 9000u);
  EXPECT_EQ(r.encode.keyframe_interval, 60u);
  EXPECT_EQ(r.audio_channels, "0-7,16");
  EXPECT_EQ(r.audio_bitrate, 64000u);
  EXPECT_EQ(r.audio_target_ms, 80u);
  EXPECT_EQ(r.identity_path, "/tmp/id.pem");
  EXPECT_EQ(r.rekey_interval_s, 30u);
  EXPECT_EQ(o.relay_cert, "/tmp/id.pem");
}

TEST(DaemonOptions, RelayDefaults) {
  const DaemonOptions o =
      accepted({"--relay-listen", "5004", "--peer-fingerprint", fingerprint_text()});
  ASSERT_TRUE(o.server.relay);
  const auto& r = *o.server.relay;
  EXPECT_FALSE(r.sender);
  EXPECT_EQ(r.stream, "");
  EXPECT_EQ(r.encode.bitrate_kbps, 8000u);
  EXPECT_EQ(r.encode.max_bitrate_kbps, 20000u);
  EXPECT_EQ(r.encode.keyframe_interval, 120u);
  EXPECT_EQ(r.audio_channels, "all");
  EXPECT_EQ(r.audio_bitrate, 32000u);
  EXPECT_EQ(r.audio_target_ms, 60u);
  EXPECT_EQ(r.identity_path, "");
  EXPECT_EQ(r.rekey_interval_s, 300u);
}

// Every fingerprint form the relay documents (docs/wan.md): "sha-256 ", "sha-256:", bare pairs,
// either case.
TEST(DaemonOptions, PeerFingerprintForms) {
  const std::string spaced = fingerprint_text();
  const std::string bare = spaced.substr(8);
  std::string lower = spaced;
  for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  for (const std::string& text : {spaced, "sha-256:" + bare, bare, lower}) {
    const DaemonOptions o = accepted({"--relay-to", "h:1", "--peer-fingerprint", text});
    ASSERT_TRUE(o.server.relay) << text;
    EXPECT_EQ(o.server.relay->peer_fingerprint.sha256[31], 0x1F) << text;
  }
}

struct AddressCase {
  const char* option;
  const char* where;
  const char* host;
  uint16_t port;
};

TEST(DaemonOptions, RelayAddressForms) {
  for (const AddressCase& c : std::initializer_list<AddressCase>{
           {"--relay-to", "127.0.0.1:5004", "127.0.0.1", 5004},
           {"--relay-to", "receiver.example:65535", "receiver.example", 65535},
           {"--relay-to", "[::1]:5004", "::1", 5004},
           {"--relay-to", "[fe80::1%eth0]:1", "fe80::1%eth0", 1},
           // Without brackets the port is after the last colon: what is before it is the host.
           {"--relay-to", "::1:5004", "::1", 5004},
           {"--relay-listen", "5004", "", 5004},
           {"--relay-listen", "0", "", 0},
           {"--relay-listen", "0.0.0.0:5004", "0.0.0.0", 5004},
           {"--relay-listen", "[::]:0", "::", 0},
           {"--relay-listen", ":7000", "", 7000},
       }) {
    const DaemonOptions o = accepted({c.option, c.where, "--peer-fingerprint", fingerprint_text()});
    ASSERT_TRUE(o.server.relay) << c.where;
    EXPECT_EQ(o.server.relay->sender, std::string(c.option) == "--relay-to") << c.where;
    EXPECT_EQ(o.server.relay->host, c.host) << c.where;
    EXPECT_EQ(o.server.relay->port, c.port) << c.where;
  }
}

TEST(DaemonOptions, WhepAndWhip) {
  const DaemonOptions o =
      accepted({"--whep-bitrate", "3000", "--audio-source", "synthetic:4", "--whep-audio-channels",
                "2,3", "--whip-to", "https://sfu.example/whip", "--whip-stream", "cam",
                "--whip-token", "s3cret", "--whip-bitrate", "6000"});
  ASSERT_TRUE(o.server.whep);
  EXPECT_EQ(o.server.whep->encode.bitrate_kbps, 3000u);
  EXPECT_EQ(o.server.whep->encode.max_bitrate_kbps, 3000u);
  EXPECT_EQ(o.server.whep->audio_channels, "2,3");
  ASSERT_TRUE(o.server.whep->whip);
  const auto& whip = *o.server.whep->whip;
  EXPECT_EQ(whip.url, "https://sfu.example/whip");
  EXPECT_EQ(whip.stream, "cam");
  EXPECT_EQ(whip.token, "s3cret");
  EXPECT_EQ(whip.encode.bitrate_kbps, 6000u);
  EXPECT_EQ(whip.encode.max_bitrate_kbps, 6000u);
  EXPECT_TRUE(whip.verify_tls);

  const DaemonOptions insecure = accepted({"--whip-to", "https://sfu/", "--whip-insecure"});
  ASSERT_TRUE(insecure.server.whep && insecure.server.whep->whip);
  EXPECT_FALSE(insecure.server.whep->whip->verify_tls);
  EXPECT_EQ(insecure.server.whep->whip->encode.bitrate_kbps, 8000u);

  // WHIP options without --whip-to push nothing.
  EXPECT_FALSE(accepted({"--whip-stream", "cam"}).server.whep->whip);
  EXPECT_FALSE(accepted({"--no-whep"}).server.whep);
  // "none" asks for no audio, so it needs no source.
  EXPECT_EQ(accepted({"--whep-audio-channels", "none"}).server.whep->audio_channels, "none");
  // With WHEP off, its audio channels are not looked at.
  EXPECT_FALSE(accepted({"--no-whep", "--whep-audio-channels", "0,1"}).server.whep);
}

// --print-fingerprint skips the checks after CLI11's, as it always has: it reads only
// --relay-cert.
TEST(DaemonOptions, PrintFingerprintNeedsOnlyTheCertificatePath) {
  const DaemonOptions o = accepted({"--print-fingerprint", "--relay-cert", "/tmp/id.pem",
                                    "--publisher", "bogus", "--relay-to", "nowhere"});
  EXPECT_TRUE(o.print_fingerprint);
  EXPECT_EQ(o.relay_cert, "/tmp/id.pem");
  EXPECT_EQ(accepted({"--print-fingerprint"}).relay_cert, "");
  // CLI11's own checks still apply.
  refused({"--print-fingerprint", "--shm-slots", "1"});
}

// ---- Refusals ----

TEST(DaemonOptions, UnknownOptionsAndArguments) {
  EXPECT_TRUE(Contains(refused({"--bogus"}), "--bogus"));
  EXPECT_TRUE(Contains(refused({"--bogus"}), "Run with --help for more information."));
  EXPECT_TRUE(Contains(refused({"stray"}), "stray"));
  EXPECT_TRUE(Contains(refused({"--relay_to", "h:1"}), "--relay_to"));
}

TEST(DaemonOptions, ValuesThatDoNotParse) {
  EXPECT_TRUE(Contains(refused({"--port"}), "--port"));  // no value
  EXPECT_TRUE(Contains(refused({"--port", "abc"}), "--port"));
  EXPECT_TRUE(Contains(refused({"--port", "65536"}), "--port"));
  EXPECT_TRUE(Contains(refused({"--port", "-1"}), "--port"));
  EXPECT_TRUE(Contains(refused({"--max-connections", "many"}), "--max-connections"));
  EXPECT_TRUE(Contains(refused({"--max-header-bytes", "5k"}), "--max-header-bytes"));
  EXPECT_TRUE(Contains(refused({"--idle-timeout-s", "1.5"}), "--idle-timeout-s"));
  EXPECT_TRUE(Contains(refused({"--write-timeout-ms", "x"}), "--write-timeout-ms"));
  EXPECT_TRUE(Contains(refused({"--cors-loopback=maybe"}), "--cors-loopback"));
}

struct RangeCase {
  const char* option;
  const char* low;   // the smallest accepted
  const char* high;  // the largest accepted
  const char* below;
  const char* above;
};

// Every option with a CLI11 Range: both ends accepted, one past each refused, the message naming
// the option.
TEST(DaemonOptions, NumbersOutOfRange) {
  for (const RangeCase& c : std::initializer_list<RangeCase>{
           {"--shm-slots", "2", "64", "1", "65"},
           {"--max-streams-per-connection", "1", "1024", "0", "1025"},
           {"--max-pool-mb", "1", "1048576", "0", "1048577"},
           {"--max-pool-mb-per-connection", "1", "1048576", "0", "1048577"},
           {"--silent-timeout-ms", "100", "600000", "99", "600001"},
           {"--receive-low-water-kb", "1", "65536", "0", "65537"},
           {"--max-queued-kb", "16", "1048576", "15", "1048577"},
           {"--output-budget-mb", "1", "16384", "0", "16385"},
           {"--max-pinned-frames", "1", "16", "0", "17"},
           {"--receiver-max-frames", "1", "16", "0", "17"},
           {"--audio-ring-ms", "10", "60000", "9", "60001"},
           {"--relay-bitrate", "100", "200000", "99", "200001"},
           {"--relay-max-bitrate", "100", "200000", "99", "200001"},
           {"--relay-audio-bitrate", "6000", "256000", "5999", "256001"},
           {"--relay-audio-target-ms", "10", "500", "9", "501"},
           {"--relay-keyframe-interval", "1", "100000", "0", "100001"},
           {"--dtls-rekey-interval", "1", "86400", "0", "86401"},
           {"--whep-bitrate", "100", "200000", "99", "200001"},
           {"--whip-bitrate", "100", "200000", "99", "200001"},
       }) {
    accepted({c.option, c.low});
    accepted({c.option, c.high});
    EXPECT_TRUE(Contains(refused({c.option, c.below}), c.option));
    EXPECT_TRUE(Contains(refused({c.option, c.above}), c.option));
    EXPECT_TRUE(Contains(refused({c.option, c.above}), "not in range"));
  }
}

TEST(DaemonOptions, ValuesOutsideTheirChoices) {
  EXPECT_TRUE(Contains(refused({"--camera-format", "bgrx"}),
                       "--camera-format: bgrx not in {yuy2,i420,nv12}"));
  EXPECT_TRUE(Contains(refused({"--status-line", "maybe"}), "--status-line"));
  EXPECT_TRUE(Contains(refused({"--crypto", "srtp-aes-cm"}), "--crypto"));
  EXPECT_TRUE(Contains(refused({"--allow-host", "bad host!"}), "not a host name: bad host!"));
  EXPECT_TRUE(Contains(refused({"--allow-host", "h:99999"}), "--allow-host"));
}

TEST(DaemonOptions, BadRelayAddresses) {
  const std::string fp = fingerprint_text();
  for (const char* where : {"nowhere", "127.0.0.1", "127.0.0.1:", ":5004", "[]:5004", "host:65536",
                            "host:99999999999999999999", "host:0", "host:12x", "host:-1", "[::1]"})
    EXPECT_TRUE(Contains(refused({"--relay-to", where, "--peer-fingerprint", fp}),
                         "syncd: --relay-to: expected HOST:PORT"))
        << where;
  for (const char* where : {"x", "65536", "0.0.0.0:", "0.0.0.0:70000", "[::1]", "h:p"})
    EXPECT_TRUE(Contains(refused({"--relay-listen", where, "--peer-fingerprint", fp}),
                         "syncd: --relay-listen: expected [HOST:]PORT"))
        << where;
}

TEST(DaemonOptions, RelayThatCannotBeTrusted) {
  EXPECT_EQ(refused({"--relay-to", "h:1"}),
            "syncd: the relay needs --peer-fingerprint (the peer's --print-fingerprint): it "
            "accepts no other peer\n");
  EXPECT_EQ(refused({"--relay-listen", "0"}),
            "syncd: the relay needs --peer-fingerprint (the peer's --print-fingerprint): it "
            "accepts no other peer\n");
  for (const std::string& fp : std::vector<std::string>{
           "sha-1 AB", "sha-256 AB:CD", fingerprint_text() + ":00",
           fingerprint_text().substr(0, 94) + "G", std::string(1, ' ').append(fingerprint_text())})
    EXPECT_TRUE(Contains(refused({"--relay-to", "h:1", "--peer-fingerprint", fp}),
                         "syncd: --peer-fingerprint: "))
        << fp;
}

TEST(DaemonOptions, ConflictingFlags) {
  EXPECT_EQ(refused({"--relay-to", "h:1", "--relay-listen", "0", "--peer-fingerprint",
                     fingerprint_text()}),
            "syncd: --relay-to and --relay-listen: one syncd sends or receives\n");
  EXPECT_EQ(refused({"--whip-to", "http://sfu/", "--no-whep"}),
            "syncd: --whip-to needs the WebRTC egress that --no-whep turns off\n");
  EXPECT_EQ(refused({"--whep-audio-channels", "0,1"}),
            "syncd: --whep-audio-channels needs an --audio-source\n");
}

TEST(DaemonOptions, WhipUrlsThatDoNotParse) {
  for (const char* url : {"ftp://sfu/whip", "sfu.example/whip", "https://", "https://u@sfu/",
                          "https://sfu:99999/", "https://sfu/whip#x"})
    EXPECT_TRUE(Contains(refused({"--whip-to", url}), "syncd: --whip-to: ")) << url;
  accepted({"--whip-to", "http://[::1]:8080/whip?room=1"});
}

TEST(DaemonOptions, UnknownPublishers) {
  EXPECT_EQ(refused({"--publisher", "test,bogus"}),
            "syncd: unknown publisher 'bogus' (available: test, shm, camera)\n");
  EXPECT_TRUE(Contains(refused({"--publisher", "Test"}), "unknown publisher 'Test'"));
  EXPECT_TRUE(Contains(refused({"--publisher", "shm camera"}), "unknown publisher 'shm camera'"));
}

TEST(DaemonOptions, BadAudioSources) {
  for (const char* spec :
       {"synthetic:0", "synthetic:65", "alsa:2", "jack:2@44100", "jack,tone", "synthetic:2@7999"})
    EXPECT_TRUE(Contains(refused({"--audio-source", spec}), "syncd: --audio-source: ")) << spec;
}

TEST(DaemonOptions, BadPatternSources) {
  for (const char* spec : {"pattern:axb", "noise", "pattern:1280x720", "pattern:0x720@30"})
    EXPECT_TRUE(Contains(refused({"--source", spec}), "syncd: ")) << spec;
}

// A command line with several faults names the first in syncd's order of checks: CLI11's, then
// the relay's, WHIP's, WHEP audio's, the audio source's, the publishers', --source's.
TEST(DaemonOptions, TheFirstFaultIsTheOneNamed) {
  EXPECT_TRUE(Contains(refused({"--publisher", "bogus", "--shm-slots", "1"}), "--shm-slots"));
  EXPECT_TRUE(
      Contains(refused({"--publisher", "bogus", "--relay-to", "h:1"}), "--peer-fingerprint"));
  EXPECT_TRUE(Contains(refused({"--audio-source", "alsa", "--whip-to", "http://x/", "--no-whep"}),
                       "--no-whep"));
  EXPECT_TRUE(
      Contains(refused({"--publisher", "bogus", "--audio-source", "alsa"}), "--audio-source"));
  EXPECT_TRUE(
      Contains(refused({"--source", "noise", "--publisher", "bogus"}), "unknown publisher"));
}
