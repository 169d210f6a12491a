#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <vector>

#include "secure/dtls_associations.h"
#include "secure/key_schedule.h"
#include "secure/srtp_session.h"
#include "secure_test_util.h"

namespace syncd::secure {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1'000'000'000;

std::vector<KeyEvent> poll_all(KeySchedule& schedule, uint64_t now) {
  std::array<KeyEvent, 8> out;
  size_t n = schedule.poll(now, out);
  return {out.begin(), out.begin() + static_cast<long>(n)};
}

KeyScheduleConfig test_config() {
  KeyScheduleConfig config;
  config.rekey_interval_ns = 10 * kS;
  config.client_switch_fallback_ns = 1 * kS;
  config.server_switch_fallback_ns = 4 * kS;
  config.retire_grace_ns = 2 * kS;
  config.rekey_retry_ns = 5 * kS;
  return config;
}

TEST(SecureKeySchedule, ClientSendsUnderTheFirstEpochAtOnceServerWaitsForTheClient) {
  KeySchedule client(DtlsRole::kClient, test_config());
  KeySchedule server(DtlsRole::kServer, test_config());
  EXPECT_EQ(client.next_deadline_ns(), KeySchedule::kNever);
  EXPECT_TRUE(server.on_handshake_complete(0, 100));
  EXPECT_TRUE(client.on_handshake_complete(0, 150));
  EXPECT_EQ(poll_all(client, 150), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 0}}));
  EXPECT_EQ(client.send_epoch(), 0u);
  // The server completed first: the client may not have the key yet, so it waits for a packet.
  EXPECT_TRUE(poll_all(server, 150).empty());
  EXPECT_FALSE(server.send_epoch());
  server.on_packet_authenticated(0, 160);
  EXPECT_EQ(poll_all(server, 160), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 0}}));
}

TEST(SecureKeySchedule, ServerFallsBackToSendingAfterItsOverlapWhenTheClientIsSilent) {
  KeySchedule server(DtlsRole::kServer, test_config());
  server.on_handshake_complete(0, 0);
  EXPECT_EQ(server.next_deadline_ns(), 4 * kS);
  EXPECT_TRUE(poll_all(server, 4 * kS - 1).empty());
  EXPECT_EQ(poll_all(server, 4 * kS), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 0}}));
}

TEST(SecureKeySchedule, ClientRekeysEveryIntervalAndRetriesAfterAFailure) {
  KeySchedule client(DtlsRole::kClient, test_config());
  client.on_handshake_complete(0, 0);
  poll_all(client, 0);
  EXPECT_EQ(client.next_deadline_ns(), 10 * kS);
  EXPECT_TRUE(poll_all(client, 10 * kS - 1).empty());
  EXPECT_EQ(poll_all(client, 10 * kS), (std::vector<KeyEvent>{{KeyAction::kStartRekey, 1}}));
  EXPECT_TRUE(client.rekey_in_progress());
  EXPECT_TRUE(poll_all(client, 11 * kS).empty()) << "one handshake at a time";
  client.on_rekey_failed(12 * kS);
  EXPECT_EQ(poll_all(client, 17 * kS), (std::vector<KeyEvent>{{KeyAction::kStartRekey, 1}}));
  EXPECT_EQ(client.counters().rekeys_failed, 1u);
  EXPECT_EQ(client.counters().rekeys_started, 2u);
  // Servers never start one.
  KeySchedule server(DtlsRole::kServer, test_config());
  server.on_handshake_complete(0, 0);
  server.on_packet_authenticated(0, 0);
  poll_all(server, 0);
  EXPECT_EQ(server.next_deadline_ns(), KeySchedule::kNever);
  EXPECT_TRUE(poll_all(server, 1000 * kS).empty());
}

TEST(SecureKeySchedule, SwitchesOnThePeersFirstNewEpochPacketOrAfterTheOverlap) {
  // The peer's packet first.
  KeySchedule a(DtlsRole::kClient, test_config());
  a.on_handshake_complete(0, 0);
  poll_all(a, 0);
  a.on_handshake_complete(1, 20 * kS);
  EXPECT_TRUE(poll_all(a, 20 * kS + 300 * kMs).empty());
  EXPECT_EQ(a.send_epoch(), 0u);
  a.on_packet_authenticated(1, 20 * kS + 400 * kMs);
  EXPECT_EQ(poll_all(a, 20 * kS + 400 * kMs), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 1}}));
  EXPECT_EQ(a.counters().switches_on_packet, 1u);
  // The overlap first.
  KeySchedule b(DtlsRole::kClient, test_config());
  b.on_handshake_complete(0, 0);
  poll_all(b, 0);
  b.on_handshake_complete(1, 20 * kS);
  EXPECT_TRUE(poll_all(b, 21 * kS - 1).empty());
  EXPECT_EQ(poll_all(b, 21 * kS), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 1}}));
  EXPECT_EQ(b.counters().switches_on_fallback, 1u);
  // A packet under an old epoch does not switch anything.
  b.on_handshake_complete(2, 40 * kS);
  b.on_packet_authenticated(1, 40 * kS + 10);
  for (const KeyEvent& event : poll_all(b, 40 * kS + 10))
    EXPECT_NE(event.action, KeyAction::kSendEpoch);
}

TEST(SecureKeySchedule, RetiresTheOldReceiveKeyAGraceAfterThePeerSwitchedOrAtTheBound) {
  KeySchedule a(DtlsRole::kClient, test_config());
  a.on_handshake_complete(0, 0);
  poll_all(a, 0);
  a.on_handshake_complete(1, 20 * kS);
  // Bound: the peer (a server) switches at the latest 4 s after; plus 2 s grace.
  EXPECT_TRUE(a.receive_epoch_live(0));
  a.on_packet_authenticated(1, 20 * kS + 500 * kMs);
  poll_all(a, 20 * kS + 500 * kMs);
  EXPECT_TRUE(poll_all(a, 22 * kS + 500 * kMs - 1).empty());
  EXPECT_EQ(poll_all(a, 22 * kS + 500 * kMs),
            (std::vector<KeyEvent>{{KeyAction::kRetireReceive, 0}}));
  EXPECT_FALSE(a.receive_epoch_live(0));
  EXPECT_TRUE(a.receive_epoch_live(1));

  KeySchedule silent(DtlsRole::kClient, test_config());
  silent.on_handshake_complete(0, 0);
  poll_all(silent, 0);
  silent.on_handshake_complete(1, 20 * kS);
  poll_all(silent, 21 * kS);  // switches on its overlap
  EXPECT_TRUE(poll_all(silent, 26 * kS - 1).empty());
  EXPECT_EQ(poll_all(silent, 26 * kS), (std::vector<KeyEvent>{{KeyAction::kRetireReceive, 0}}));
}

// The client's handshake completes late (its final flight lost on a lossy path and
// retransmitted seconds later): it sends under the old epoch past the server's bound (its
// completion + the client's 1-s fallback + 2-s grace). The server keeps the old receive key while
// packets keep coming under it, and retires it a grace period after the last one.
TEST(SecureKeySchedule, AnOldReceiveKeyStaysWhileThePeerStillSendsUnderIt) {
  KeySchedule server(DtlsRole::kServer, test_config());
  server.on_handshake_complete(0, 0);
  poll_all(server, 0);
  server.on_handshake_complete(1, 20 * kS);  // the bound: 23 s
  uint64_t t = 20 * kS;
  for (; t < 25 * kS; t += 10 * kMs) {
    server.on_packet_authenticated(0, t);
    for (const KeyEvent& e : poll_all(server, t))
      ASSERT_NE(e.action, KeyAction::kRetireReceive) << "at " << t / kMs << " ms";
  }
  EXPECT_TRUE(server.receive_epoch_live(0));
  EXPECT_GE(server.counters().retire_postponed, 1u);
  // The client switches at 25 s: epoch 0's last packets are in; it goes 2 s after them.
  server.on_packet_authenticated(1, 25 * kS);
  for (; t < 27 * kS - 10 * kMs; t += 10 * kMs)
    for (const KeyEvent& e : poll_all(server, t)) ASSERT_NE(e.action, KeyAction::kRetireReceive);
  std::vector<KeyEvent> events;
  for (; t <= 27 * kS; t += 10 * kMs)
    for (const KeyEvent& e : poll_all(server, t)) events.push_back(e);
  EXPECT_NE(std::find(events.begin(), events.end(), KeyEvent{KeyAction::kRetireReceive, 0}),
            events.end());
  EXPECT_FALSE(server.receive_epoch_live(0));
  EXPECT_TRUE(server.receive_epoch_live(1));
}

TEST(SecureKeySchedule, TooManyEpochsRetireTheOldestEarlyAndSay) {
  KeySchedule a(DtlsRole::kClient, test_config());
  for (uint32_t e = 0; e < KeySchedule::kMaxReceiveEpochs; ++e) a.on_handshake_complete(e, e);
  EXPECT_EQ(a.counters().retired_early, 0u);
  a.on_handshake_complete(4, 10);
  std::vector<KeyEvent> events = poll_all(a, 10);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), (KeyEvent{KeyAction::kRetireReceive, 0}));
  EXPECT_EQ(a.counters().retired_early, 1u);
  EXPECT_FALSE(a.receive_epoch_live(0));
  // poll() with no room leaves the actions due.
  KeySchedule b(DtlsRole::kClient, test_config());
  b.on_handshake_complete(0, 0);
  EXPECT_EQ(b.poll(0, {}), 0u);
  EXPECT_EQ(b.next_deadline_ns(), 0u);
  EXPECT_EQ(poll_all(b, 0).size(), 1u);
}

// Re-keys as often as the client's switch fallback: the server completes E2 before the
// client's first packet under E1 arrives, so E1 is no longer its pending epoch. It still
// follows the client to E1 at once (the client has it: it sends under it), then to E2, instead
// of sending under E0 until a packet under the newest epoch happens to beat the next re-key.
TEST(SecureKeySchedule, TheServerCatchesUpToAnEpochThePeerUsesThatIsNoLongerPending) {
  KeySchedule server(DtlsRole::kServer, test_config());
  ASSERT_TRUE(server.on_handshake_complete(10, 0));
  server.on_packet_authenticated(10, 1);
  EXPECT_EQ(poll_all(server, 1), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 10}}));
  ASSERT_TRUE(server.on_handshake_complete(11, 1 * kS));
  ASSERT_TRUE(server.on_handshake_complete(12, 1 * kS + 2 * kMs));
  server.on_packet_authenticated(11, 1 * kS + 3 * kMs);
  EXPECT_EQ(server.next_deadline_ns(), 0u);
  EXPECT_EQ(poll_all(server, 1 * kS + 3 * kMs),
            (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 11}}));
  EXPECT_EQ(server.send_ordinal(), 1u);
  // A late packet under an older epoch moves nothing back.
  server.on_packet_authenticated(10, 1 * kS + 4 * kMs);
  for (const KeyEvent& e : poll_all(server, 1 * kS + 4 * kMs))
    EXPECT_NE(e.action, KeyAction::kSendEpoch);
  // Then the pending one, on the client's first packet under it.
  server.on_packet_authenticated(12, 2 * kS);
  EXPECT_EQ(poll_all(server, 2 * kS), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 12}}));
  EXPECT_EQ(server.send_ordinal(), 2u);
  EXPECT_EQ(server.counters().switches_on_packet, 2u);
}

// Epochs are named by their identity (the MKI from the handshake), which is unordered: "older"
// is the local ordinal. Identities chosen so that value order and completion order disagree.
TEST(SecureKeySchedule, EpochIdentitiesAreUnorderedTheLocalOrdinalSaysWhichIsNewer) {
  KeySchedule a(DtlsRole::kClient, test_config());
  const uint32_t first = 0xfffffff0u, second = 0x00000007u, third = 0x80000000u;
  ASSERT_TRUE(a.on_handshake_complete(first, 0));
  EXPECT_EQ(poll_all(a, 0), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, first}}));
  ASSERT_TRUE(a.on_handshake_complete(second, 20 * kS));
  EXPECT_EQ(a.ordinal_of(first), 0u);
  EXPECT_EQ(a.ordinal_of(second), 1u);
  EXPECT_FALSE(a.ordinal_of(third));
  // The peer's packet under the newer (numerically smaller) epoch: switch, and the older
  // (numerically larger) one retires a grace later.
  a.on_packet_authenticated(second, 20 * kS + 100 * kMs);
  EXPECT_EQ(poll_all(a, 20 * kS + 100 * kMs),
            (std::vector<KeyEvent>{{KeyAction::kSendEpoch, second}}));
  EXPECT_EQ(a.send_ordinal(), 1u);
  EXPECT_EQ(poll_all(a, 22 * kS + 100 * kMs),
            (std::vector<KeyEvent>{{KeyAction::kRetireReceive, first}}));
  // A late packet under the retired epoch moves nothing (it is not held).
  a.on_packet_authenticated(first, 22 * kS + 200 * kMs);
  EXPECT_TRUE(a.receive_epoch_live(second));
  // A packet under an older epoch never retires a newer one.
  ASSERT_TRUE(a.on_handshake_complete(third, 40 * kS));
  a.on_packet_authenticated(second, 40 * kS + 10);
  poll_all(a, 50 * kS);  // the fallback switch to `third`, nothing retired by `second`'s packet
  EXPECT_TRUE(a.receive_epoch_live(third));
  // Eviction takes the oldest by ordinal, not the smallest value.
  KeySchedule b(DtlsRole::kServer, test_config());
  const uint32_t ids[] = {9, 3, 7, 1};
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(b.on_handshake_complete(ids[i], i));
  ASSERT_TRUE(b.on_handshake_complete(5, 10));
  EXPECT_EQ(poll_all(b, 10).front(), (KeyEvent{KeyAction::kRetireReceive, 9}));
  EXPECT_TRUE(b.receive_epoch_live(1));
}

// A handshake whose identity names an epoch still held is refused (its packets could not be
// told apart): nothing is installed, and the client re-keys at once.
TEST(SecureKeySchedule, ACollidingIdentityIsRefusedAndTheClientRekeysAtOnce) {
  KeySchedule client(DtlsRole::kClient, test_config());
  ASSERT_TRUE(client.on_handshake_complete(42, 0));
  poll_all(client, 0);
  EXPECT_EQ(client.next_deadline_ns(), 10 * kS);
  EXPECT_FALSE(client.on_handshake_complete(42, 3 * kS));
  EXPECT_EQ(client.counters().collisions, 1u);
  EXPECT_EQ(client.counters().epochs, 1u);
  EXPECT_EQ(client.send_epoch(), 42u);
  EXPECT_EQ(client.next_deadline_ns(), 3 * kS);
  EXPECT_EQ(poll_all(client, 3 * kS), (std::vector<KeyEvent>{{KeyAction::kStartRekey, 1}}));
  ASSERT_TRUE(client.on_handshake_complete(43, 3 * kS + 10));
  EXPECT_EQ(client.ordinal_of(43), 1u);
  // A server refuses too and keeps what it has; it never starts a handshake.
  KeySchedule server(DtlsRole::kServer, test_config());
  ASSERT_TRUE(server.on_handshake_complete(42, 0));
  server.on_packet_authenticated(42, 1);
  poll_all(server, 1);
  EXPECT_FALSE(server.on_handshake_complete(42, 2));
  EXPECT_EQ(server.counters().collisions, 1u);
  EXPECT_EQ(server.send_epoch(), 42u);
  EXPECT_EQ(server.next_deadline_ns(), KeySchedule::kNever);
  // Once retired, an identity may come back (it names nothing held).
  KeySchedule c(DtlsRole::kClient, test_config());
  ASSERT_TRUE(c.on_handshake_complete(1, 0));
  poll_all(c, 0);
  ASSERT_TRUE(c.on_handshake_complete(2, 10 * kS));
  c.on_packet_authenticated(2, 10 * kS);
  poll_all(c, 10 * kS);
  poll_all(c, 13 * kS);
  EXPECT_FALSE(c.receive_epoch_live(1));
  EXPECT_TRUE(c.on_handshake_complete(1, 14 * kS));
}

// The peer went silent (died, or restarted without our keys): a handshake starts at once,
// replacing one under way, and its epoch is sent under as soon as it completes, as the first.
TEST(SecureKeySchedule, OnPeerLostTheClientHandshakesAtOnceAndSwitchesAtOnce) {
  KeySchedule client(DtlsRole::kClient, test_config());
  ASSERT_TRUE(client.on_handshake_complete(100, 0));
  poll_all(client, 0);
  // A scheduled re-key under way to a peer that is gone...
  EXPECT_EQ(poll_all(client, 10 * kS), (std::vector<KeyEvent>{{KeyAction::kStartRekey, 1}}));
  EXPECT_TRUE(client.rekey_in_progress());
  // ...is restarted by the liveness timeout.
  client.on_peer_lost(12 * kS);
  EXPECT_EQ(client.counters().peer_lost, 1u);
  EXPECT_EQ(client.next_deadline_ns(), 12 * kS);
  EXPECT_EQ(poll_all(client, 12 * kS), (std::vector<KeyEvent>{{KeyAction::kStartRekey, 1}}));
  ASSERT_TRUE(client.on_handshake_complete(200, 12 * kS + 50 * kMs));
  EXPECT_EQ(poll_all(client, 12 * kS + 50 * kMs),
            (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 200}}));
  // The lost peer's epoch retires on the usual bound; the next re-key is an ordinary one: it
  // waits for the peer (or the fallback).
  EXPECT_EQ(poll_all(client, 25 * kS),
            (std::vector<KeyEvent>{{KeyAction::kRetireReceive, 100}, {KeyAction::kStartRekey, 2}}));
  ASSERT_TRUE(client.on_handshake_complete(300, 30 * kS));
  EXPECT_TRUE(poll_all(client, 30 * kS).empty());
  EXPECT_EQ(poll_all(client, 31 * kS), (std::vector<KeyEvent>{{KeyAction::kSendEpoch, 300}}));
  // A server has no liveness of its own: on_peer_lost does nothing there.
  KeySchedule server(DtlsRole::kServer, test_config());
  server.on_peer_lost(0);
  EXPECT_EQ(server.counters().peer_lost, 0u);
  EXPECT_EQ(server.next_deadline_ns(), KeySchedule::kNever);
}

// Two syncd in one process: DTLS (the real endpoints) and SRTP over a simulated network with
// 20-60 ms of delay (so packets reorder, also across every key switch), 10,000 RTP packets each
// way at one per 10 ms, the client re-keying every 10 s = every 1,000 packets. Sequence numbers
// and timestamps start just below their wrap.
struct Side {
  Side(DtlsRole role, const Identity& identity, const Fingerprint& peer,
       DtlsEndpoint::DatagramSink sink)
      : role(role),
        context(identity),
        dtls(context, role, peer, std::move(sink)),
        schedule(role, test_config()) {}

  DtlsRole role;
  DtlsContext context;
  DtlsAssociations dtls;
  KeySchedule schedule;
  SrtpSender tx;
  SrtpReceiver rx;
  std::map<uint32_t, uint64_t> completed_at;  // local ordinal -> time
  std::map<uint32_t, uint32_t> mki_of;        // local ordinal -> epoch identity (the MKI)
  std::map<uint32_t, uint32_t> ordinal_by_mki;
  std::map<uint32_t, uint64_t> retired_at;
  std::map<uint32_t, uint64_t> last_packet_at;  // the last packet authenticated under each epoch
  std::set<uint32_t> received;                  // extended sequence numbers
  uint32_t max_epoch_seen = 0;
  uint64_t reordered_across_switch = 0;
  std::vector<uint8_t> first_packet_of_epoch0;  // captured off the wire, replayed at the end
};

struct InFlight {
  uint64_t at;
  uint64_t order;
  bool to_server;
  std::vector<uint8_t> bytes;
  bool operator<(const InFlight& o) const { return at != o.at ? at > o.at : order > o.order; }
};

TEST(SecureKeySchedule, TenThousandPacketsEachWayWithRekeysEveryThousandLoseNothing) {
  std::priority_queue<InFlight> network;
  std::mt19937_64 rng(2026);
  uint64_t order = 0;
  uint64_t now = 0;
  auto send = [&](bool to_server, std::span<const uint8_t> bytes) {
    uint64_t delay = 20 * kMs + rng() % (40 * kMs);
    network.push({now + delay, order++, to_server, {bytes.begin(), bytes.end()}});
  };
  Side client(DtlsRole::kClient, testing::client_identity(), testing::server_identity().fingerprint,
              [&](std::span<const uint8_t> d) { send(true, d); });
  Side server(DtlsRole::kServer, testing::server_identity(), testing::client_identity().fingerprint,
              [&](std::span<const uint8_t> d) { send(false, d); });
  const uint8_t client_address[6] = {10, 0, 0, 1, 1, 1};
  const uint8_t server_address[6] = {10, 0, 0, 2, 2, 2};

  auto on_dtls = [&](Side& side, std::span<const uint8_t> datagram) {
    // Routing between the live and the pending association: DtlsAssociations.
    DtlsEvent event = side.dtls.feed(
        datagram, side.role == DtlsRole::kServer ? client_address : server_address, now);
    ASSERT_NE(event, DtlsEvent::kFailed) << to_string(side.dtls.failure());
    if (event != DtlsEvent::kHandshakeComplete) return;
    const SrtpKeyMaterial& keys = side.dtls.completed_keys();
    const uint32_t mki = keys.epoch_id;
    ASSERT_TRUE(side.schedule.on_handshake_complete(mki, now));
    const uint32_t epoch = uint32_t(*side.schedule.ordinal_of(mki));
    side.completed_at[epoch] = now;
    side.mki_of[epoch] = mki;
    side.ordinal_by_mki[mki] = epoch;
    bool is_client = side.role == DtlsRole::kClient;
    ASSERT_TRUE(side.tx.install(mki, is_client ? keys.client_write : keys.server_write));
    ASSERT_TRUE(side.rx.install(mki, is_client ? keys.server_write : keys.client_write));
  };

  auto on_srtp = [&](Side& side, std::vector<uint8_t>& packet) {
    if (side.mki_of.count(0) && srtp_packet_epoch(packet.data(), packet.size()) == side.mki_of[0] &&
        side.first_packet_of_epoch0.empty())
      side.first_packet_of_epoch0 = packet;
    size_t size = packet.size();
    uint32_t mki = 0;
    SrtpStatus status = side.rx.unprotect_rtp(packet.data(), size, &mki);
    ASSERT_EQ(status, SrtpStatus::kOk) << to_string(status) << " at " << now / kMs << " ms";
    const uint32_t epoch = side.ordinal_by_mki.at(mki);
    if (epoch < side.max_epoch_seen) ++side.reordered_across_switch;
    side.max_epoch_seen = std::max(side.max_epoch_seen, epoch);
    side.last_packet_at[epoch] = now;
    uint32_t index = static_cast<uint32_t>(packet[12]) << 24 | packet[13] << 16 | packet[14] << 8 |
                     packet[15];  // the packet counter, carried in the payload
    EXPECT_TRUE(side.received.insert(index).second) << "duplicate " << index;
    side.schedule.on_packet_authenticated(mki, now);
  };

  auto apply = [&](Side& side) {
    std::array<KeyEvent, 8> events;
    size_t n = side.schedule.poll(now, events);
    for (size_t i = 0; i < n; ++i) {
      switch (events[i].action) {
        case KeyAction::kStartRekey:
          ASSERT_EQ(side.role, DtlsRole::kClient);
          side.dtls.start_handshake(now);
          break;
        case KeyAction::kSendEpoch:
          ASSERT_TRUE(side.tx.use_epoch(events[i].epoch));
          break;
        case KeyAction::kRetireReceive:
          side.rx.retire(events[i].epoch);
          side.retired_at[side.ordinal_by_mki.at(events[i].epoch)] = now;
          break;
      }
    }
  };

  constexpr uint32_t kPackets = 10000;
  uint32_t sent[2] = {0, 0};  // client, server
  uint16_t seq[2] = {65000, 64000};
  uint32_t timestamp[2] = {0xfff00000u, 0xffff0000u};
  client.dtls.start_handshake(now);

  for (; now < 115 * kS; now += 1 * kMs) {
    while (!network.empty() && network.top().at <= now) {
      InFlight datagram = network.top();
      network.pop();
      Side& side = datagram.to_server ? server : client;
      uint8_t first = datagram.bytes[0];
      if (first >= 20 && first <= 63)
        on_dtls(side, datagram.bytes);
      else
        on_srtp(side, datagram.bytes);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (Side* side : {&client, &server}) {
      apply(*side);
      if (::testing::Test::HasFatalFailure()) return;
      int s = side == &client ? 0 : 1;
      // One packet per 10 ms, from the moment the side has a key to send with.
      if (now % (10 * kMs) != 0 || sent[s] >= kPackets || !side->tx.epoch()) continue;
      std::vector<uint8_t> packet(12 + 100 + kRtpTrailerBytes);
      packet[0] = 0x80;
      packet[1] = 96;
      packet[2] = static_cast<uint8_t>(seq[s] >> 8);
      packet[3] = static_cast<uint8_t>(seq[s]);
      for (int b = 0; b < 4; ++b)
        packet[4 + b] = static_cast<uint8_t>(timestamp[s] >> (24 - 8 * b));
      packet[8] = static_cast<uint8_t>(0x10 + s);
      for (int b = 0; b < 4; ++b) packet[12 + b] = static_cast<uint8_t>(sent[s] >> (24 - 8 * b));
      size_t size = 112;
      ASSERT_EQ(side->tx.protect_rtp(packet.data(), size, packet.size()), SrtpStatus::kOk);
      packet.resize(size);
      send(side == &client, packet);
      ++sent[s];
      ++seq[s];
      timestamp[s] += 1500;
    }
  }

  EXPECT_EQ(sent[0], kPackets);
  EXPECT_EQ(sent[1], kPackets);
  for (Side* side : {&client, &server}) {
    SCOPED_TRACE(side == &client ? "client" : "server");
    // 0 lost, 0 authentication failures, nothing refused.
    EXPECT_EQ(side->received.size(), kPackets);
    EXPECT_EQ(side->rx.counters().rtp_unprotected, kPackets);
    EXPECT_EQ(side->rx.counters().auth_failed, 0u);
    EXPECT_EQ(side->rx.counters().unknown_epoch, 0u);
    EXPECT_EQ(side->rx.counters().replayed, 0u);
    // A re-key every 1,000 packets: epochs 0..10 in 100+ s.
    EXPECT_GE(side->completed_at.size(), 10u);
    // Packets did cross the switches out of order.
    EXPECT_GT(side->reordered_across_switch, 0u);
    // Every epoch but the last retired, on time: at most the peer's fallback plus the grace
    // after the next epoch completed here, or the grace after its last packet (reordered ones
    // arrive after the switch).
    uint32_t last = side->completed_at.rbegin()->first;
    uint64_t peer_fallback = side->role == DtlsRole::kClient ? 4 * kS : 1 * kS;
    for (uint32_t e = 0; e < last; ++e) {
      uint64_t next_completed = side->completed_at.at(e + 1);
      if (next_completed + peer_fallback + 2 * kS >= now) {
        // Its deadline lies beyond the end of the run (the media stopped at 100 s).
        EXPECT_FALSE(side->retired_at.count(e) && side->retired_at[e] < next_completed) << e;
        continue;
      }
      ASSERT_TRUE(side->retired_at.count(e)) << "epoch " << e << " never retired";
      EXPECT_GT(side->retired_at[e], next_completed) << e;
      EXPECT_LE(
          side->retired_at[e],
          std::max(next_completed + peer_fallback, side->last_packet_at[e]) + 2 * kS + 1 * kMs)
          << e;
    }
    EXPECT_LE(side->rx.size(), 2u) << "only the live epoch's key (and one retiring) is left";
    EXPECT_LE(side->tx.size(), 2u);  // the live send key and at most one not yet switched to
  }
  // Both sides named every epoch alike without counting: the MKI came from the handshake.
  EXPECT_EQ(client.mki_of, server.mki_of);
  EXPECT_EQ(client.schedule.counters().rekeys_started, client.completed_at.size() - 1);
  EXPECT_EQ(client.dtls.handshakes_completed(), client.completed_at.size());
  EXPECT_EQ(server.dtls.handshakes_completed(), server.completed_at.size());
  EXPECT_EQ(server.dtls.handshakes_failed(), 0u);

  // A captured epoch-0 packet replayed after its key retired is refused.
  for (Side* side : {&client, &server}) {
    ASSERT_FALSE(side->first_packet_of_epoch0.empty());
    std::vector<uint8_t> replay = side->first_packet_of_epoch0;
    size_t size = replay.size();
    EXPECT_EQ(side->rx.unprotect_rtp(replay.data(), size), SrtpStatus::kUnknownEpoch);
    EXPECT_EQ(side->rx.counters().unknown_epoch, 1u);
  }
}

}  // namespace
}  // namespace syncd::secure
