#include "rtp_media/receive_stream.h"

#include <algorithm>
#include <cstring>

namespace syncd::rtp_media {

ReceiveStream::ReceiveStream(ReceiveStreamConfig config, transport::PacketStore& store)
    : config_(config), store_(store), statistics_(config.clock_rate), jitter_(config.jitter) {}

void ReceiveStream::start_sender(uint32_t ssrc, uint64_t now_ns, jitter::FrameSink& sink) {
  if (sender_known_) {
    // The old sender's frames: the complete ones go out, the rest are dropped (their packets go
    // back to the store); then every per-sender state starts over, as for a first sender.
    jitter_.advance(now_ns + 3'600'000'000'000ull, sink);
    jitter_ = jitter::JitterBuffer(config_.jitter);
    nack_ = jitter::NackScheduler();
    skew_ = jitter::ClockSkewEstimator();
    statistics_ = rtp::ReceiverStatistics(config_.clock_rate);
    estimator_ = congestion::DelayBasedEstimator();
    if (have_rtt_) {
      jitter_.set_rtt(rtt_ns_);
      estimator_.set_rtt(rtt_ns_);
    }
  }
  sender_known_ = true;
  sender_ssrc_ = ssrc;
}

void ReceiveStream::on_arrival(uint64_t now_ns, std::optional<uint32_t> abs_send_time,
                               uint32_t bytes, bool probe_padding) {
  if (abs_send_time) estimator_.on_packet(now_ns, *abs_send_time, bytes, probe_padding);
}

bool ReceiveStream::accept(const rtp::RtpPacketView& view, std::span<const uint8_t> packet,
                           bool repaired, uint64_t now_ns, jitter::FrameSink& sink,
                           bool& no_buffer) {
  no_buffer = false;
  if (!repaired) statistics_.on_packet(view.sequence, view.timestamp, now_ns);
  const uint32_t h = store_.take();
  if (h == transport::PacketStore::kNone) {
    no_buffer = true;
    return false;
  }
  std::memcpy(store_.room(h).data(), packet.data(), packet.size());
  store_.set_size(h, packet.size());
  jitter::PacketIn in;
  in.sequence = view.sequence;
  in.rtp_timestamp = view.timestamp;
  in.marker = view.marker;
  in.starts_frame = config_.starts_frame && config_.starts_frame(view.payload);
  in.repaired = repaired;
  in.arrival_ns = now_ns;
  in.handle = h;
  in.length = uint32_t(packet.size());
  const bool accepted = jitter_.insert(in, now_ns, sink) == jitter::InsertResult::kAccepted;
  if (!accepted) store_.give_back(h);
  nack_.on_packet(jitter_.last_extended_sequence(), now_ns, repaired);
  return accepted;
}

void ReceiveStream::on_sender_report(uint64_t ntp_timestamp, uint32_t rtp_timestamp,
                                     uint64_t now_ns) {
  statistics_.on_sender_report(ntp_timestamp, now_ns);
  if (skew_.on_sender_report(jitter::ntp_to_ns(ntp_timestamp), rtp_timestamp, now_ns))
    jitter_.set_local_ns_per_tick(skew_.local_ns_per_tick());
}

void ReceiveStream::set_rtt(uint64_t rtt_ns) {
  rtt_ns_ = rtt_ns;
  have_rtt_ = true;
  jitter_.set_rtt(rtt_ns);
  estimator_.set_rtt(rtt_ns);
}

std::optional<rtp::ReportBlock> ReceiveStream::report_block(uint64_t now_ns) {
  if (!sender_known_ || !statistics_.valid()) return std::nullopt;
  return statistics_.make_report_block(sender_ssrc_, now_ns);
}

size_t ReceiveStream::collect_nacks(uint64_t now_ns, std::span<uint16_t> out) {
  return nack_.collect(now_ns, rtt_ns_, jitter_, out);
}

uint64_t ReceiveStream::next_wakeup_ns() const {
  return std::min(
      {jitter_.next_wakeup_ns(), nack_.next_wakeup_ns(rtt_ns_), estimator_.next_remb_ns()});
}

}  // namespace syncd::rtp_media
