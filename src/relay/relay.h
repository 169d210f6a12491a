// The WAN relay as syncd runs it (docs/wan.md): one session, sending (--relay-to) or receiving
// (--relay-listen), on its own thread, joined to the registry on the main loop by
// egress::EgressPublisher (sending) or RelaySource (receiving). Server owns one when the command
// line asks for it.
//
// Thread: the main loop thread.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>

#include "audio/capture_ring.h"
#include "egress/egress_publisher.h"
#include "media/stream_registry.h"
#include "relay/relay_config.h"
#include "relay/relay_session.h"
#include "relay/relay_source.h"
#include "secure/certificate.h"
#include "telemetry/prometheus.h"
#include "transport/transport_thread.h"

namespace syncd::relay {

// Where syncd keeps its relay identity unless --relay-cert says: $XDG_STATE_HOME/sync, else
// ~/.local/state/sync, relay-identity.pem.
std::string default_identity_path();
// The identity at `path`, or at the default path (its folders made, mode 0700) when empty:
// loaded, or made on first use (secure::load_or_create_identity).
secure::IdentityResult load_relay_identity(const std::string& path, secure::Identity& out);

class Relay {
 public:
  // Loads (or makes, mode 0600) the identity, starts the thread and binds the socket, and for a
  // sender adds the relay publisher to the registry. nullptr with a sentence in error.
  static std::unique_ptr<Relay> start(const RelayConfig& config, media::StreamRegistry& registry,
                                      uv_loop_t* loop, std::string& error);
  ~Relay();
  // Stops the thread (frames it held go back to their pools) and closes the received stream.
  void stop();
  void write_stats(nlohmann::json& out) const;
  void write_metrics(telemetry::PrometheusText& out) const;
  uint16_t local_port() const { return thread_ ? thread_->local_port() : 0; }

 private:
  Relay(const RelayConfig& config, media::StreamRegistry& registry);
  static void on_message(transport::FromTransport& message, void* self);
  void on_handshake_failed(const transport::FromTransport& message);
  // What an operator is told of a failed handshake: who, and what to change.
  std::string describe_failure(const transport::FromTransport& message) const;

  RelayConfig config_;
  media::StreamRegistry& registry_;
  secure::Identity identity_;
  RelaySession* session_ = nullptr;  // owned by the thread
  std::unique_ptr<transport::TransportThread> thread_;
  egress::EgressPublisher* publisher_ = nullptr;  // owned by the registry (sender)
  std::unique_ptr<RelaySource> source_;           // receiver
  std::string error_;  // the last failed handshake's description, until one completes
  static constexpr size_t kMaxSaid = 8;
  std::set<std::string> said_;  // the failures told on stderr (each once)
};

}  // namespace syncd::relay
