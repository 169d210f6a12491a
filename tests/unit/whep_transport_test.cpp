// WhepTransport on its relay thread, against a browser played by this test over a real UDP
// socket: ICE-lite checks (good, wrong password, unknown ufrag), a DTLS client handshake with the
// browser's own certificate, SRTP without MKI, access units depacketized back byte for byte, the
// IDR gate, NACK answered with the same bytes, PLI turned into a keyframe request, DELETE ending
// the session with an RTCP BYE. The Chromium test (tests/browser/browser/whep.test.js) runs the
// same path with a real browser; this one runs under the sanitizers.
#include "whep/whep_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/clock.h"
#include "media/frame_pool.h"
#include "relay/relay_thread.h"
#include "rtp/h264_depacketizer.h"
#include "rtp/rtcp.h"
#include "rtp/rtp_packet.h"
#include "secure/certificate.h"
#include "secure/dtls_endpoint.h"
#include "secure/srtp_aead.h"
#include "webrtc/stun.h"

namespace syncd::whep {
namespace {

constexpr char kUfrag[] = "abcd1234";
constexpr char kPassword[] = "0123456789abcdefghijklmn";
constexpr uint8_t kPayloadType = 102;
constexpr uint32_t kSsrc = 0x5eed1234;
constexpr uint64_t kSessionId = 77;

struct MainSide {
  int keyframe_requests = 0;
  int frames_done = 0;
  int frames_sent = 0;
  std::vector<uint64_t> ended;
};

void on_main(relay::FromRelay& m, void* context) {
  auto* main = static_cast<MainSide*>(context);
  switch (m.kind) {
    case relay::FromRelay::Kind::kKeyframeRequest:
      ++main->keyframe_requests;
      break;
    case relay::FromRelay::Kind::kFrameDone:
      ++main->frames_done;
      main->frames_sent += m.sent;
      break;
    case relay::FromRelay::Kind::kPeerEnded:
      main->ended.push_back(m.sequence);
      break;
    default:
      break;
  }
}

// The browser: one UDP socket on loopback.
struct Browser {
  int fd = -1;
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

struct WhepTransportTest : ::testing::Test {
  secure::Identity syncd_id, browser_id;
  uv_loop_t loop{};
  MainSide main;
  std::unique_ptr<relay::RelayThread> thread;
  WhepTransport* transport = nullptr;
  std::shared_ptr<WhepSessionStats> stats = std::make_shared<WhepSessionStats>();

  void SetUp() override {
    ASSERT_TRUE(secure::generate_identity(syncd_id).ok());
    ASSERT_TRUE(secure::generate_identity(browser_id).ok());
    uv_loop_init(&loop);
    WhepTransportConfig config;
    config.dtls.initial_retransmit_ms = 200;
    config.keyframe_interval_ns = 1'000'000;
    auto t = std::make_unique<WhepTransport>(config, syncd_id);
    transport = t.get();
    thread = std::make_unique<relay::RelayThread>(relay::RelayThreadConfig{"127.0.0.1", 0, "", 0},
                                                  std::move(t), &on_main, &main);
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
    setup->stats = stats;
    relay::ToRelay m;
    m.kind = relay::ToRelay::Kind::kCommand;
    m.command = setup;
    ASSERT_TRUE(thread->send_to_relay(m));
  }
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
    relay::ToRelay m;
    m.kind = relay::ToRelay::Kind::kFrame;
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
  secure::DtlsConfig dc;
  dc.initial_retransmit_ms = 200;
  secure::DtlsContext context(browser_id, dc);
  secure::DtlsEndpoint dtls(context, secure::DtlsRole::kClient, syncd_id.fingerprint,
                            [&](std::span<const uint8_t> out) { browser.send(out); });
  dtls.start(core::monotonic_ns());
  const std::array<uint8_t, 4> address{127, 0, 0, 1};
  bool complete = false;
  for (int i = 0; i < 50 && !complete; ++i) {
    d = browser.receive(&loop, 300);
    if (d.empty()) {
      dtls.handle_timeout(core::monotonic_ns());
      continue;
    }
    complete = dtls.feed(d, address, core::monotonic_ns()) == secure::DtlsEvent::kHandshakeComplete;
  }
  ASSERT_TRUE(complete);
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

  // DELETE: the session ends, says BYE, and the main loop hears of it.
  relay::ToRelay m;
  m.kind = relay::ToRelay::Kind::kCommand;
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

}  // namespace
}  // namespace syncd::whep
