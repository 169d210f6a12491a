// The relay session end to end on one machine: two relay threads over loopback UDP, a sender
// session (DTLS client) and a receiver session (DTLS server), each with its own identity and the
// other's fingerprint. An encoded stream's access units go from one registry to the other
// through RelayPublisher, the sessions (packetize, FEC, pace, SRTP; unprotect, jitter buffer,
// depacketize) and RelaySource, where a test publisher checks every byte against the producer's
// content hash. Built under TSan in CI (scripts/test.sh).
#include "relay/relay_session.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "core/clock.h"
#include "media/publishers/test_publisher.h"
#include "media/stream_registry.h"
#include "relay/relay_publisher.h"
#include "relay/relay_source.h"

using namespace syncd;
using namespace syncd::relay;

namespace {

struct Ends {
  RelayPublisher* publisher = nullptr;
  RelaySource* source = nullptr;
  int peer_ended = 0;
};

void on_receiver_message(FromRelay& m, void* ctx) {
  auto* e = static_cast<Ends*>(ctx);
  switch (m.kind) {
    case FromRelay::Kind::kDescription:
      e->source->on_description(m.description);
      break;
    case FromRelay::Kind::kFrameIn:
      e->source->on_frame_in(m, core::monotonic_ns());
      break;
    case FromRelay::Kind::kPeerEnded:
      ++e->peer_ended;
      e->source->on_peer_ended();
      break;
    case FromRelay::Kind::kFrameDone:
      break;
  }
}

void on_sender_message(FromRelay& m, void* ctx) {
  if (m.kind == FromRelay::Kind::kFrameDone) static_cast<Ends*>(ctx)->publisher->on_frame_done(m);
}

struct Pair {
  secure::Identity sender_id, receiver_id;
  uv_loop_t loop{};
  Ends ends;
  std::unique_ptr<RelayThread> receiving, sending;
  RelaySession* sender_session = nullptr;
  RelaySession* receiver_session = nullptr;

  explicit Pair(uint64_t rekey_interval_ns, secure::Fingerprint* wrong_peer = nullptr) {
    EXPECT_TRUE(secure::generate_identity(sender_id).ok());
    EXPECT_TRUE(secure::generate_identity(receiver_id).ok());
    uv_loop_init(&loop);
    RelaySessionConfig rc;
    rc.sender = false;
    rc.peer = sender_id.fingerprint;
    rc.dtls.initial_retransmit_ms = 200;
    auto receiver = std::make_unique<RelaySession>(rc, receiver_id);
    receiver_session = receiver.get();
    receiving = std::make_unique<RelayThread>(RelayThreadConfig{"127.0.0.1", 0, "", 0},
                                              std::move(receiver), &on_receiver_message, &ends);
    std::string error;
    EXPECT_TRUE(receiving->start(&loop, error)) << error;
    RelaySessionConfig sc;
    sc.sender = true;
    sc.peer = wrong_peer ? *wrong_peer : receiver_id.fingerprint;
    sc.keys.rekey_interval_ns = rekey_interval_ns;
    sc.dtls.initial_retransmit_ms = 200;
    auto sender = std::make_unique<RelaySession>(sc, sender_id);
    sender_session = sender.get();
    sending = std::make_unique<RelayThread>(
        RelayThreadConfig{"0.0.0.0", 0, "127.0.0.1", receiving->local_port()}, std::move(sender),
        &on_sender_message, &ends);
    EXPECT_TRUE(sending->start(&loop, error)) << error;
  }
  ~Pair() {
    sending->stop();
    receiving->stop();
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
  bool connected() {
    return sender_session->stats().state.load() == uint32_t(RelaySession::State::kConnected) &&
           receiver_session->stats().state.load() == uint32_t(RelaySession::State::kConnected);
  }
};

// An Annex B access unit: a delimiter, then one slice NAL of `size` random bytes.
void fill_access_unit(uint8_t* out, size_t size, std::mt19937& rng) {
  const uint8_t aud[] = {0, 0, 0, 1, 0x09, 0xF0, 0, 0, 0, 1, 0x65};
  std::memcpy(out, aud, sizeof(aud));
  for (size_t i = sizeof(aud); i < size; ++i) {
    uint8_t b = uint8_t(rng());
    // No start code inside the slice: its bytes would split it (emulation prevention's job).
    if (i >= 2 && out[i - 1] == 0 && out[i - 2] == 0 && b <= 3) b = 4;
    out[i] = b;
  }
  // A NAL unit never ends in a zero byte (its RBSP trailing bits end in a one): zeros there
  // would be trailing_zero_8bits of the byte stream, which belong to no NAL unit.
  if (out[size - 1] == 0) out[size - 1] = 0x80;
}

}  // namespace

TEST(RelaySession, AccessUnitsCrossEncryptedAndVerifiedAcrossReKeys) {
  Pair pair(1'000'000'000ull);  // a re-key every second
  media::StreamRegistry sender_registry;
  auto publisher = std::make_unique<RelayPublisher>(*pair.sending, "");
  pair.ends.publisher = publisher.get();
  sender_registry.add_publisher(std::move(publisher));
  media::StreamRegistry receiver_registry;
  auto verifier = std::make_unique<media::TestPublisher>();
  media::TestPublisher* test = verifier.get();
  receiver_registry.add_publisher(std::move(verifier));
  RelaySource source(receiver_registry, *pair.receiving);
  pair.ends.source = &source;

  ASSERT_TRUE(pair.run_until([&] { return pair.connected(); }));
  media::OpenError open_error;
  media::StreamConfig au{"relayed", 640, 360, media::PixelFormat::kH264, 60, 8};
  media::Stream* stream = sender_registry.open(au, 1, open_error);
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(pair.run_until([&] { return source.stream() != nullptr; }));

  std::mt19937 rng(3);
  constexpr uint64_t kFrames = 240;  // 4 s at 60 fps: three or four re-keys
  const uint64_t start = core::monotonic_ns();
  for (uint64_t seq = 1; seq <= kFrames; ++seq) {
    const size_t size = 200 + rng() % 30000;
    media::IngestRequest r;
    r.stream_id = stream->id();
    r.owner = 1;
    r.flags = media::frame_flag::kHasContentHash;
    r.sequence = seq;
    r.payload_bytes = size;
    r.start_ns = core::monotonic_ns();
    media::IngestRefusal why;
    media::SlotLease lease = sender_registry.begin(r, why);
    ASSERT_TRUE(lease) << seq;
    fill_access_unit(lease.pixels(), size, rng);
    lease.info().content_hash = XXH3_64bits(lease.pixels(), size);
    ASSERT_TRUE(lease.commit(size, core::monotonic_ns()));
    // Paced at 60 fps, as a producer is.
    const uint64_t due = start + seq * 16'666'667ull;
    pair.run_until([&] { return core::monotonic_ns() >= due; });
  }
  const RelaySessionStats& s = pair.sender_session->stats();
  const RelaySessionStats& r = pair.receiver_session->stats();
  ASSERT_TRUE(pair.run_until([&] { return source.counters().frames_in >= kFrames; }))
      << "frames in " << source.counters().frames_in << ", sender: epoch " << s.send_epoch
      << " handshakes " << s.handshakes << " rekeys " << s.rekeys << " dtls failures "
      << s.dtls_failures << " packets " << s.packets_sent << " frames " << s.frames_sent
      << "; receiver: handshakes " << r.handshakes << " epoch " << r.send_epoch
      << " srtp refused " << r.srtp_refused << " (auth " << r.srtp_auth_failed << ", replay "
      << r.srtp_replayed << ") packets " << r.packets_received << " foreign "
      << r.foreign_datagrams << " dtls failures " << r.dtls_failures << " frames "
      << r.frames_complete << " dropped " << r.frames_dropped;
  const media::TestVerdicts* v = test->verdicts(source.stream()->id());
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verified, kFrames);  // every byte of every access unit
  EXPECT_EQ(v->verify_failures(), 0u);
  EXPECT_EQ(v->sequence_gaps, 0u);
  EXPECT_GE(s.rekeys.load(), 2u);
  EXPECT_GE(s.handshakes.load(), 3u);
  EXPECT_GE(s.send_epoch.load(), 2u);  // the sender did move to newer keys
  EXPECT_EQ(r.srtp_refused.load(), 0u);
  EXPECT_EQ(r.frames_dropped.load(), 0u);
  EXPECT_EQ(r.frames_malformed.load(), 0u);
  EXPECT_GT(s.fec_packets_sent.load() + s.packets_sent.load(), kFrames);
  EXPECT_GT(source.counters().transport.count(), 0u);

  // The stream closes: the receiver hears of it (RTCP BYE) and closes its own.
  sender_registry.close(stream);
  ASSERT_TRUE(pair.run_until([&] { return pair.ends.peer_ended > 0; }));
  EXPECT_EQ(source.stream(), nullptr);
}

TEST(RelaySession, AWrongFingerprintIsRefused) {
  secure::Fingerprint wrong{};
  wrong.sha256[0] = 1;
  Pair pair(300'000'000'000ull, &wrong);
  ASSERT_TRUE(pair.run_until([&] {
    return pair.sender_session->stats().state.load() == uint32_t(RelaySession::State::kFailed);
  }));
  EXPECT_GE(pair.sender_session->stats().dtls_failures.load(), 1u);
  EXPECT_NE(pair.receiver_session->stats().state.load(), uint32_t(RelaySession::State::kConnected));
}
