// Shared helpers of the secure_* tests: identities made once, and a client/server DTLS pair
// joined by in-memory queues.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "secure/certificate.h"
#include "secure/dtls_endpoint.h"

namespace syncd::secure::testing {

inline const Identity& client_identity() {
  static Identity identity = [] {
    Identity id;
    generate_identity(id);
    return id;
  }();
  return identity;
}

inline const Identity& server_identity() {
  static Identity identity = [] {
    Identity id;
    generate_identity(id);
    return id;
  }();
  return identity;
}

inline uint64_t monotonic_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

using Datagram = std::vector<uint8_t>;

// A client and a server endpoint; what each sends waits in the other's inbox until pump().
struct DtlsPair {
  explicit DtlsPair(DtlsConfig config = {}, const Fingerprint* client_expects = nullptr,
                    const Fingerprint* server_expects = nullptr)
      : DtlsPair(config, config, client_expects, server_expects) {}
  DtlsPair(DtlsConfig client_config, DtlsConfig server_config,
           const Fingerprint* client_expects = nullptr, const Fingerprint* server_expects = nullptr)
      : client_context(client_identity(), client_config),
        server_context(server_identity(), server_config) {
    client = std::make_unique<DtlsEndpoint>(
        client_context, DtlsRole::kClient,
        client_expects ? *client_expects : server_identity().fingerprint,
        [this](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
    server = std::make_unique<DtlsEndpoint>(
        server_context, DtlsRole::kServer,
        server_expects ? *server_expects : client_identity().fingerprint,
        [this](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); });
  }

  // Delivers queued datagrams both ways until none are left (or `rounds` passes); `drop` decides
  // per datagram (true: lost). Records the events each side reported.
  void pump(const std::function<bool(bool to_server, const Datagram&)>& drop = {},
            int rounds = 50) {
    for (int i = 0; i < rounds && (!to_server.empty() || !to_client.empty()); ++i) {
      std::deque<Datagram> s, c;
      s.swap(to_server);
      c.swap(to_client);
      for (const Datagram& d : s)
        if (!drop || !drop(true, d)) server_events.push_back(server->feed(d, kClientAddress, 0));
      for (const Datagram& d : c)
        if (!drop || !drop(false, d)) client_events.push_back(client->feed(d, kServerAddress, 0));
    }
  }

  bool connected() const {
    return client->state() == DtlsState::kConnected && server->state() == DtlsState::kConnected;
  }

  static constexpr uint8_t kClientAddressBytes[6] = {10, 0, 0, 1, 0x30, 0x39};
  static constexpr uint8_t kServerAddressBytes[6] = {10, 0, 0, 2, 0xd6, 0xd5};
  static constexpr std::span<const uint8_t> kClientAddress{kClientAddressBytes};
  static constexpr std::span<const uint8_t> kServerAddress{kServerAddressBytes};

  DtlsContext client_context;
  DtlsContext server_context;
  std::unique_ptr<DtlsEndpoint> client;
  std::unique_ptr<DtlsEndpoint> server;
  std::deque<Datagram> to_server;
  std::deque<Datagram> to_client;
  std::vector<DtlsEvent> client_events;
  std::vector<DtlsEvent> server_events;
};

}  // namespace syncd::secure::testing
