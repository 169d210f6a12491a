// libFuzzer target for the server side of syncd::secure::DtlsAssociations: the routing of DTLS
// datagrams by address (docs/wan.md "Routing DTLS datagrams between the live and the pending
// association", "Re-binding and liveness").
//
// A real client (the pinned certificate) and the server exchange their handshakes through a
// network the input drives: each operation byte picks one of: the client starts a handshake;
// the next client datagram reaches the server from one of four addresses, maybe with one byte
// flipped; the next server datagram reaches the client; a raw datagram from the input arrives
// from one of the addresses; time passes (retransmissions, the pending hold). Invariants: the
// live address is always one a completed handshake came from, and when both ends completed the
// same handshake they name the same epoch; nothing reads out of bounds (ASan).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "fuzz_check.h"
#include "secure/certificate.h"
#include "secure/dtls_associations.h"

namespace {

using namespace syncd::secure;

struct Identities {
  Identity server, client;
  Identities() {
    FUZZ_CHECK(generate_identity(server).ok());
    FUZZ_CHECK(generate_identity(client).ok());
  }
};

const Identities& identities() {
  static const Identities ids;
  return ids;
}

constexpr uint8_t kAddresses[4][6] = {
    {10, 0, 0, 1, 0x30, 0x39}, {10, 0, 0, 1, 0x30, 0x3a}, {203, 0, 113, 9, 1, 1}, {10, 0, 0, 2}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Identities& ids = identities();
  static DtlsContext server_context(ids.server, DtlsConfig{1200, 50, 3});
  static DtlsContext client_context(ids.client, DtlsConfig{1200, 50, 3});
  std::deque<std::vector<uint8_t>> to_server, to_client;
  DtlsAssociations server(
      server_context, DtlsRole::kServer, ids.client.fingerprint,
      [&](std::span<const uint8_t> d) {
        if (to_client.size() < 64) to_client.emplace_back(d.begin(), d.end());
      },
      200'000'000);
  DtlsAssociations client(client_context, DtlsRole::kClient, ids.server.fingerprint,
                          [&](std::span<const uint8_t> d) {
                            if (to_server.size() < 64) to_server.emplace_back(d.begin(), d.end());
                          });
  uint64_t now = 1'000'000'000;
  uint64_t server_completed = 0;
  size_t at = 0;
  auto next = [&]() -> uint8_t { return at < size ? data[at++] : 0; };
  for (int step = 0; step < 64 && at < size; ++step) {
    const uint8_t op = next();
    const std::span<const uint8_t> from(kAddresses[(op >> 3) & 3], 6);
    DtlsEvent event = DtlsEvent::kNone;
    switch (op & 7) {
      case 0:
        client.start_handshake(now);
        break;
      case 1:
      case 2: {
        if (to_server.empty()) break;
        std::vector<uint8_t> d = std::move(to_server.front());
        to_server.pop_front();
        if ((op & 7) == 2 && !d.empty()) d[next() % d.size()] ^= next() | 1;
        event = server.feed(d, from, now);
        break;
      }
      case 3:
        if (to_client.empty()) break;
        client.feed(to_client.front(), kAddresses[3], now);
        to_client.pop_front();
        break;
      case 4: {
        const size_t n = std::min<size_t>(next(), size - at);
        event = server.feed({data + at, n}, from, now);
        at += n;
        break;
      }
      default:
        now += uint64_t(next()) * 10'000'000;
        if (server.next_timeout_ns(now) <= now) event = server.handle_timeout(now);
        if (client.next_timeout_ns(now) <= now) client.handle_timeout(now);
        break;
    }
    if (event == DtlsEvent::kHandshakeComplete) {
      FUZZ_CHECK(server.handshakes_completed() == server_completed + 1);
      server_completed = server.handshakes_completed();
      FUZZ_CHECK(server.has_live());
      // Only a handshake that arrived from one of our addresses completes, from that address.
      bool known = false;
      for (const auto& a : kAddresses)
        known |= server.live_address().size() == 6 &&
                 std::memcmp(server.live_address().data(), a, 6) == 0;
      FUZZ_CHECK(known);
    }
    FUZZ_CHECK(server.live_address().size() <= 32);
    FUZZ_CHECK(server.pending_address().empty() || server.has_pending());
    if (server.has_live() && client.has_live() && !client.has_pending() &&
        server.handshakes_completed() == client.handshakes_completed() &&
        server.live()->keys().client_write == client.live()->keys().client_write)
      FUZZ_CHECK(server.completed_keys().epoch_id == client.completed_keys().epoch_id);
  }
  return 0;
}
