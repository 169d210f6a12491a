#include "relay/relay.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "transport/socket_address.h"

namespace syncd::relay {

std::string default_identity_path() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state)
    return std::string(state) + "/sync/relay-identity.pem";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/sync/relay-identity.pem";
}

secure::IdentityResult load_relay_identity(const std::string& path, secure::Identity& out) {
  if (!path.empty()) return secure::load_or_create_identity(path, out);
  const std::string file = default_identity_path();
  // mkdir -p of the folders, private: the key sits in the last.
  for (size_t slash = file.find('/', 1); slash != std::string::npos;
       slash = file.find('/', slash + 1))
    ::mkdir(file.substr(0, slash).c_str(), 0700);
  return secure::load_or_create_identity(file, out);
}

Relay::Relay(const RelayConfig& config, media::StreamRegistry& registry)
    : config_(config), registry_(registry) {}

Relay::~Relay() {
  stop();
}

std::unique_ptr<Relay> Relay::start(const RelayConfig& config, media::StreamRegistry& registry,
                                    uv_loop_t* loop, std::string& error) {
  std::unique_ptr<Relay> relay(new Relay(config, registry));
  const secure::IdentityResult id = load_relay_identity(config.identity_path, relay->identity_);
  if (!id.ok()) {
    error = id.message;
    return nullptr;
  }
  RelaySessionConfig sc;
  sc.sender = config.sender;
  sc.peer = config.peer_fingerprint;
  sc.keys.rekey_interval_ns = config.rekey_interval_s * 1'000'000'000ull;
  if (config.sender && config.audio_ring) {
    uint32_t count = 0;
    if (!parse_channel_selection(config.audio_channels, config.audio_ring->channels(),
                                 sc.audio_send.channel_map, count, error)) {
      error = "--relay-audio-channels: " + error;
      return nullptr;
    }
    if (count > 0) {
      sc.audio_send.ring = config.audio_ring;
      sc.audio_send.channels = count;
      sc.audio_send.bitrate_per_channel = config.audio_bitrate;
    }
  }
  if (!config.sender) {
    sc.audio_receive_ring = config.audio_ring;
    sc.audio_target_ns = uint64_t(config.audio_target_ms) * 1'000'000;
  }
  auto session = std::make_unique<RelaySession>(sc, relay->identity_);
  relay->session_ = session.get();
  transport::TransportThreadConfig tc;
  if (config.sender) {
    tc.peer_host = config.host;
    tc.peer_port = config.port;
  } else {
    tc.bind_host = config.host.empty() ? "0.0.0.0" : config.host;
    tc.bind_port = config.port;
  }
  relay->thread_ = std::make_unique<transport::TransportThread>(tc, std::move(session),
                                                                &Relay::on_message, relay.get());
  if (!relay->thread_->start(loop, error)) return nullptr;
  if (config.sender) {
    auto publisher = std::make_unique<egress::EgressPublisher>(*relay->thread_, config.stream, loop,
                                                               config.encode);
    publisher->forward_to_source(&registry, media::KeyframeReason::kRelay);
    relay->publisher_ = publisher.get();
    registry.add_publisher(std::move(publisher));
  } else {
    relay->source_ = std::make_unique<RelaySource>(registry, *relay->thread_, loop);
  }
  return relay;
}

void Relay::stop() {
  // The decoder's frames in flight read the relay's buffers: finished before the thread stops.
  if (source_) source_->close();
  if (thread_) thread_->stop();  // the frames the session held come back as kFrameDone
  if (source_) source_->stop();
}

void Relay::on_message(transport::FromTransport& m, void* context) {
  auto* self = static_cast<Relay*>(context);
  switch (m.kind) {
    case transport::FromTransport::Kind::kFrameDone:
      if (self->publisher_) self->publisher_->on_frame_done(m);
      break;
    case transport::FromTransport::Kind::kFrameIn:
      if (self->source_) self->source_->on_frame_in(m, core::monotonic_ns());
      break;
    case transport::FromTransport::Kind::kDescription:
      if (self->source_) self->source_->on_description(m.description);
      break;
    case transport::FromTransport::Kind::kPeerEnded:
      if (self->source_) self->source_->on_peer_ended();
      break;
    case transport::FromTransport::Kind::kKeyframeRequest:
      if (self->publisher_) self->publisher_->on_keyframe_request();
      break;
    case transport::FromTransport::Kind::kTargetRate:
      if (self->publisher_) self->publisher_->on_target_rate(m.target_bps, m.media_bps);
      break;
    case transport::FromTransport::Kind::kHandshakeFailed:
      self->on_handshake_failed(m);
      break;
    case transport::FromTransport::Kind::kConnected:
      // A sender that had failed encodes again; an operator who read why it failed reads that
      // it is over.
      if (self->publisher_) self->publisher_->set_active(true);
      if (!self->error_.empty()) std::fprintf(stderr, "syncd: relay: connected\n");
      self->error_.clear();
      break;
  }
}

std::string Relay::describe_failure(const transport::FromTransport& m) const {
  const auto failure = secure::DtlsFailure(m.failure);
  const std::string peer =
      config_.sender ? "the receiver at " + config_.host + ":" + std::to_string(config_.port)
                     : "a sender at " + transport::format_address(transport::address_from_bytes(
                                            std::span(m.address.data(), m.address_size)));
  const std::string ours = secure::format_fingerprint(identity_.fingerprint);
  switch (failure) {
    case secure::DtlsFailure::kFingerprintMismatch:
      return peer + " presented certificate " + secure::format_fingerprint(m.fingerprint) +
             ", not --peer-fingerprint " + secure::format_fingerprint(config_.peer_fingerprint);
    case secure::DtlsFailure::kPeerAlert:
      return peer + " refused the handshake (" + secure::alert_name(m.alert) +
             "): its --peer-fingerprint must be this syncd's " + ours;
    default:
      return peer + ": " + secure::to_string(failure);
  }
}

void Relay::on_handshake_failed(const transport::FromTransport& m) {
  error_ = describe_failure(m);
  // A sender the peer does not take (or that does not take the peer) stops encoding until a
  // handshake completes: nothing it made could be sent.
  if (m.session_failed && publisher_) publisher_->set_active(false);
  // Each distinct reason once (a handful at most: a stranger trying many certificates is not
  // let fill the log); /stats keeps the last one.
  if (said_.size() < kMaxSaid && said_.insert(error_).second)
    std::fprintf(stderr, "syncd: relay: %s\n", error_.c_str());
}

void Relay::write_stats(nlohmann::json& out) const {
  const RelaySessionStats& s = session_->stats();
  const transport::SocketCounters& k = thread_->counters();
  auto v = [](const auto& atomic) { return atomic.load(std::memory_order_relaxed); };
  nlohmann::json j = {
      {"role", config_.sender ? "sender" : "receiver"},
      {"peer", config_.sender ? config_.host + ":" + std::to_string(config_.port) : ""},
      {"local_port", thread_->local_port()},
      {"fingerprint", secure::format_fingerprint(identity_.fingerprint)},
      {"state", RelaySession::state_name(RelaySession::State(v(s.state)))},
      {"error", error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_)},
      {"keys",
       {{"handshakes", v(s.handshakes)},
        {"send_epoch", v(s.send_epoch)},
        {"rekeys", v(s.rekeys)},
        {"rekeys_started", v(s.rekeys_started)},
        {"dtls_failures", v(s.dtls_failures)},
        {"fingerprint_mismatches", v(s.fingerprint_mismatches)},
        {"peer_alerts", v(s.peer_alerts)},
        {"last_failure", v(s.last_failure) ? nlohmann::json(secure::to_string(
                                                 secure::DtlsFailure(v(s.last_failure))))
                                           : nlohmann::json(nullptr)},
        {"handshake_backoff_ms", v(s.handshake_backoff_ms)},
        {"epoch_collisions", v(s.epoch_collisions)}}},
      {"peer_changes",
       {{"peer_rebinds", v(s.peer_rebinds)},
        {"peer_restarts", v(s.peer_restarts)},
        {"peer_lost", v(s.peer_lost)}}},
      {"refused",
       {{"foreign_datagrams", v(s.foreign_datagrams)},
        {"foreign_unknown", v(s.foreign_unknown)},
        {"foreign_before_keys", v(s.foreign_before_keys)},
        {"foreign_not_peer", v(s.foreign_not_peer)},
        {"dtls", v(s.dtls_refused)},
        {"dtls_preempted", v(s.dtls_preempted)},
        {"dtls_cookie_challenges", v(s.dtls_cookie_challenges)},
        {"dtls_hellos_dropped", v(s.dtls_hellos_dropped)},
        {"srtp", v(s.srtp_refused)},
        {"srtp_auth_failed", v(s.srtp_auth_failed)},
        {"srtp_replayed", v(s.srtp_replayed)},
        {"srtp_unknown_epoch", v(s.srtp_unknown_epoch)},
        {"srtp_malformed", v(s.srtp_malformed)},
        {"rtp", v(s.rtp_refused)},
        {"rtcp", v(s.rtcp_refused)}}},
      {"rtt_us", v(s.rtt_us)},
      {"socket",
       {{"datagrams_received", v(k.datagrams_received)},
        {"bytes_received", v(k.bytes_received)},
        {"datagrams_sent", v(k.datagrams_sent)},
        {"bytes_sent", v(k.bytes_sent)},
        {"send_dropped", v(k.send_dropped)},
        {"send_errors", v(k.send_errors)},
        {"receive_batches", v(k.receive_batches)}}},
  };
  if (config_.sender) {
    j["sender"] = {{"frames_sent", v(s.frames_sent)},
                   {"frames_refused", v(s.frames_refused)},
                   {"packets_sent", v(s.packets_sent)},
                   {"fec_packets_sent", v(s.fec_packets_sent)},
                   {"rtx_packets_sent", v(s.rtx_packets_sent)},
                   {"nacked_packets", v(s.nacked_packets)},
                   {"nacked_unavailable", v(s.nacked_unavailable)},
                   {"nacked_again_at_once", v(s.nacked_again_at_once)},
                   {"rtx_second_copies", v(s.rtx_second_copies)},
                   {"nacked_over_budget", v(s.nacked_over_budget)},
                   {"pacer_expired", v(s.pacer_expired)},
                   {"frames_on_wire", v(s.frames_on_wire)},
                   {"frame_on_wire_ns_total", v(s.frame_on_wire_ns_total)},
                   {"frame_on_wire_ns_max", v(s.frame_on_wire_ns_max)},
                   {"tail_probes", v(s.tail_probes)},
                   {"no_packet_buffer", v(s.no_packet_buffer)},
                   {"target_bps", v(s.target_bps)},
                   {"media_bps", v(s.media_bps)},
                   {"fec_loss_samples_congested", v(s.fec_loss_samples_congested)},
                   {"probes", v(s.probes)},
                   {"probes_carried", v(s.probes_carried)},
                   {"probe_padding_packets", v(s.probe_padding_packets)},
                   {"delay_probes", v(s.delay_probes)},
                   {"delay_probes_raised", v(s.delay_probes_raised)},
                   {"remb_bps", v(s.remb_bps)},
                   {"peer_fraction_lost", v(s.peer_fraction_lost)},
                   {"keyframe_requests_received", v(s.keyframe_requests)}};
    const RelayAudioStats& a = s.audio;
    if (config_.audio_ring)
      j["sender"]["audio"] = {{"channels", v(a.channels)},
                              {"frames_encoded", v(a.frames_encoded)},
                              {"frames_sent", v(a.frames_sent)},
                              {"packets_sent", v(a.packets_sent)},
                              {"bytes_sent", v(a.bytes_sent)},
                              {"encode_errors", v(a.encode_errors)},
                              {"capture_gaps", v(a.capture_gaps)},
                              {"encode_us", v(a.encode_us)},
                              {"expected_loss_percent", v(a.expected_loss_percent)}};
  } else {
    nlohmann::json source;
    source_->write_stats(source);
    j["receiver"] = {
        {"packets_received", v(s.packets_received)},
        {"packets_recovered_fec", v(s.packets_recovered_fec)},
        {"packets_recovered_rtx", v(s.packets_recovered_rtx)},
        {"fec_rebuilt", v(s.fec_rebuilt)},
        {"rtx_received", v(s.rtx_received)},
        {"originals_after_repair", v(s.originals_after_repair)},
        {"frames_complete", v(s.frames_complete)},
        {"frames_dropped", v(s.frames_dropped)},
        {"frames_dropped_by_reason",
         {{"incomplete", v(s.frames_dropped_by[size_t(jitter::DropReason::kIncomplete)])},
          {"lost", v(s.frames_dropped_by[size_t(jitter::DropReason::kLost)])},
          {"evicted", v(s.frames_dropped_by[size_t(jitter::DropReason::kEvicted)])}}},
        {"frames_malformed", v(s.frames_malformed)},
        {"frames_no_buffer", v(s.frames_no_buffer)},
        {"nacks_sent", v(s.nacks_sent)},
        {"nacks_repeated", v(s.nacks_repeated)},
        {"nack",
         {{"requested", v(s.nack_requested)},
          {"retried", v(s.nack_retried)},
          {"given_up_deadline", v(s.nack_given_up_deadline)},
          {"given_up_tries", v(s.nack_given_up_tries)}}},
        {"keyframe_requests_sent", v(s.keyframe_requests)},
        {"estimate_bps", v(s.estimate_bps)},
        {"probes",
         {{"padding_received", v(s.probe_padding_received)},
          {"measured", v(s.probes_measured)},
          {"raised", v(s.probes_raised)},
          {"last_send_bps", v(s.last_probe_send_bps)},
          {"last_receive_bps", v(s.last_probe_receive_bps)}}},
        {"jitter_target_us", v(s.jitter_target_us)},
        {"skew_ppm", v(s.skew_ppm_milli) / 1000.0},
        {"source", source}};
    const RelayAudioStats& a = s.audio;
    // Every frame from the first on: played + recovered_fec + concealed (by reason).
    j["receiver"]["audio"] = {
        {"channels", v(a.channels)},
        {"packets_received", v(a.packets_received)},
        {"packets_late", v(a.packets_late)},
        {"packets_duplicate", v(a.packets_duplicate)},
        {"packets_overflow", v(a.packets_overflow)},
        {"packets_refused", v(a.packets_refused)},
        {"frames_played", v(a.frames_played)},
        {"frames_recovered_fec", v(a.frames_recovered_fec)},
        {"recovered_with_lbrr_possible", v(a.recovered_lbrr)},
        {"frames_concealed", v(a.frames_concealed_lost) + v(a.frames_concealed_underflow)},
        {"frames_concealed_by_reason",
         {{"lost", v(a.frames_concealed_lost)}, {"underflow", v(a.frames_concealed_underflow)}}},
        {"underflows", v(a.underflows)},
        {"stalls", v(a.stalls)},
        {"restarts", v(a.restarts)},
        {"decode_errors", v(a.decode_errors)},
        {"ring_overflow_frames", v(a.ring_overflow_frames)},
        {"samples_written", v(a.samples_written)},
        {"decode_us", v(a.decode_us)},
        {"latency_us",
         {{"samples", v(a.latency_samples)},
          {"last", int64_t(a.latency_last_us.load())},
          {"min", int64_t(a.latency_min_us.load())},
          {"mean", int64_t(a.latency_mean_us.load())},
          {"max", int64_t(a.latency_max_us.load())}}}};
  }
  out["relay"] = std::move(j);
}

void Relay::write_metrics(telemetry::PrometheusText& out) const {
  const RelaySessionStats& s = session_->stats();
  auto v = [](const auto& atomic) { return uint64_t(atomic.load(std::memory_order_relaxed)); };
  out.family("syncd_relay_handshakes_total", "counter", "DTLS handshakes the relay completed.");
  out.sample("syncd_relay_handshakes_total", "", v(s.handshakes));
  out.family("syncd_relay_refused_total", "counter",
             "Datagrams the relay refused, by what was wrong with them.");
  out.sample("syncd_relay_refused_total", "what=\"foreign\"", v(s.foreign_datagrams));
  out.sample("syncd_relay_refused_total", "what=\"dtls\"", v(s.dtls_refused));
  out.sample("syncd_relay_refused_total", "what=\"srtp\"", v(s.srtp_refused));
  out.sample("syncd_relay_refused_total", "what=\"rtp\"", v(s.rtp_refused));
  out.sample("syncd_relay_refused_total", "what=\"rtcp\"", v(s.rtcp_refused));
  out.family("syncd_relay_peer_changes_total", "counter",
             "Receiver: handshakes completed from a new address (rebind) and new senders "
             "(restart); sender: liveness timeouts that started a fresh handshake (lost).");
  out.sample("syncd_relay_peer_changes_total", "what=\"rebind\"", v(s.peer_rebinds));
  out.sample("syncd_relay_peer_changes_total", "what=\"restart\"", v(s.peer_restarts));
  out.sample("syncd_relay_peer_changes_total", "what=\"lost\"", v(s.peer_lost));
  out.family("syncd_relay_rtt_seconds", "gauge", "Round trip to the relay's peer.");
  out.sample("syncd_relay_rtt_seconds", "", double(v(s.rtt_us)) / 1e6);
  if (!config_.sender) {
    out.family("syncd_relay_frames_received_total", "counter",
               "Access units the relay completed, and those it gave up on.");
    out.sample("syncd_relay_frames_received_total", "outcome=\"complete\"", v(s.frames_complete));
    out.sample("syncd_relay_frames_received_total", "outcome=\"dropped\"", v(s.frames_dropped));
    out.sample("syncd_relay_frames_received_total", "outcome=\"malformed\"", v(s.frames_malformed));
    if (const decode::DecodeStage* decoder = source_ ? source_->decoder() : nullptr) {
      const media::Stream* stream = source_->stream();
      std::string labels;
      if (stream)
        labels = "stream=\"" + telemetry::prometheus_label_value(stream->config().name) + "\"";
      decode::DecodeStage::write_metrics(out, "syncd_relay_decoder", {{labels, decoder}});
    }
  }
}

}  // namespace syncd::relay
