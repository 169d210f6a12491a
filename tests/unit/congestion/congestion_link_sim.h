// A simulated sender, bottleneck link and receiver around the congestion module, for the unit
// tests and the plot of docs/wan.md.
//
// Sender: a 60 fps encoder that follows the target rate (up to max_source_bps; frame sizes vary
// +/- frame_size_jitter around target / fps), packets of at most 1200 bytes of payload, the Pacer
// at the SendRateController's target, abs-send-time stamped as a packet leaves the pacer.
// Link: random loss at the entry, then a drop-tail FIFO served at the capacity of the moment
// (a schedule of steps), then propagation delay plus uniform jitter, in order (a packet never
// overtakes the one before it, as on one path). Receiver: the DelayBasedEstimator; a REMB when
// it is due and an RR (fraction lost, RFC 3550 style from sequence numbers) every rr_interval,
// both reaching the sender after feedback_delay. With delay_probes, the sender probes as the
// relay's does: for probe_ns the pacer runs at the controller's probe rate (x 1.05) and is kept
// fed with padding packets, which the receiver's estimator is told are padding. Deterministic
// for a seed; reads no clock.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "congestion/abs_send_time.h"
#include "congestion/delay_based_estimator.h"
#include "congestion/loss_based_estimator.h"
#include "congestion/pacer.h"

namespace syncd::congestion::sim {

inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSecond = 1'000'000'000;

struct CapacityStep {
  uint64_t from_ns;
  uint64_t bps;
};

struct LinkSimConfig {
  uint64_t seed = 1;
  uint64_t duration_ns = 30 * kSecond;
  std::vector<CapacityStep> capacity = {{0, 10'000'000}};
  uint64_t propagation_ns = 20 * kMs;
  uint64_t jitter_ns = 5 * kMs;  // uniform in [-jitter, +jitter]
  double random_loss = 0.0;      // at the link's entry
  // Gilbert-Elliott burst loss at the entry: the long-run loss fraction and the mean burst length
  // in packets (every packet in the bad state is lost).
  double burst_loss = 0.0;
  double mean_burst_packets = 4.0;
  uint64_t queue_limit_bytes = 250'000;  // drop-tail
  uint64_t feedback_delay_ns = 20 * kMs;
  uint64_t rr_interval_ns = 100 * kMs;
  uint32_t fps = 60;
  uint64_t max_source_bps = 20'000'000;
  double frame_size_jitter = 0.2;
  uint32_t max_payload_bytes = 1200;
  uint32_t packet_overhead_bytes = 36;  // RTP header, abs-send-time, GCM tag (UDP payload)
  uint32_t ip_udp_overhead_bytes = 28;  // on the link only
  uint64_t step_ns = 250'000;           // the sender's timer period
  uint64_t sample_ns = 100 * kMs;       // one CSV row / sample per this
  uint64_t start_bps = 8'000'000;
  uint64_t min_bps = 300'000;
  uint64_t max_bps = 25'000'000;
  uint64_t abs_send_time_offset_ns = 0;  // where the sender's clock starts (wrap tests)
  AimdConfig aimd;                       // rate bounds are overwritten from the fields above
  PacerConfig pacer;
  bool delay_probes = false;
  uint64_t probe_ns = 30 * kMs;
};

struct Sample {
  double t_s = 0;
  double capacity_bps = 0;
  double target_bps = 0;
  double remb_bps = 0;
  double loss_based_bps = 0;
  double delay_estimate_bps = 0;
  double received_bps = 0;    // at the receiver over the sample period (UDP payload)
  double link_bps = 0;        // into the bottleneck over the sample period, IP headers included
  double queue_delay_ms = 0;  // the largest bottleneck sojourn of a packet leaving in the period
  double pacer_delay_ms = 0;  // age of the pacer's head at the sample
  double loss_fraction = 0;   // packets lost on the link in the period / sent
  double congestion_point_bps = 0;  // AIMD's mean incoming rate at overuse (0: far from it)
  int usage = 0;                    // the detector's BandwidthUsage at the sample
};

struct LinkSimResult {
  std::vector<Sample> samples;
  DelayEstimatorCounters receiver;
  SendRateCounters sender;
  PacerCounters pacer;
  uint64_t link_drops_queue = 0;
  uint64_t link_drops_random = 0;
  uint64_t packets_sent = 0;
  uint64_t padding_packets = 0;
};

inline uint64_t capacity_at(const LinkSimConfig& config, uint64_t t) {
  uint64_t bps = config.capacity.front().bps;
  for (const CapacityStep& step : config.capacity) {
    if (step.from_ns <= t) bps = step.bps;
  }
  return bps;
}

inline LinkSimResult run_link_sim(const LinkSimConfig& config) {
  std::mt19937_64 rng(config.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  DelayEstimatorConfig receiver_config;
  receiver_config.rate = config.aimd;
  receiver_config.rate.min_bps = config.min_bps;
  receiver_config.rate.max_bps = config.max_bps;
  receiver_config.rate.start_bps = config.start_bps;
  DelayBasedEstimator receiver(receiver_config);

  SendRateConfig sender_config;
  sender_config.min_bps = config.min_bps;
  sender_config.max_bps = config.max_bps;
  sender_config.start_bps = config.start_bps;
  sender_config.delay_probes = config.delay_probes;
  SendRateController sender(sender_config);

  PacerConfig pacer_config = config.pacer;
  pacer_config.initial_target_bps = config.start_bps;
  Pacer pacer(pacer_config);

  struct InFlight {
    uint64_t arrival_ns;
    uint64_t send_ns;
    uint32_t size;
    uint64_t seq;
    bool padding;
  };
  struct Feedback {
    uint64_t at_ns;
    bool is_remb;
    uint64_t remb_bps;
    uint8_t fraction_lost_q8;
  };
  std::deque<std::pair<uint64_t, uint32_t>> bottleneck;  // (departure, wire bytes) still queued
  uint64_t bottleneck_bytes = 0;
  uint64_t last_departure_ns = 0;
  uint64_t last_arrival_ns = 0;
  std::deque<InFlight> in_flight;
  std::deque<Feedback> feedback;
  std::vector<uint32_t> packet_sizes;  // by id (the pacer's handle), the UDP payload size
  std::vector<bool> packet_padding;    // by id: a probe's padding
  packet_sizes.reserve(1 << 20);
  bool probing = false;
  uint64_t probe_bps = 0;
  uint64_t probe_started_ns = 0;

  LinkSimResult result;
  uint64_t next_frame_ns = 0;
  uint64_t next_sample_ns = config.sample_ns;
  uint64_t next_rr_ns = config.rr_interval_ns;
  uint64_t seq = 0;
  uint64_t highest_seq_received = 0;
  bool received_any = false;
  uint64_t rr_base_highest = 0;
  uint64_t rr_received = 0;
  uint64_t period_bytes_received = 0;
  uint64_t period_link_bytes = 0;
  double period_max_queue_ms = 0;
  uint64_t period_sent = 0;
  uint64_t period_lost = 0;
  PacedPacket batch[64];
  bool burst_bad = false;
  const double leave_bad = 1.0 / config.mean_burst_packets;
  const double enter_bad =
      config.burst_loss > 0 ? leave_bad * config.burst_loss / (1 - config.burst_loss) : 0;

  for (uint64_t now = 0; now <= config.duration_ns; now += config.step_ns) {
    // Feedback reaching the sender.
    while (!feedback.empty() && feedback.front().at_ns <= now) {
      const Feedback& f = feedback.front();
      if (f.is_remb) {
        sender.on_remb(now, f.remb_bps);
      } else {
        sender.on_receiver_report(now, f.fraction_lost_q8,
                                  2 * config.propagation_ns + config.feedback_delay_ns / 2);
      }
      feedback.pop_front();
    }
    pacer.set_target_rate(sender.target_bps());

    // A probe: the pacer at its rate, fed with padding.
    if (config.delay_probes) {
      if (probing && now - probe_started_ns >= config.probe_ns) {
        probing = false;
        pacer.set_pacing(config.pacer.pacing_factor, config.pacer.drain_within_ns);
      }
      if (!probing) {
        if (const uint64_t bps = sender.delay_probe_bps(now)) {
          probing = true;
          probe_bps = bps;
          probe_started_ns = now;
          sender.on_delay_probe_sent(now);
          pacer.set_pacing(1.05, config.pacer.drain_within_ns);
        }
      }
      if (probing) {
        pacer.set_target_rate(probe_bps);
        while (pacer.queued_packets() < 2) {
          const uint32_t size = config.max_payload_bytes + config.packet_overhead_bytes;
          pacer.enqueue(now, packet_sizes.size(), size);
          packet_sizes.push_back(size);
          packet_padding.push_back(true);
          ++result.padding_packets;
        }
      }
    }

    // The encoder.
    if (now >= next_frame_ns) {
      next_frame_ns += kSecond / config.fps;
      const double rate = std::min<double>(sender.target_bps(), config.max_source_bps);
      const double jitter = 1 + config.frame_size_jitter * (2 * unit(rng) - 1);
      uint64_t frame_bytes = static_cast<uint64_t>(rate / 8 / config.fps * jitter);
      frame_bytes = std::max<uint64_t>(frame_bytes, 1);
      while (frame_bytes > 0) {
        const uint32_t payload =
            static_cast<uint32_t>(std::min<uint64_t>(frame_bytes, config.max_payload_bytes));
        frame_bytes -= payload;
        const uint32_t size = payload + config.packet_overhead_bytes;
        pacer.enqueue(now, packet_sizes.size(), size);
        packet_sizes.push_back(size);
        packet_padding.push_back(false);
      }
    }

    // The pacer's timer.
    for (;;) {
      const size_t n = pacer.pop_due(now, batch);
      for (size_t i = 0; i < n; ++i) {
        if (batch[i].disposition != PacketDisposition::kSend) continue;
        ++result.packets_sent;
        ++period_sent;
        const uint64_t this_seq = ++seq;
        const uint32_t wire = batch[i].size_bytes + config.ip_udp_overhead_bytes;
        // Link entry: random loss, then the drop-tail queue.
        while (!bottleneck.empty() && bottleneck.front().first <= now) {
          bottleneck_bytes -= bottleneck.front().second;
          bottleneck.pop_front();
        }
        if (config.burst_loss > 0) burst_bad = unit(rng) < (burst_bad ? 1 - leave_bad : enter_bad);
        if (burst_bad || (config.random_loss > 0 && unit(rng) < config.random_loss)) {
          ++result.link_drops_random;
          ++period_lost;
          continue;
        }
        if (bottleneck_bytes + wire > config.queue_limit_bytes) {
          ++result.link_drops_queue;
          ++period_lost;
          continue;
        }
        const uint64_t start = std::max(now, last_departure_ns);
        const uint64_t departure = start + wire * 8 * kSecond / capacity_at(config, start);
        last_departure_ns = departure;
        bottleneck.emplace_back(departure, wire);
        bottleneck_bytes += wire;
        period_link_bytes += wire;
        period_max_queue_ms =
            std::max(period_max_queue_ms, static_cast<double>(departure - now) / 1e6);
        const double jitter = (2 * unit(rng) - 1) * static_cast<double>(config.jitter_ns);
        uint64_t arrival = departure + config.propagation_ns +
                           static_cast<uint64_t>(std::llround(jitter + config.jitter_ns)) -
                           config.jitter_ns;
        arrival = std::max(arrival, last_arrival_ns);  // one path: no overtaking
        last_arrival_ns = arrival;
        in_flight.push_back(
            InFlight{arrival, now, batch[i].size_bytes, this_seq, packet_padding[batch[i].id]});
      }
      if (n < std::size(batch)) break;
    }

    // The receiver.
    while (!in_flight.empty() && in_flight.front().arrival_ns <= now) {
      const InFlight& p = in_flight.front();
      receiver.on_packet(p.arrival_ns,
                         abs_send_time_from_ns(p.send_ns + config.abs_send_time_offset_ns), p.size,
                         p.padding);
      period_bytes_received += p.size;
      ++rr_received;
      if (!received_any || p.seq > highest_seq_received) highest_seq_received = p.seq;
      received_any = true;
      in_flight.pop_front();
    }
    if (const auto remb = receiver.take_remb(now)) {
      feedback.push_back(Feedback{now + config.feedback_delay_ns, true, *remb, 0});
    }
    if (now >= next_rr_ns) {
      next_rr_ns += config.rr_interval_ns;
      const uint64_t expected = highest_seq_received - rr_base_highest;
      const uint64_t lost = expected > rr_received ? expected - rr_received : 0;
      const uint8_t fraction =
          expected > 0 ? static_cast<uint8_t>(std::min<uint64_t>(lost * 256 / expected, 255)) : 0;
      rr_base_highest = highest_seq_received;
      rr_received = 0;
      feedback.push_back(Feedback{now + config.feedback_delay_ns, false, 0, fraction});
    }

    if (now >= next_sample_ns) {
      next_sample_ns += config.sample_ns;
      Sample s;
      s.t_s = static_cast<double>(now) / 1e9;
      s.capacity_bps = static_cast<double>(capacity_at(config, now));
      s.target_bps = static_cast<double>(sender.target_bps());
      s.remb_bps = static_cast<double>(sender.remb_bps());
      s.loss_based_bps = static_cast<double>(sender.loss_based_bps());
      s.delay_estimate_bps = static_cast<double>(receiver.estimate_bps());
      s.received_bps =
          static_cast<double>(period_bytes_received) * 8e9 / static_cast<double>(config.sample_ns);
      s.link_bps =
          static_cast<double>(period_link_bytes) * 8e9 / static_cast<double>(config.sample_ns);
      s.queue_delay_ms = period_max_queue_ms;
      s.pacer_delay_ms = static_cast<double>(pacer.oldest_age_ns(now)) / 1e6;
      s.loss_fraction =
          period_sent ? static_cast<double>(period_lost) / static_cast<double>(period_sent) : 0;
      s.congestion_point_bps = static_cast<double>(receiver.rate_control().capacity_estimate_bps());
      s.usage = static_cast<int>(receiver.usage());
      result.samples.push_back(s);
      period_bytes_received = 0;
      period_link_bytes = 0;
      period_max_queue_ms = 0;
      period_sent = 0;
      period_lost = 0;
    }
  }
  result.receiver = receiver.counters();
  result.sender = sender.counters();
  result.pacer = pacer.counters();
  return result;
}

// Writes the samples as CSV (the plot script's input, tools/congestion_plot.py).
inline bool write_samples_csv(const char* path, const std::vector<Sample>& samples) {
  std::FILE* file = std::fopen(path, "w");
  if (!file) return false;
  std::fprintf(file,
               "t_s,capacity_bps,target_bps,remb_bps,loss_based_bps,delay_estimate_bps,"
               "received_bps,link_bps,queue_delay_ms,pacer_delay_ms,loss_fraction\n");
  for (const Sample& s : samples) {
    std::fprintf(file, "%.3f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.3f,%.3f,%.4f\n", s.t_s,
                 s.capacity_bps, s.target_bps, s.remb_bps, s.loss_based_bps, s.delay_estimate_bps,
                 s.received_bps, s.link_bps, s.queue_delay_ms, s.pacer_delay_ms, s.loss_fraction);
  }
  return std::fclose(file) == 0;
}

}  // namespace syncd::congestion::sim
