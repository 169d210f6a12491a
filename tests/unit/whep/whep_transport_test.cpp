// WhepTransport on its relay thread, against a browser played by this test over a real UDP
// socket: ICE-lite checks (good, wrong password, unknown ufrag), a DTLS client handshake with the
// browser's own certificate, SRTP without MKI, access units depacketized back byte for byte, the
// IDR gate, NACK answered with the same bytes, PLI turned into a keyframe request, DELETE ending
// the session with an RTCP BYE; and with an audio tap, stereo Opus decoded back (continuous
// sequence and timestamps, each side on its side) with a sender report that maps the audio's
// capture clock to the same wall clock. The Chromium test (tests/browser/browser/whep.test.js) runs
// the same path with a real browser; this one runs under the sanitizers.
#include "whep/whep_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <opus/opus.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "audio/audio_tap.h"
#include "core/clock.h"
#include "media/frame_pool.h"
#include "rtp/h264_depacketizer.h"
#include "rtp/rtcp.h"
#include "rtp/rtp_packet.h"
#include "secure/certificate.h"
#include "secure/dtls_endpoint.h"
#include "secure/srtp_aead.h"
#include "transport/socket_address.h"
#include "transport/transport_thread.h"
#include "webrtc/stun.h"

namespace syncd::whep {
namespace {

constexpr char kUfrag[] = "abcd1234";
constexpr char kPassword[] = "0123456789abcdefghijklmn";
constexpr uint8_t kPayloadType = 102;
constexpr uint32_t kSsrc = 0x5eed1234;
constexpr uint64_t kSessionId = 77;
constexpr uint8_t kAudioPayloadType = 111;
constexpr uint32_t kAudioSsrc = 0xa0d10001;

struct MainSide {
  int keyframe_requests = 0;
  int frames_done = 0;
  int frames_sent = 0;
  std::vector<uint64_t> ended;
  std::vector<uint64_t> target_rates;
};

void on_main(transport::FromTransport& m, void* context) {
  auto* main = static_cast<MainSide*>(context);
  switch (m.kind) {
    case transport::FromTransport::Kind::kKeyframeRequest:
      ++main->keyframe_requests;
      break;
    case transport::FromTransport::Kind::kFrameDone:
      ++main->frames_done;
      main->frames_sent += m.sent;
      break;
    case transport::FromTransport::Kind::kPeerEnded:
      main->ended.push_back(m.sequence);
      break;
    case transport::FromTransport::Kind::kTargetRate:
      main->target_rates.push_back(m.target_bps);
      break;
    default:
      break;
  }
}

// The browser: one UDP socket on loopback.
struct Browser {
  int fd = -1;
  std::function<void()> idle;  // run between polls, as the main loop's other work would
  sockaddr_in to{};
  Browser(uint16_t port) {
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me);
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
  }
  ~Browser() { close(fd); }
  uint16_t port() const {
    sockaddr_in me{};
    socklen_t n = sizeof me;
    getsockname(fd, reinterpret_cast<sockaddr*>(&me), &n);
    return ntohs(me.sin_port);
  }
  void send(std::span<const uint8_t> d) {
    sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  // The next RTP datagram (sender reports skipped), or empty.
  std::vector<uint8_t> receive_rtp(uv_loop_t* loop, int timeout_ms = 2000) {
    for (;;) {
      std::vector<uint8_t> d = receive(loop, timeout_ms);
      if (d.size() < 2 || d[1] < 192 || d[1] > 223) return d;
    }
  }
  // One datagram within timeout_ms (running the main loop meanwhile), or empty.
  std::vector<uint8_t> receive(uv_loop_t* loop, int timeout_ms = 2000) {
    const uint64_t deadline = core::monotonic_ns() + uint64_t(timeout_ms) * 1'000'000;
    while (core::monotonic_ns() < deadline) {
      uv_run(loop, UV_RUN_NOWAIT);
      if (idle) idle();
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5) == 1) {
        std::vector<uint8_t> d(2048);
        const ssize_t n = recv(fd, d.data(), d.size(), 0);
        d.resize(n > 0 ? size_t(n) : 0);
        return d;
      }
    }
    return {};
  }
};

std::vector<uint8_t> binding_request(std::string_view password, std::string_view username,
                                     uint8_t tag) {
  webrtc::StunBindingRequest r;
  r.transaction_id.fill(tag);
  r.username = username;
  r.priority = 0x6e7f1eff;
  r.use_candidate = true;
  r.ice_controlling = true;
  r.tie_breaker = 0x1122334455667788ull;
  std::vector<uint8_t> out(webrtc::kMaxStunRequest);
  out.resize(webrtc::write_stun_binding_request(r, password, out));
  return out;
}

// An Annex B access unit: a delimiter, then one slice of `size` bytes (IDR or not).
std::vector<uint8_t> access_unit(size_t size, bool idr, std::mt19937& rng) {
  std::vector<uint8_t> au = {0, 0, 0, 1, 0x09, 0xF0, 0, 0, 0, 1, uint8_t(idr ? 0x65 : 0x41)};
  while (au.size() < size) {
    uint8_t b = uint8_t(rng());
    if (au[au.size() - 1] == 0 && au[au.size() - 2] == 0 && b <= 3) b = 4;
    au.push_back(b);
  }
  if (au.back() == 0) au.back() = 0x80;
  return au;
}

// The browser's side of DTLS (the client: our answer says setup:passive), driven to completion.
struct BrowserDtls {
  secure::DtlsContext context;
  secure::DtlsEndpoint endpoint;
  BrowserDtls(const secure::Identity& browser_id, const secure::Identity& syncd_id,
              Browser& browser)
      : context(browser_id, config()),
        endpoint(context, secure::DtlsRole::kClient, syncd_id.fingerprint,
                 [&browser](std::span<const uint8_t> out) { browser.send(out); }) {}
  static secure::DtlsConfig config() {
    secure::DtlsConfig dc;
    dc.initial_retransmit_ms = 200;
    return dc;
  }
  bool handshake(Browser& browser, uv_loop_t* loop) {
    endpoint.start(core::monotonic_ns());
    const std::array<uint8_t, 4> address{127, 0, 0, 1};
    for (int i = 0; i < 50; ++i) {
      std::vector<uint8_t> d = browser.receive(loop, 300);
      if (d.empty()) {
        endpoint.handle_timeout(core::monotonic_ns());
        continue;
      }
      if (endpoint.feed(d, address, core::monotonic_ns()) == secure::DtlsEvent::kHandshakeComplete)
        return true;
    }
    return false;
  }
};

struct WhepTransportTest : ::testing::Test {
  secure::Identity syncd_id, browser_id;
  std::shared_ptr<audio::AudioTap> tap;  // set before SetUp for a session with audio
  uv_loop_t loop{};
  MainSide main;
  std::unique_ptr<transport::TransportThread> thread;
  WhepTransport* transport = nullptr;
  std::shared_ptr<WhepSessionStats> stats = std::make_shared<WhepSessionStats>();

  void SetUp() override {
    ASSERT_TRUE(secure::generate_identity(syncd_id).ok());
    ASSERT_TRUE(secure::generate_identity(browser_id).ok());
    uv_loop_init(&loop);
    WhepTransportConfig config;
    config.dtls.initial_retransmit_ms = 200;
    config.keyframe_interval_ns = 1'000'000;
    auto t = std::make_unique<WhepTransport>(config, syncd_id, tap);
    transport = t.get();
    thread = std::make_unique<transport::TransportThread>(
        transport::TransportThreadConfig{"127.0.0.1", 0, "", 0}, std::move(t), &on_main, &main);
    std::string error;
    ASSERT_TRUE(thread->start(&loop, error)) << error;
    auto setup = new WhepSessionSetup;
    setup->id = kSessionId;
    setup->local_ufrag = kUfrag;
    setup->local_password = kPassword;
    setup->remote_ufrag = "brow";
    setup->remote_fingerprint = browser_id.fingerprint;
    setup->payload_type = kPayloadType;
    setup->ssrc = kSsrc;
    customize(*setup);
    setup->audio = tap != nullptr;
    setup->audio_payload_type = kAudioPayloadType;
    setup->audio_ssrc = kAudioSsrc;
    setup->stats = stats;
    transport::ToTransport m;
    m.kind = transport::ToTransport::Kind::kCommand;
    m.command = setup;
    ASSERT_TRUE(thread->send_to_relay(m));
  }
  // A fixture's changes to the session's setup (after the relay thread started).
  virtual void customize(WhepSessionSetup&) {}
  void TearDown() override {
    thread->stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }

  template <typename F>
  bool run_until(F done, uint64_t timeout_ns = 10'000'000'000ull) {
    const uint64_t deadline = core::monotonic_ns() + timeout_ns;
    while (!done() && core::monotonic_ns() < deadline) {
      uv_run(&loop, UV_RUN_NOWAIT);
      usleep(200);
    }
    return done();
  }

  void send_frame(media::FrameSlot& slot) {
    transport::ToTransport m;
    m.kind = transport::ToTransport::Kind::kFrame;
    m.slot = &slot;
    ASSERT_TRUE(thread->send_to_relay(m));
  }
};

TEST_F(WhepTransportTest, ABrowserChecksHandshakesAndReceivesAccessUnitsByteForByte) {
  Browser browser(thread->local_port());
  const std::string username = std::string(kUfrag) + ":brow";

  // ICE: a wrong password gets a 401, an unknown ufrag nothing, the right one a success that
  // tells the browser its own address.
  browser.send(binding_request("wrong-password-wrong-pwd", username, 1));
  std::vector<uint8_t> d = browser.receive(&loop);
  webrtc::StunBindingResponse response;
  ASSERT_EQ(webrtc::parse_stun_binding_response(d, response), webrtc::StunError::kNone);
  EXPECT_FALSE(response.success);
  EXPECT_EQ(response.error_code, 401);
  browser.send(binding_request(kPassword, "nobody:brow", 2));
  EXPECT_TRUE(browser.receive(&loop, 200).empty());
  browser.send(binding_request(kPassword, username, 3));
  d = browser.receive(&loop);
  ASSERT_EQ(webrtc::parse_stun_binding_response(d, response), webrtc::StunError::kNone);
  EXPECT_TRUE(response.success);
  EXPECT_EQ(response.transaction_id[0], 3);
  EXPECT_TRUE(webrtc::stun_integrity_ok(d, kPassword));
  ASSERT_TRUE(response.has_mapped_address);
  EXPECT_EQ(response.mapped.port, browser.port());
  EXPECT_EQ(stats->stun_requests.load(), 2u);
  EXPECT_EQ(stats->stun_refused.load(), 1u);
  EXPECT_EQ(transport->counters().stun_unknown_user.load(), 1u);

  // A frame before DTLS: dropped as not connected.
  std::mt19937 rng(5);
  std::vector<uint8_t> early = access_unit(3000, true, rng);
  media::FrameSlot slot;
  slot.pixels = early.data();
  slot.info.bytes = uint32_t(early.size());
  send_frame(slot);
  ASSERT_TRUE(browser.receive(&loop, 100).empty());
  ASSERT_TRUE(run_until([&] { return main.frames_done == 1; }));

  // DTLS, the browser as the client (our answer said setup:passive).
  BrowserDtls browser_dtls(browser_id, syncd_id, browser);
  ASSERT_TRUE(browser_dtls.handshake(browser, &loop));
  secure::DtlsEndpoint& dtls = browser_dtls.endpoint;
  ASSERT_TRUE(run_until([&] { return main.keyframe_requests >= 1; }));  // a new viewer's IDR
  secure::SrtpAeadContext receive, send;
  ASSERT_TRUE(receive.init(0, dtls.keys().server_write, false, /*with_mki=*/false));
  ASSERT_TRUE(send.init(0, dtls.keys().client_write, true, /*with_mki=*/false));

  // A P-frame first: held back (the browser could not decode it); then an IDR goes whole.
  std::vector<uint8_t> p_frame = access_unit(2500, false, rng);
  slot.pixels = p_frame.data();
  slot.info.bytes = uint32_t(p_frame.size());
  send_frame(slot);
  ASSERT_TRUE(browser.receive_rtp(&loop, 100).empty());
  std::vector<uint8_t> idr = access_unit(5000, true, rng);
  slot.pixels = idr.data();
  slot.info.bytes = uint32_t(idr.size());
  send_frame(slot);
  std::vector<uint8_t> rebuilt(16384);
  rtp::H264Depacketizer depacketizer;
  depacketizer.begin(rebuilt);
  std::vector<std::vector<uint8_t>> sent;
  for (bool marker = false; !marker;) {
    d = browser.receive_rtp(&loop);
    ASSERT_FALSE(d.empty());
    sent.push_back(d);
    size_t size = d.size();
    ASSERT_EQ(receive.unprotect_rtp(d.data(), size), secure::SrtpStatus::kOk);
    rtp::RtpPacketView packet;
    ASSERT_EQ(rtp::parse_rtp({d.data(), size}, packet), rtp::RtpParseError::kOk);
    EXPECT_EQ(packet.payload_type, kPayloadType);
    EXPECT_EQ(packet.ssrc, kSsrc);
    ASSERT_EQ(depacketizer.push(packet), rtp::DepacketizeError::kOk);
    marker = packet.marker;
  }
  ASSERT_EQ(depacketizer.finish(), rtp::DepacketizeError::kOk);
  const std::span<const uint8_t> au = depacketizer.access_unit();
  EXPECT_EQ(std::vector<uint8_t>(au.begin(), au.end()), idr);
  ASSERT_TRUE(run_until([&] { return main.frames_done == 3; }));
  EXPECT_EQ(main.frames_sent, 1);
  EXPECT_EQ(stats->frames_offered.load(), 3u);
  EXPECT_EQ(stats->frames_sent.load(), 1u);
  EXPECT_EQ(stats->frames_dropped[size_t(WhepDrop::kNotConnected)].load(), 1u);
  EXPECT_EQ(stats->frames_dropped[size_t(WhepDrop::kAwaitingKeyframe)].load(), 1u);

  // NACK of the frame's second packet: the same protected bytes come again. PLI: an IDR asked.
  rtp::RtpPacketView first;
  std::vector<uint8_t> plain = sent[1];
  size_t plain_size = plain.size();
  {
    secure::SrtpAeadContext again;
    ASSERT_TRUE(again.init(0, dtls.keys().server_write, false, false));
    ASSERT_EQ(again.unprotect_rtp(plain.data(), plain_size), secure::SrtpStatus::kOk);
    ASSERT_EQ(rtp::parse_rtp({plain.data(), plain_size}, first), rtp::RtpParseError::kOk);
  }
  const int keyframes_before = main.keyframe_requests;
  uint8_t rtcp[256];
  rtp::RtcpWriter writer({rtcp, sizeof rtcp - secure::kRtcpTrailerBytes});
  writer.add_receiver_report(0xb0b);
  const uint16_t lost = first.sequence;
  writer.add_nack(0xb0b, kSsrc, {&lost, 1});
  writer.add_pli(0xb0b, kSsrc);
  size_t rtcp_size = writer.size();
  ASSERT_EQ(send.protect_rtcp(rtcp, rtcp_size, sizeof rtcp), secure::SrtpStatus::kOk);
  browser.send({rtcp, rtcp_size});
  EXPECT_EQ(browser.receive_rtp(&loop), sent[1]);
  ASSERT_TRUE(run_until([&] { return main.keyframe_requests > keyframes_before; }));
  EXPECT_EQ(stats->packets_retransmitted.load(), 1u);
  EXPECT_EQ(stats->plis_received.load(), 1u);
  EXPECT_EQ(stats->rtcp_received.load(), 1u);

  // A forged RTCP packet is refused and counted.
  rtcp_size = writer.size();
  std::memcpy(rtcp, writer.packet().data(), rtcp_size);
  ASSERT_EQ(send.protect_rtcp(rtcp, rtcp_size, sizeof rtcp), secure::SrtpStatus::kOk);
  rtcp[10] ^= 1;
  browser.send({rtcp, rtcp_size});
  ASSERT_TRUE(run_until([&] { return stats->rtcp_refused.load() == 1; }));

  // Receiver reports set the encoder's rate (GCC's loss-based rule): 30 % lost takes it down
  // from the most (1 - 0.15), a second report within the update interval changes nothing, and
  // a clean one after it climbs back 8 %. Each change reaches the main loop once.
  const uint64_t most = WhepTransportConfig{}.max_bps;
  EXPECT_EQ(transport->counters().target_bps.load(), most);
  EXPECT_TRUE(main.target_rates.empty());
  auto send_report = [&](uint8_t fraction_lost) {
    rtp::ReportBlock block;
    block.source_ssrc = kSsrc;
    block.fraction_lost = fraction_lost;
    rtp::RtcpWriter rr({rtcp, sizeof rtcp - secure::kRtcpTrailerBytes});
    rr.add_receiver_report(0xb0b, {&block, 1});
    size_t size = rr.size();
    ASSERT_EQ(send.protect_rtcp(rtcp, size, sizeof rtcp), secure::SrtpStatus::kOk);
    browser.send({rtcp, size});
  };
  const uint64_t received_before = stats->rtcp_received.load();
  send_report(77);  // 30 %
  ASSERT_TRUE(run_until([&] { return main.target_rates.size() == 1; }));
  const uint64_t lowered = main.target_rates[0];
  EXPECT_NEAR(double(lowered), most * (1 - 0.5 * 77 / 256.0), 1000);
  EXPECT_EQ(stats->loss_based_bps.load(), lowered);
  EXPECT_EQ(transport->counters().target_bps.load(), lowered);
  send_report(0);  // within 300 ms of the change: too soon
  ASSERT_TRUE(run_until([&] { return stats->rtcp_received.load() == received_before + 2; }));
  usleep(350'000);
  send_report(0);
  ASSERT_TRUE(run_until([&] { return main.target_rates.size() == 2; }));
  EXPECT_NEAR(double(main.target_rates[1]), lowered * 1.08, 1000);
  EXPECT_EQ(transport->counters().target_changes.load(), 2u);

  // DELETE: the session ends, says BYE, and the main loop hears of it.
  transport::ToTransport m;
  m.kind = transport::ToTransport::Kind::kCommand;
  auto* end = new WhepSessionEnd;
  end->id = kSessionId;
  m.command = end;
  ASSERT_TRUE(thread->send_to_relay(m));
  ASSERT_TRUE(run_until([&] { return !main.ended.empty(); }));
  EXPECT_EQ(main.ended[0], kSessionId);
  EXPECT_EQ(stats->end.load(), uint32_t(WhepEnd::kDeleted));
  bool goodbye = false;
  for (d = browser.receive(&loop, 500); !d.empty() && !goodbye; d = browser.receive(&loop, 500)) {
    size_t size = d.size();
    if (d.size() >= 2 && d[1] >= 192 && d[1] <= 223 &&
        receive.unprotect_rtcp(d.data(), size) == secure::SrtpStatus::kOk) {
      struct Bye : rtp::RtcpSink {
        bool seen = false;
        void on_goodbye(const rtp::Goodbye&) override { seen = true; }
      } sink;
      rtp::parse_rtcp({d.data(), size}, sink);
      goodbye = sink.seen;
    }
  }
  EXPECT_TRUE(goodbye);
}

// The audio service's side of a tap, played by the test: a two-channel capture ring written at
// real time (left a 440 Hz tone, right silent) with CLOCK_MONOTONIC timestamps, copied into the
// tap while the egress wants it, as AudioService::feed_taps does on the loop thread.
struct CaptureSource {
  static constexpr uint32_t kRate = 48000;
  std::vector<float> samples = std::vector<float>(kRate * 2);
  std::vector<audio::CaptureBlock> blocks =
      std::vector<audio::CaptureBlock>(audio::CaptureRing::blocks_for(kRate));
  audio::CaptureRing ring{samples, blocks, 2, kRate};
  uint64_t start_ns = core::monotonic_ns();
  uint64_t written = 0;

  // Writes the frames due by now (blocks of 240, 5 ms), then feeds the tap.
  void pump(audio::AudioTap& tap) {
    const uint64_t due = (core::monotonic_ns() - start_ns) * kRate / 1'000'000'000ull;
    while (written + 240 <= due) {
      audio::RingSpan span = ring.begin_write(240);
      if (span.total() == 0) break;
      uint64_t index = written;
      for (int part = 0; part < 2; ++part)
        for (uint32_t f = 0; f < span.frames[part]; ++f, ++index) {
          span.part[part][2 * f] = 0.5f * float(std::sin(2 * M_PI * 440.0 * double(index) / kRate));
          span.part[part][2 * f + 1] = 0.0f;
        }
      ring.commit(240, start_ns + written * 1'000'000'000ull / kRate);
      written += 240;
    }
    if (tap.wanted()) tap.write(ring.peek(1u << 20), 2);
    ring.consume_all();
  }
  // The capture index of CLOCK_MONOTONIC time `ns`.
  double index_at(uint64_t ns) const { return double(ns - start_ns) * kRate / 1e9; }
};

struct WhepAudioTest : WhepTransportTest {
  WhepAudioTest() { tap = std::make_shared<audio::AudioTap>(0, 1, 48000, 48000); }
};

TEST_F(WhepAudioTest, StereoOpusArrivesContinuousWithASenderReportOnTheSameWallClock) {
  CaptureSource source;
  Browser browser(thread->local_port());
  browser.idle = [&] { source.pump(*tap); };
  browser.send(binding_request(kPassword, std::string(kUfrag) + ":brow", 1));
  std::vector<uint8_t> d = browser.receive(&loop);
  ASSERT_FALSE(d.empty());
  BrowserDtls browser_dtls(browser_id, syncd_id, browser);
  ASSERT_TRUE(browser_dtls.handshake(browser, &loop));
  secure::SrtpAeadContext receive;
  ASSERT_TRUE(receive.init(0, browser_dtls.endpoint.keys().server_write, false, false));

  int error = 0;
  OpusDecoder* decoder = opus_decoder_create(48000, 2, &error);
  ASSERT_EQ(error, OPUS_OK);
  std::vector<float> pcm(5760 * 2);
  double left = 0, right = 0;
  size_t packets = 0, decoded_frames = 0, markers = 0;
  uint16_t last_sequence = 0;
  uint32_t last_timestamp = 0;
  uint64_t last_arrival_ns = 0;
  bool sequence_ok = true, timestamp_ok = true;
  // The audio's sender report, with the capture index the test's clock gives its wall time.
  bool have_audio_sr = false, have_video_sr = false;
  uint32_t sr_rtp = 0;
  double sr_capture_index = 0;
  uint64_t audio_sr_ntp = 0, video_sr_ntp = 0;
  const uint64_t wall_minus_mono = transport::wall_clock_ntp_ns() - core::monotonic_ns();

  const uint64_t deadline = core::monotonic_ns() + 10'000'000'000ull;
  while ((packets < 100 || !have_audio_sr) && core::monotonic_ns() < deadline) {
    d = browser.receive(&loop, 500);
    if (d.size() < 12) continue;
    size_t size = d.size();
    if (d[1] >= 192 && d[1] <= 223) {  // SRTCP
      if (receive.unprotect_rtcp(d.data(), size) != secure::SrtpStatus::kOk) continue;
      struct Reports : rtp::RtcpSink {
        std::vector<rtp::SenderReport> reports;
        void on_sender_report(const rtp::SenderReport& sr) override { reports.push_back(sr); }
      } sink;
      rtp::parse_rtcp({d.data(), size}, sink);
      for (const rtp::SenderReport& sr : sink.reports) {
        if (sr.sender_ssrc == kSsrc) {
          have_video_sr = true;
          video_sr_ntp = sr.info.ntp_timestamp;
        }
        if (sr.sender_ssrc == kAudioSsrc && packets > 0) {
          have_audio_sr = true;
          audio_sr_ntp = sr.info.ntp_timestamp;
          sr_rtp = sr.info.rtp_timestamp;
          sr_capture_index =
              source.index_at(rtp::ns_from_ntp(sr.info.ntp_timestamp) - wall_minus_mono);
        }
      }
      continue;
    }
    ASSERT_EQ(receive.unprotect_rtp(d.data(), size), secure::SrtpStatus::kOk);
    rtp::RtpPacketView packet;
    ASSERT_EQ(rtp::parse_rtp({d.data(), size}, packet), rtp::RtpParseError::kOk);
    ASSERT_EQ(packet.payload_type, kAudioPayloadType);  // no video is offered here
    ASSERT_EQ(packet.ssrc, kAudioSsrc);
    if (packets > 0) {
      sequence_ok &= packet.sequence == uint16_t(last_sequence + 1);
      timestamp_ok &= packet.timestamp == last_timestamp + 960;
    }
    markers += packet.marker;
    last_sequence = packet.sequence;
    last_timestamp = packet.timestamp;
    last_arrival_ns = core::monotonic_ns();
    ++packets;
    ASSERT_EQ(opus_packet_get_nb_channels(packet.payload.data()), 2);
    const int n = opus_decode_float(decoder, packet.payload.data(),
                                    opus_int32(packet.payload.size()), pcm.data(), 5760, 0);
    ASSERT_EQ(n, 960);
    decoded_frames += size_t(n);
    if (packets <= 5) continue;  // past the decoder's start-up
    for (int f = 0; f < n; ++f) {
      left += double(pcm[2 * f]) * pcm[2 * f];
      right += double(pcm[2 * f + 1]) * pcm[2 * f + 1];
    }
  }
  opus_decoder_destroy(decoder);
  ASSERT_GE(packets, 100u);
  EXPECT_TRUE(sequence_ok) << "a sequence number skipped";
  EXPECT_TRUE(timestamp_ok) << "the RTP timestamps did not step by one 20 ms frame";
  EXPECT_EQ(markers, 1u);  // the first packet only: the capture never paused
  const double left_rms = std::sqrt(left / double(decoded_frames - 5 * 960));
  EXPECT_GT(left_rms, 0.2);  // the tone: 0.5 peak, 0.35 RMS
  EXPECT_LT(left_rms, 0.5);
  EXPECT_GT(left, 1000 * right) << "the sides are swapped or mixed";

  // The sender report: audio's and video's from one reading of the wall clock, and the audio's
  // RTP time names the capture index of that wall time. Then the newest packet's capture time,
  // through the report, is a little before it arrived: the 20 ms frame, the 10 ms tick and the
  // test's own 5 ms blocks, plus scheduling on a loaded machine.
  ASSERT_TRUE(have_audio_sr);
  ASSERT_TRUE(have_video_sr);
  EXPECT_EQ(audio_sr_ntp, video_sr_ntp);
  const double offset = double(sr_rtp) - sr_capture_index;  // the session's timestamp offset
  const double last_index = double(last_timestamp) - offset;
  // mod 2^32 (the offset is random): bring the difference into range.
  double behind_frames = source.index_at(last_arrival_ns) - last_index;
  behind_frames = std::remainder(behind_frames, 4294967296.0);
  std::printf("capture to arrival: %.1f ms\n", behind_frames / 48.0);
  EXPECT_GT(behind_frames, 960 - 48) << "captured after it arrived?";
  EXPECT_LT(behind_frames, 48000 * 0.5) << "more than 500 ms from capture to arrival";

  // Every frame offered to the session was sent (it was connected the whole time).
  ASSERT_TRUE(run_until([&] { return stats->audio_frames_sent.load() >= packets; }));
  EXPECT_EQ(stats->audio_frames_offered.load(),
            stats->audio_frames_sent.load() +
                stats->audio_frames_dropped[size_t(WhepDrop::kNotConnected)].load() +
                stats->audio_frames_dropped[size_t(WhepDrop::kSendFailed)].load());
  EXPECT_EQ(stats->audio_frames_dropped[size_t(WhepDrop::kSendFailed)].load(), 0u);
  EXPECT_EQ(transport->audio()->counters().encode_errors.load(), 0u);
  EXPECT_EQ(transport->audio()->counters().capture_gaps.load(), 0u);
  EXPECT_TRUE(tap->wanted());
}

// WHIP: syncd offered and the SFU (this test) answered setup:passive. syncd is the controlling
// ICE agent (it checks the SFU's candidate, nominating, signed with the SFU's password) and the
// DTLS client; a response that does not authenticate is not taken; then media flows protected
// with the client's key.
struct WhipTransportTest : WhepTransportTest {
  static constexpr char kSfuPassword[] = "sfu-password-0123456789";
  std::unique_ptr<Browser> sfu;
  void customize(WhepSessionSetup& setup) override {
    sfu = std::make_unique<Browser>(thread->local_port());
    setup.ice_controlling = true;
    setup.remote_password = kSfuPassword;
    setup.dtls_role = secure::DtlsRole::kClient;
    sockaddr_in candidate{};
    candidate.sin_family = AF_INET;
    candidate.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    candidate.sin_port = htons(sfu->port());
    sockaddr_storage storage{};
    std::memcpy(&storage, &candidate, sizeof candidate);
    // A candidate nobody listens on first: checks go to both, the one that answers wins.
    sockaddr_in dead = candidate;
    dead.sin_port = htons(9);
    sockaddr_storage dead_storage{};
    std::memcpy(&dead_storage, &dead, sizeof dead);
    setup.remote_candidates = {dead_storage, storage};
  }
};

TEST_F(WhipTransportTest, SyncdChecksNominatesAndHandshakesAsTheDtlsClient) {
  Browser& s = *sfu;
  webrtc::StunAddress syncd_address;
  std::memcpy(syncd_address.ip.data(), "\x7f\x00\x00\x01", 4);
  syncd_address.port = thread->local_port();

  // syncd's check: to our candidate, signed with our password, controlling and nominating.
  std::vector<uint8_t> d = s.receive(&loop);
  webrtc::StunBindingRequest check;
  ASSERT_EQ(webrtc::parse_stun_binding_request(d, check), webrtc::StunError::kNone);
  EXPECT_EQ(check.username, std::string("brow:") + kUfrag);
  EXPECT_TRUE(check.ice_controlling);
  EXPECT_TRUE(check.use_candidate);
  EXPECT_TRUE(webrtc::stun_integrity_ok(d, kSfuPassword));
  EXPECT_FALSE(webrtc::stun_integrity_ok(d, kPassword));

  // A response signed with the wrong key is not taken.
  uint8_t response[webrtc::kMaxStunResponse];
  size_t n = webrtc::write_stun_binding_success(check.transaction_id, syncd_address,
                                                "not-the-sfu-password-xx", response);
  s.send({response, n});
  ASSERT_TRUE(run_until([&] { return transport->counters().stun_unmatched.load() == 1; }));
  EXPECT_EQ(stats->state.load(), uint32_t(WhepState::kWaitingForIce));

  // The right one: syncd takes the pair and, as the DTLS client, sends its ClientHello.
  d = s.receive(&loop);  // a later check (they repeat until answered)
  ASSERT_EQ(webrtc::parse_stun_binding_request(d, check), webrtc::StunError::kNone);
  n = webrtc::write_stun_binding_success(check.transaction_id, syncd_address, kSfuPassword,
                                         response);
  s.send({response, n});
  secure::DtlsContext context(browser_id, BrowserDtls::config());
  secure::DtlsEndpoint dtls(context, secure::DtlsRole::kServer, syncd_id.fingerprint,
                            [&s](std::span<const uint8_t> out) { s.send(out); });
  const std::array<uint8_t, 4> address{127, 0, 0, 1};
  bool complete = false;
  for (int i = 0; i < 100 && !complete; ++i) {
    d = s.receive(&loop, 300);
    if (d.empty() || webrtc::looks_like_stun(d)) continue;  // consent checks come later
    complete = dtls.feed(d, address, core::monotonic_ns()) == secure::DtlsEvent::kHandshakeComplete;
  }
  ASSERT_TRUE(complete);
  ASSERT_TRUE(run_until([&] { return stats->state.load() == uint32_t(WhepState::kConnected); }));
  EXPECT_GE(stats->checks_sent.load(), 2u);
  EXPECT_EQ(stats->checks_answered.load(), 1u);

  // Media, protected with the client's key (syncd is the client here).
  secure::SrtpAeadContext receive;
  ASSERT_TRUE(receive.init(0, dtls.keys().client_write, false, /*with_mki=*/false));
  std::mt19937 rng(9);
  std::vector<uint8_t> idr = access_unit(4000, true, rng);
  media::FrameSlot slot;
  slot.pixels = idr.data();
  slot.info.bytes = uint32_t(idr.size());
  send_frame(slot);
  d = s.receive_rtp(&loop);
  while (!d.empty() && webrtc::looks_like_stun(d)) d = s.receive_rtp(&loop);
  ASSERT_FALSE(d.empty());
  size_t size = d.size();
  ASSERT_EQ(receive.unprotect_rtp(d.data(), size), secure::SrtpStatus::kOk);
  rtp::RtpPacketView packet;
  ASSERT_EQ(rtp::parse_rtp({d.data(), size}, packet), rtp::RtpParseError::kOk);
  EXPECT_EQ(packet.ssrc, kSsrc);
  // The frame comes back (its memory is the test's until then), sent.
  ASSERT_TRUE(run_until([&] { return main.frames_done == 1; }));
  EXPECT_EQ(main.frames_sent, 1);
}

}  // namespace
}  // namespace syncd::whep
