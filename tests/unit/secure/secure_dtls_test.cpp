#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <set>
#include <thread>

#include "secure/dtls_associations.h"
#include "secure/dtls_endpoint.h"
#include "secure/webrtc_srtp.h"
#include "secure_test_util.h"

namespace syncd::secure {
namespace {

using testing::Datagram;
using testing::DtlsPair;

bool has(const std::vector<DtlsEvent>& events, DtlsEvent event) {
  return std::find(events.begin(), events.end(), event) != events.end();
}

TEST(SecureDtls, HandshakeInMemoryGivesBothSidesTheSameKeysCrosswise) {
  DtlsPair pair;
  ASSERT_TRUE(pair.client_context.ok());
  EXPECT_EQ(pair.server->state(), DtlsState::kListening);
  pair.client->start(0);
  pair.pump();
  ASSERT_TRUE(pair.connected()) << to_string(pair.client->failure()) << " / "
                                << to_string(pair.server->failure());
  EXPECT_EQ(std::count(pair.client_events.begin(), pair.client_events.end(),
                       DtlsEvent::kHandshakeComplete),
            1);
  EXPECT_EQ(std::count(pair.server_events.begin(), pair.server_events.end(),
                       DtlsEvent::kHandshakeComplete),
            1);
  // RFC 5764 4.2: the same exporter output on both sides, so each side's write key is the
  // other's read key.
  EXPECT_EQ(pair.client->keys().client_write, pair.server->keys().client_write);
  EXPECT_EQ(pair.client->keys().server_write, pair.server->keys().server_write);
  EXPECT_NE(pair.client->keys().client_write, pair.client->keys().server_write);
  SrtpMasterKey zero;
  EXPECT_NE(pair.client->keys().client_write, zero);
  EXPECT_EQ(pair.client->peer_fingerprint_seen(), testing::server_identity().fingerprint);
  EXPECT_EQ(pair.server->peer_fingerprint_seen(), testing::client_identity().fingerprint);
  // The MTU holds for every datagram of the handshake, certificates included.
  EXPECT_LE(pair.client->counters().largest_datagram_out, 1200u);
  EXPECT_LE(pair.server->counters().largest_datagram_out, 1200u);
  EXPECT_GT(pair.server->counters().largest_datagram_out, 0u);
}

// WebRTC peers (webrtc_srtp.h): GCM when both have it, AES-CM-SHA1-80 with a peer that has only
// that, and nothing with a peer offering AES-CM to a GCM-only end (the relay's).
TEST(SecureDtls, AWebRtcEndChoosesGcmFirstAndTakesAesCmFromAPeerWithoutGcm) {
  using Profiles = DtlsConfig::SrtpProfiles;
  auto config = [](Profiles p) {
    DtlsConfig c;
    c.srtp_profiles = p;
    return c;
  };
  {
    DtlsPair pair(config(Profiles::kGcmOrCm), config(Profiles::kGcmOrCm));
    pair.client->start(0);
    pair.pump();
    ASSERT_TRUE(pair.connected());
    EXPECT_EQ(pair.client->keys().profile, SrtpProfile::kAeadAes128Gcm);
  }
  {
    DtlsPair pair(config(Profiles::kCmOnly), config(Profiles::kGcmOrCm));
    pair.client->start(0);
    pair.pump();
    ASSERT_TRUE(pair.connected()) << to_string(pair.server->failure());
    const SrtpKeyMaterial& c = pair.client->keys();
    const SrtpKeyMaterial& s = pair.server->keys();
    EXPECT_EQ(c.profile, SrtpProfile::kAes128CmSha1_80);
    EXPECT_EQ(s.profile, SrtpProfile::kAes128CmSha1_80);
    EXPECT_EQ(c.client_write_cm, s.client_write_cm);
    EXPECT_EQ(c.server_write_cm, s.server_write_cm);
    EXPECT_NE(c.client_write_cm, c.server_write_cm);
    // Both directions' SRTP round-trip between the two ends (libsrtp2 under WebRtcSrtp).
    WebRtcSrtp client_srtp, server_srtp;
    ASSERT_TRUE(client_srtp.init(c, /*server=*/false));
    ASSERT_TRUE(server_srtp.init(s, /*server=*/true));
    uint8_t rtp[200] = {0x80, 96, 0x12, 0x34, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef};
    for (size_t i = 12; i < 112; ++i) rtp[i] = uint8_t(i);
    uint8_t sent[200];
    std::memcpy(sent, rtp, sizeof rtp);
    size_t size = 112;
    ASSERT_EQ(server_srtp.protect_rtp(sent, size, sizeof sent), SrtpStatus::kOk);
    EXPECT_EQ(size, 122u);  // the 80-bit tag
    EXPECT_NE(std::memcmp(sent + 12, rtp + 12, 100), 0);
    ASSERT_EQ(client_srtp.unprotect_rtp(sent, size), SrtpStatus::kOk);
    EXPECT_EQ(size, 112u);
    EXPECT_EQ(std::memcmp(sent, rtp, 112), 0);
    // RTCP the other way (an empty RR), and a forged byte refused.
    uint8_t rr[64] = {0x80, 201, 0, 1, 0, 0, 0, 2};
    size = 8;
    ASSERT_EQ(client_srtp.protect_rtcp(rr, size, sizeof rr), SrtpStatus::kOk);
    EXPECT_EQ(size, 22u);  // E + index, tag
    uint8_t forged[64];
    std::memcpy(forged, rr, size);
    forged[9] ^= 1;
    size_t forged_size = size;
    EXPECT_EQ(server_srtp.unprotect_rtcp(forged, forged_size), SrtpStatus::kAuthFailed);
    ASSERT_EQ(server_srtp.unprotect_rtcp(rr, size), SrtpStatus::kOk);
    EXPECT_EQ(size, 8u);
  }
  {
    DtlsPair pair(config(Profiles::kCmOnly), config(Profiles::kGcm));
    pair.client->start(0);
    pair.pump();
    EXPECT_FALSE(pair.connected());
  }
}

TEST(SecureDtls, ServerAnswersTheFirstClientHelloWithHelloVerifyRequest) {
  DtlsPair pair;
  pair.client->start(0);
  ASSERT_EQ(pair.to_server.size(), 1u);
  Datagram hello = pair.to_server.front();
  EXPECT_EQ(classify_dtls_datagram(hello), DtlsRecordKind::kClientHello);
  pair.to_server.pop_front();
  EXPECT_EQ(pair.server->feed(hello, DtlsPair::kClientAddress, 0), DtlsEvent::kHelloVerifySent);
  EXPECT_EQ(pair.server->state(), DtlsState::kListening);
  ASSERT_EQ(pair.to_client.size(), 1u);
  const Datagram& hvr = pair.to_client.front();
  // RFC 6347 4.2.1: handshake record, message type hello_verify_request (3), and smaller than
  // the ClientHello (no amplification).
  ASSERT_GE(hvr.size(), 14u);
  EXPECT_EQ(hvr[0], 22);
  EXPECT_EQ(hvr[13], 3);
  EXPECT_LT(hvr.size(), hello.size());
  EXPECT_EQ(pair.server->counters().hello_verify_requests_sent, 1u);
  pair.pump();
  EXPECT_TRUE(pair.connected());
}

TEST(SecureDtls, ACookieEarnedAtOneAddressDoesNotOpenFromAnother) {
  DtlsPair pair;
  pair.client->start(0);
  Datagram hello = pair.to_server.front();
  pair.to_server.clear();
  pair.server->feed(hello, DtlsPair::kClientAddress, 0);
  Datagram hvr = pair.to_client.front();
  pair.to_client.clear();
  pair.client->feed(hvr, DtlsPair::kServerAddress, 0);
  ASSERT_EQ(pair.to_server.size(), 1u);  // ClientHello with the cookie
  Datagram with_cookie = pair.to_server.front();
  pair.to_server.clear();
  const uint8_t elsewhere[6] = {192, 0, 2, 7, 0x30, 0x39};
  EXPECT_EQ(pair.server->feed(with_cookie, elsewhere, 0), DtlsEvent::kHelloVerifySent);
  EXPECT_EQ(pair.server->state(), DtlsState::kListening);
  pair.to_client.clear();
  pair.server->feed(with_cookie, DtlsPair::kClientAddress, 0);
  EXPECT_EQ(pair.server->state(), DtlsState::kHandshaking);
}

TEST(SecureDtls, WrongFingerprintIsRefusedOnBothSides) {
  Fingerprint wrong = testing::server_identity().fingerprint;
  wrong.sha256[31] ^= 1;
  DtlsPair pair({}, &wrong, nullptr);
  pair.client->start(0);
  pair.pump();
  EXPECT_EQ(pair.client->state(), DtlsState::kFailed);
  EXPECT_EQ(pair.client->failure(), DtlsFailure::kFingerprintMismatch);
  EXPECT_EQ(pair.client->counters().fingerprint_mismatches, 1u);
  EXPECT_TRUE(has(pair.client_events, DtlsEvent::kFailed));
  EXPECT_NE(pair.server->state(), DtlsState::kConnected);

  // The server refuses a client whose certificate it was not told about.
  Fingerprint other = testing::client_identity().fingerprint;
  other.sha256[0] ^= 0x80;
  DtlsPair reverse({}, nullptr, &other);
  reverse.client->start(0);
  reverse.pump();
  EXPECT_EQ(reverse.server->state(), DtlsState::kFailed);
  EXPECT_EQ(reverse.server->failure(), DtlsFailure::kFingerprintMismatch);
  EXPECT_EQ(reverse.server->counters().fingerprint_mismatches, 1u);
  EXPECT_NE(reverse.client->state(), DtlsState::kConnected);
}

// Drops the first three datagrams, or 30% at random (two seeds), then drives
// both sides' retransmission timers (50 ms here) until the handshake completes.
TEST(SecureDtls, LostHandshakeDatagramsAreRecoveredByTimeouts) {
  for (int drop_pattern = 0; drop_pattern < 3; ++drop_pattern) {
    DtlsConfig config;
    config.initial_retransmit_ms = 20;
    config.max_retransmits = 10;
    DtlsPair pair(config);
    int seen = 0;
    std::mt19937 rng(static_cast<unsigned>(drop_pattern));
    auto drop = [&](bool, const Datagram&) {
      ++seen;
      if (drop_pattern == 0) return seen <= 3;  // the first datagrams entirely
      return rng() % 100 < 30;                  // 30% loss, seeded
    };
    pair.client->start(testing::monotonic_ns());
    for (int i = 0; i < 200 && !pair.connected(); ++i) {
      pair.pump(drop, 1);
      uint64_t now = testing::monotonic_ns();
      uint64_t next =
          std::min(pair.client->next_timeout_ns(now), pair.server->next_timeout_ns(now));
      if (pair.to_server.empty() && pair.to_client.empty() && next != UINT64_MAX) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(next - now) +
                                    std::chrono::milliseconds(1));
        now = testing::monotonic_ns();
        pair.client->handle_timeout(now);
        pair.server->handle_timeout(now);
      }
    }
    ASSERT_TRUE(pair.connected()) << "pattern " << drop_pattern;
    EXPECT_GT(
        pair.client->counters().retransmit_timeouts + pair.server->counters().retransmit_timeouts,
        0u);
    EXPECT_EQ(pair.client->keys().client_write, pair.server->keys().client_write);
    EXPECT_EQ(pair.client->keys().server_write, pair.server->keys().server_write);
  }
}

TEST(SecureDtls, ExposesTheRetransmissionDeadlineOnTheCallersClock) {
  DtlsConfig config;
  config.initial_retransmit_ms = 300;
  DtlsPair pair(config);
  uint64_t now = 1'000'000'000'000ull;  // any epoch: the result is relative to it
  EXPECT_EQ(pair.client->next_timeout_ns(now), UINT64_MAX);
  pair.client->start(now);
  uint64_t deadline = pair.client->next_timeout_ns(now);
  EXPECT_GT(deadline, now + 250'000'000ull);
  EXPECT_LE(deadline, now + 300'000'000ull);
  // Not yet due: nothing is retransmitted.
  pair.to_server.clear();
  pair.client->handle_timeout(now);
  EXPECT_TRUE(pair.to_server.empty());
  EXPECT_EQ(pair.server->next_timeout_ns(now), UINT64_MAX);  // listening: no timer, no state
}

TEST(SecureDtls, AHandshakeThatNeverAnswersTimesOut) {
  DtlsConfig config;
  config.initial_retransmit_ms = 1;
  config.max_retransmits = 3;
  DtlsPair pair(config);
  pair.client->start(testing::monotonic_ns());
  DtlsEvent last = DtlsEvent::kNone;
  for (int i = 0; i < 100 && last != DtlsEvent::kFailed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(i, 4)));
    last = pair.client->handle_timeout(testing::monotonic_ns());
  }
  EXPECT_EQ(pair.client->state(), DtlsState::kFailed);
  EXPECT_EQ(pair.client->failure(), DtlsFailure::kTimedOut);
  EXPECT_EQ(pair.client->counters().retransmit_timeouts, 4u);
}

// A flood of ClientHellos from 1,000 other addresses reaches a listening server endpoint (the
// one that would take the next re-key) while an association is live: each gets a stateless
// HelloVerifyRequest, nothing is kept, and the live association and the next real re-key work.
TEST(SecureDtls, FloodOfClientHellosLeavesNoStateAndDoesNotDisturbTheLiveAssociation) {
  DtlsPair pair;
  pair.client->start(0);
  pair.pump();
  ASSERT_TRUE(pair.connected());
  SrtpKeyMaterial live_keys = pair.server->keys();

  // The attacker's hellos: real ClientHellos from fresh clients (unknown certificates).
  DtlsContext attacker_context(testing::client_identity());
  std::vector<Datagram> hellos;
  for (int i = 0; i < 10; ++i) {
    DtlsEndpoint attacker(
        attacker_context, DtlsRole::kClient, Fingerprint{},
        [&](std::span<const uint8_t> d) { hellos.emplace_back(d.begin(), d.end()); });
    attacker.start(0);
  }
  ASSERT_EQ(hellos.size(), 10u);

  size_t answered_bytes = 0;
  size_t hello_bytes = 0;
  DtlsEndpoint listener(pair.server_context, DtlsRole::kServer,
                        testing::client_identity().fingerprint,
                        [&](std::span<const uint8_t> d) { answered_bytes += d.size(); });
  for (uint32_t i = 0; i < 1000; ++i) {
    const Datagram& hello = hellos[i % hellos.size()];
    uint8_t address[6] = {198,  51,  static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i),
                          0x13, 0x88};
    hello_bytes += hello.size();
    EXPECT_EQ(listener.feed(hello, address, 0), DtlsEvent::kHelloVerifySent);
    ASSERT_EQ(listener.state(), DtlsState::kListening);
  }
  EXPECT_EQ(listener.counters().hello_verify_requests_sent, 1000u);
  EXPECT_EQ(listener.next_timeout_ns(0), UINT64_MAX);  // no handshake state, no timer
  EXPECT_LT(answered_bytes, hello_bytes);              // no amplification

  // Garbage and non-hello records are dropped without an answer.
  const uint8_t junk[] = {22, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 20};
  EXPECT_EQ(listener.feed(junk, DtlsPair::kClientAddress, 0), DtlsEvent::kNone);
  EXPECT_EQ(listener.counters().listen_dropped, 1u);

  // The live association is untouched...
  EXPECT_EQ(pair.server->state(), DtlsState::kConnected);
  EXPECT_EQ(pair.server->keys().client_write, live_keys.client_write);
  // ...and the same listener still takes the real client's next handshake.
  std::deque<Datagram> to_listener, to_client;
  DtlsEndpoint rekey_client(
      pair.client_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_listener.emplace_back(d.begin(), d.end()); });
  DtlsEndpoint rekey_server(
      pair.server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); });
  rekey_client.start(0);
  for (int i = 0; i < 20 && (!to_listener.empty() || !to_client.empty()); ++i) {
    while (!to_listener.empty()) {
      rekey_server.feed(to_listener.front(), DtlsPair::kClientAddress, 0);
      to_listener.pop_front();
    }
    while (!to_client.empty()) {
      rekey_client.feed(to_client.front(), DtlsPair::kServerAddress, 0);
      to_client.pop_front();
    }
  }
  EXPECT_EQ(rekey_server.state(), DtlsState::kConnected);
  EXPECT_EQ(rekey_client.state(), DtlsState::kConnected);
  EXPECT_NE(rekey_server.keys().client_write, live_keys.client_write);
}

TEST(SecureDtls, ConnectedEndpointAnswersCloseNotify) {
  DtlsPair pair;
  pair.client->start(0);
  pair.pump();
  ASSERT_TRUE(pair.connected());
  pair.client->close();
  pair.pump();
  EXPECT_EQ(pair.server->state(), DtlsState::kClosed);
  EXPECT_TRUE(has(pair.server_events, DtlsEvent::kClosed));
}

TEST(SecureDtls, OversizeDatagramsAreDroppedAndCounted) {
  DtlsPair pair;
  Datagram big(DtlsEndpoint::kMaxDatagram + 1, 22);
  EXPECT_EQ(pair.server->feed(big, DtlsPair::kClientAddress, 0), DtlsEvent::kNone);
  EXPECT_EQ(pair.server->counters().oversize_dropped, 1u);
  EXPECT_TRUE(pair.to_client.empty());
}

TEST(SecureDtls, SplitsTheExporterOutputPerRfc5764) {
  std::array<uint8_t, 56> exported;
  for (size_t i = 0; i < exported.size(); ++i) exported[i] = static_cast<uint8_t>(i);
  SrtpKeyMaterial m = split_srtp_key_material(exported);
  EXPECT_EQ(m.client_write.key[0], 0);
  EXPECT_EQ(m.client_write.key[15], 15);
  EXPECT_EQ(m.server_write.key[0], 16);
  EXPECT_EQ(m.server_write.key[15], 31);
  EXPECT_EQ(m.client_write.salt[0], 32);
  EXPECT_EQ(m.client_write.salt[11], 43);
  EXPECT_EQ(m.server_write.salt[0], 44);
  EXPECT_EQ(m.server_write.salt[11], 55);
}

TEST(SecureDtls, ClassifiesDatagramsForRouting) {
  const uint8_t hello[] = {22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0};
  const uint8_t finished_epoch1[] = {22, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 20};
  const uint8_t key_exchange[] = {22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, 16};
  const uint8_t alert[] = {21, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 3, 0, 2, 1, 0};
  const uint8_t rtp[] = {0x80, 96, 0, 1};
  EXPECT_EQ(classify_dtls_datagram(hello), DtlsRecordKind::kClientHello);
  EXPECT_EQ(classify_dtls_datagram(finished_epoch1), DtlsRecordKind::kOther);
  EXPECT_EQ(classify_dtls_datagram(key_exchange), DtlsRecordKind::kOther);
  EXPECT_EQ(classify_dtls_datagram(alert), DtlsRecordKind::kOther);
  EXPECT_EQ(classify_dtls_datagram(rtp), DtlsRecordKind::kNotDtls);
  EXPECT_EQ(classify_dtls_datagram({}), DtlsRecordKind::kNotDtls);
  // Truncation at every offset of the record header is malformed, never read past.
  for (size_t n = 1; n < 13; ++n)
    EXPECT_EQ(classify_dtls_datagram(std::span<const uint8_t>(hello, n)),
              DtlsRecordKind::kMalformed);
  EXPECT_EQ(classify_dtls_datagram(std::span<const uint8_t>(hello, 13)), DtlsRecordKind::kOther);
}

// The session-level routing: a server's live association survives a ClientHello flood and a
// failed re-key, and the next real re-key through the same routing replaces it.
TEST(SecureDtlsAssociations, ServerKeepsItsLiveAssociationThroughFloodAndFailedRekey) {
  DtlsContext server_context(testing::server_identity());
  DtlsContext client_context(testing::client_identity());
  std::deque<Datagram> to_server, to_client;
  DtlsAssociations server(
      server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); });
  DtlsAssociations client(
      client_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
  std::vector<DtlsEvent> server_events;
  auto pump = [&] {
    for (int i = 0; i < 30 && (!to_server.empty() || !to_client.empty()); ++i) {
      std::deque<Datagram> s, c;
      s.swap(to_server);
      c.swap(to_client);
      for (auto& d : s) server_events.push_back(server.feed(d, DtlsPair::kClientAddress, 0));
      for (auto& d : c) client.feed(d, DtlsPair::kServerAddress, 0);
    }
  };
  client.start_handshake(0);
  pump();
  ASSERT_TRUE(server.has_live());
  ASSERT_TRUE(client.has_live());
  EXPECT_FALSE(client.has_pending());
  SrtpKeyMaterial epoch0 = server.completed_keys();
  EXPECT_EQ(epoch0.client_write, client.completed_keys().client_write);

  // 1,000 ClientHellos from other addresses: answered by a listening pending association only.
  std::vector<Datagram> hellos;
  DtlsEndpoint attacker(
      client_context, DtlsRole::kClient, Fingerprint{},
      [&](std::span<const uint8_t> d) { hellos.emplace_back(d.begin(), d.end()); });
  attacker.start(0);
  ASSERT_EQ(hellos.size(), 1u);
  to_client.clear();
  for (uint32_t i = 0; i < 1000; ++i) {
    uint8_t address[6] = {203, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 1, 1};
    EXPECT_EQ(server.feed(hellos[0], address, 0), DtlsEvent::kHelloVerifySent);
  }
  EXPECT_EQ(to_client.size(), 1000u);
  to_client.clear();
  ASSERT_TRUE(server.has_pending());
  EXPECT_EQ(server.pending()->state(), DtlsState::kListening);
  EXPECT_EQ(server.live()->state(), DtlsState::kConnected);
  EXPECT_EQ(server.next_timeout_ns(0), UINT64_MAX);

  // A re-key by a client with the wrong certificate fails; the live association stays.
  DtlsContext stranger_context(testing::server_identity());  // not the expected client
  DtlsAssociations stranger(
      stranger_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
  stranger.start_handshake(0);
  for (int i = 0; i < 30 && (!to_server.empty() || !to_client.empty()); ++i) {
    std::deque<Datagram> s, c;
    s.swap(to_server);
    c.swap(to_client);
    for (auto& d : s) server_events.push_back(server.feed(d, DtlsPair::kClientAddress, 0));
    for (auto& d : c) stranger.feed(d, DtlsPair::kServerAddress, 0);
  }
  EXPECT_EQ(server.handshakes_failed(), 1u);
  EXPECT_EQ(server.failure(), DtlsFailure::kFingerprintMismatch);
  EXPECT_FALSE(server.has_pending());
  EXPECT_EQ(server.completed_keys().client_write, epoch0.client_write);
  EXPECT_EQ(server.live()->state(), DtlsState::kConnected);

  // The real client's re-key completes and replaces the live association on both sides.
  to_server.clear();
  to_client.clear();
  client.start_handshake(0);
  pump();
  EXPECT_EQ(server.handshakes_completed(), 2u);
  EXPECT_EQ(client.handshakes_completed(), 2u);
  EXPECT_NE(server.completed_keys().client_write, epoch0.client_write);
  EXPECT_EQ(server.completed_keys().client_write, client.completed_keys().client_write);
  EXPECT_EQ(server.completed_keys().server_write, client.completed_keys().server_write);
  EXPECT_FALSE(server.has_pending());
}

// Both ends of a handshake derive the same epoch identity (RFC 5705 exporter, our label), and
// a new handshake gets a new one: the MKI needs no counting.
TEST(SecureDtlsAssociations, BothEndsDeriveTheSameEpochIdentityAndEachHandshakeANewOne) {
  DtlsContext server_context(testing::server_identity());
  DtlsContext client_context(testing::client_identity());
  std::deque<Datagram> to_server, to_client;
  DtlsAssociations server(
      server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); });
  DtlsAssociations client(
      client_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
  std::set<uint32_t> seen;
  for (int handshake = 0; handshake < 8; ++handshake) {
    client.start_handshake(0);
    for (int i = 0; i < 30 && (!to_server.empty() || !to_client.empty()); ++i) {
      std::deque<Datagram> s, c;
      s.swap(to_server);
      c.swap(to_client);
      for (auto& d : s) server.feed(d, DtlsPair::kClientAddress, 0);
      for (auto& d : c) client.feed(d, DtlsPair::kServerAddress, 0);
    }
    ASSERT_EQ(client.handshakes_completed(), uint64_t(handshake + 1));
    ASSERT_EQ(server.handshakes_completed(), uint64_t(handshake + 1));
    EXPECT_EQ(server.completed_keys().epoch_id, client.completed_keys().epoch_id);
    seen.insert(client.completed_keys().epoch_id);
  }
  EXPECT_EQ(seen.size(), 8u);
  // The 4 exported bytes, big-endian, as the MKI carries them.
  const uint8_t bytes[4] = {0x01, 0x02, 0x03, 0xfe};
  EXPECT_EQ(epoch_id_from_exported(bytes), 0x010203feu);
}

// The server's routing by address: a client that comes back from a new address with the right
// certificate completes and becomes the live address (a re-bind); a handshake bound to an
// address holds the slot against another address for the hold time, then gives it up to one
// whose cookie verifies; the bound client's own new attempt supersedes its stuck one.
TEST(SecureDtlsAssociations, ServerRebindsOnACompletedHandshakeFromANewAddress) {
  DtlsContext server_context(testing::server_identity());
  DtlsContext client_context(testing::client_identity());
  std::deque<Datagram> to_server, to_client;
  constexpr uint64_t kHold = 2'000'000'000ull;
  DtlsAssociations server(
      server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); }, kHold);
  auto make_client = [&] {
    return std::make_unique<DtlsAssociations>(
        client_context, DtlsRole::kClient, testing::server_identity().fingerprint,
        [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
  };
  auto pump = [&](DtlsAssociations& c, std::span<const uint8_t> address, uint64_t now) {
    for (int i = 0; i < 30 && (!to_server.empty() || !to_client.empty()); ++i) {
      std::deque<Datagram> s, cl;
      s.swap(to_server);
      cl.swap(to_client);
      for (auto& d : s) server.feed(d, address, now);
      for (auto& d : cl) c.feed(d, DtlsPair::kServerAddress, now);
    }
  };
  const uint8_t first[6] = {10, 0, 0, 1, 0x30, 0x39};
  const uint8_t moved[6] = {10, 0, 0, 1, 0x30, 0x3a};  // the same host, another port
  auto client = make_client();
  client->start_handshake(0);
  pump(*client, first, 0);
  ASSERT_EQ(server.handshakes_completed(), 1u);
  EXPECT_TRUE(std::equal(server.live_address().begin(), server.live_address().end(), first));
  // Records from an address with no association are strays.
  const uint8_t stranger[6] = {203, 0, 113, 9, 1, 1};
  const uint8_t finished[] = {22, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 20};
  EXPECT_EQ(server.feed(finished, stranger, 0), DtlsEvent::kNone);
  EXPECT_EQ(server.routing_counters().stray_records, 1u);

  // The client restarts on another port (a new process: a new association from scratch).
  client = make_client();
  client->start_handshake(0);
  pump(*client, moved, 0);
  ASSERT_EQ(server.handshakes_completed(), 2u);
  EXPECT_TRUE(std::equal(server.live_address().begin(), server.live_address().end(), moved));
  EXPECT_EQ(server.completed_keys().epoch_id, client->completed_keys().epoch_id);

  // A stranger with the wrong certificate gets past the cookie and stalls (its flights are
  // never answered): its handshake is bound to its address.
  DtlsContext stranger_context(testing::server_identity());
  std::deque<Datagram> from_stranger;
  DtlsAssociations stalled(
      stranger_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { from_stranger.emplace_back(d.begin(), d.end()); });
  stalled.start_handshake(0);
  server.feed(from_stranger.front(), stranger, 10);  // ClientHello: HelloVerifyRequest back
  from_stranger.clear();
  ASSERT_EQ(to_client.size(), 1u);
  stalled.feed(to_client.front(), DtlsPair::kServerAddress, 10);  // ClientHello with cookie
  to_client.clear();
  server.feed(from_stranger.front(), stranger, 10);
  from_stranger.clear();
  ASSERT_TRUE(server.has_pending());
  EXPECT_TRUE(
      std::equal(server.pending_address().begin(), server.pending_address().end(), stranger));
  to_client.clear();
  // A third address within the hold: refused. After it, a cookieless ClientHello gets only a
  // stateless answer (a spoofed address could send that one); its cookie-bearing one takes the
  // slot from the stalled handshake.
  auto third = make_client();
  third->start_handshake(0);
  const Datagram hello = to_server.front();
  to_server.clear();
  const uint8_t other[6] = {198, 51, 100, 7, 2, 2};
  EXPECT_EQ(server.feed(hello, other, 10 + kHold - 1), DtlsEvent::kNone);
  EXPECT_EQ(server.routing_counters().refused_busy, 1u);
  EXPECT_EQ(server.feed(hello, other, 10 + kHold), DtlsEvent::kHelloVerifySent);
  EXPECT_EQ(server.routing_counters().preempted, 0u);
  EXPECT_TRUE(
      std::equal(server.pending_address().begin(), server.pending_address().end(), stranger));
  ASSERT_EQ(to_client.size(), 1u);
  third->feed(to_client.front(), DtlsPair::kServerAddress, 10 + kHold);  // -> cookie
  to_client.clear();
  ASSERT_EQ(to_server.size(), 1u);
  server.feed(to_server.front(), other, 10 + kHold);
  to_server.clear();
  EXPECT_EQ(server.routing_counters().preempted, 1u);
  EXPECT_TRUE(std::equal(server.pending_address().begin(), server.pending_address().end(), other));
  // first, moved, the stranger and the third address: each answered statelessly once.
  EXPECT_EQ(server.routing_counters().cookie_challenges, 4u);
  // The live association never went meanwhile; the third (it holds the pinned key) completes.
  EXPECT_EQ(server.live()->state(), DtlsState::kConnected);
  pump(*third, other, 10 + kHold);
  EXPECT_EQ(server.handshakes_completed(), 3u);
  EXPECT_TRUE(std::equal(server.live_address().begin(), server.live_address().end(), other));

  // The peer at `moved` starts a handshake and stalls: within the hold nobody else gets in.
  client->start_handshake(0);
  server.feed(to_server.front(), moved, 20);  // -> HelloVerifyRequest
  to_server.clear();
  client->feed(to_client.front(), DtlsPair::kServerAddress, 20);
  to_client.clear();
  server.feed(to_server.front(), moved, 20);  // cookie verified: bound to `moved`
  to_server.clear();
  to_client.clear();
  EXPECT_EQ(server.feed(hello, stranger, 20 + kHold - 1), DtlsEvent::kNone);
  EXPECT_EQ(server.routing_counters().refused_busy, 2u);
  // It gives up on that attempt and starts another (a new ClientHello.random, from the same
  // address): once its cookie verifies it supersedes the stuck one, and completes.
  client->start_handshake(0);
  pump(*client, moved, 30);
  EXPECT_EQ(server.routing_counters().superseded, 1u);
  EXPECT_EQ(server.handshakes_completed(), 4u);
  EXPECT_EQ(server.completed_keys().epoch_id, client->completed_keys().epoch_id);
  EXPECT_TRUE(std::equal(server.live_address().begin(), server.live_address().end(), moved));
}

// A stranger that holds a valid cookie and starts over every 0.5 s (a new ClientHello.random
// each time, each one's cookie verified) supersedes its own handshake again and again; the hold
// still counts from when its address took the slot, so the pinned peer, retrying from another
// address, gets the slot once the hold has passed and completes.
TEST(SecureDtlsAssociations, AStrangerStartingOverKeepsTheSlotNoLongerThanTheHold) {
  DtlsContext server_context(testing::server_identity());
  DtlsContext client_context(testing::client_identity());
  DtlsContext stranger_context(testing::server_identity());  // not the pinned certificate
  std::deque<Datagram> to_server, to_client, from_stranger;
  constexpr uint64_t kHold = 2'000'000'000ull;
  constexpr uint64_t kMs = 1'000'000;
  DtlsAssociations server(
      server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); }, kHold);
  DtlsAssociations client(
      client_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
  DtlsAssociations stranger(
      stranger_context, DtlsRole::kClient, testing::server_identity().fingerprint,
      [&](std::span<const uint8_t> d) { from_stranger.emplace_back(d.begin(), d.end()); });
  const uint8_t stranger_address[6] = {203, 0, 113, 9, 1, 1};
  const uint8_t peer_address[6] = {10, 0, 0, 1, 0x30, 0x39};

  uint64_t completed_ns = 0;
  client.start_handshake(250 * kMs);
  const Datagram client_hello = to_server.front();
  to_server.clear();
  for (uint64_t now = 0; now <= 6000 * kMs && completed_ns == 0; now += 250 * kMs) {
    if (now % (500 * kMs) == 0) {
      // The stranger starts over: ClientHello, HelloVerifyRequest, ClientHello with its cookie.
      stranger.start_handshake(now);
      to_client.clear();
      server.feed(from_stranger.front(), stranger_address, now);
      from_stranger.clear();
      if (to_client.size() == 1) {
        stranger.feed(to_client.front(), DtlsPair::kServerAddress, now);
        to_client.clear();
        server.feed(from_stranger.front(), stranger_address, now);
      }
      from_stranger.clear();
      to_client.clear();  // its handshake's flight: never answered, so it stalls
      continue;
    }
    // The peer's ClientHello again (a retransmission): refused within the stranger's hold,
    // answered with a cookie after it; then its handshake runs.
    if (server.feed(client_hello, peer_address, now) != DtlsEvent::kHelloVerifySent) continue;
    for (int i = 0; i < 30 && (!to_server.empty() || !to_client.empty()); ++i) {
      std::deque<Datagram> s, c;
      s.swap(to_server);
      c.swap(to_client);
      for (auto& d : c) client.feed(d, DtlsPair::kServerAddress, now);
      for (auto& d : s) server.feed(d, peer_address, now);
    }
    if (server.handshakes_completed() == 1) completed_ns = now;
  }
  EXPECT_GE(server.routing_counters().superseded, 3u);  // the stranger started over
  EXPECT_GE(server.routing_counters().refused_busy, 1u);
  ASSERT_NE(completed_ns, 0u) << "the stranger kept the slot";
  EXPECT_LE(completed_ns, kHold + 500 * kMs);
  EXPECT_EQ(server.routing_counters().preempted, 1u);
  EXPECT_TRUE(std::equal(server.live_address().begin(), server.live_address().end(), peer_address));
  EXPECT_EQ(server.completed_keys().epoch_id, client.completed_keys().epoch_id);
}

// A truncated ClientHello (a record header and a few bytes of handshake) is answered with
// nothing and counted.
TEST(SecureDtlsAssociations, ATruncatedClientHelloIsCounted) {
  DtlsContext server_context(testing::server_identity());
  DtlsAssociations server(server_context, DtlsRole::kServer, testing::client_identity().fingerprint,
                          [](std::span<const uint8_t>) {});
  const uint8_t hello[20] = {22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 3, 0, 0, 0};
  const uint8_t from[6] = {10, 0, 0, 2, 1, 1};
  EXPECT_EQ(server.feed(hello, from, 0), DtlsEvent::kNone);
  EXPECT_EQ(server.routing_counters().hellos_dropped, 1u);
  EXPECT_EQ(server.routing_counters().cookie_challenges, 0u);
}

}  // namespace
}  // namespace syncd::secure
