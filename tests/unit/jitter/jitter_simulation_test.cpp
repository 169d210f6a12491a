// The receiver's timing pieces together over a simulated WAN path: 60 fps frames of random
// packet counts, 20 +/- 5 ms one-way delay (so packets reorder), 1 % random loss, NACKs answered
// by a retransmission one round trip later, a sender clock 100 ppm fast mapped through RTCP SRs.
// The bar: no frame lost after repair, and the release delay over the one-way delay
// under one frame interval at the median.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <queue>
#include <random>
#include <vector>

#include "jitter/clock_skew.h"
#include "jitter/jitter_buffer.h"
#include "jitter/nack_scheduler.h"
#include "jitter_test_support.h"

namespace syncd::jitter {
namespace {

using testing::kMs;
using testing::RecordingSink;

constexpr uint64_t kFrameNs = 16'666'667;

struct SimulationOptions {
  uint32_t seed = 1;
  int frames = 3600;  // 60 s
  double loss = 0.01;
  double retransmission_loss = 0.0;
  bool start_hints = true;
  ReleaseMode mode = ReleaseMode::kPlayout;
  double sender_ppm = 100;
};

struct SimulationResult {
  size_t frames_released = 0;
  uint64_t frames_dropped = 0;
  uint64_t packets_lost_on_path = 0;
  std::vector<int64_t> release_over_one_way;  // release - send - 20 ms, per frame
  NackCounters nack;
  JitterBufferCounters buffer;
  uint64_t allowance_ns = 0;
  uint32_t allowance_packets = 0;
};

SimulationResult simulate(const SimulationOptions& options) {
  struct Event {
    uint64_t at;
    int kind;  // 0: packet arrives, 1: NACK reaches the sender, 2: SR arrives
    PacketIn packet;
    uint64_t sender_ns;
    bool operator>(const Event& other) const { return at > other.at; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<uint64_t> path_delay(15 * kMs, 25 * kMs);
  std::uniform_real_distribution<double> uniform(0, 1);
  const uint64_t start = 10'000 * kMs;
  const auto sender_clock = [&](uint64_t local) {
    return static_cast<uint64_t>(
        std::llround(static_cast<double>(local) * (1 + options.sender_ppm * 1e-6)));
  };
  const auto rtp_of = [&](uint64_t local) {
    return static_cast<uint32_t>(static_cast<uint64_t>(
        std::llround(static_cast<double>(sender_clock(local)) * 90000 / 1e9)));
  };

  // The sender: every packet, kept for retransmission; its send time per frame.
  std::vector<PacketIn> sent;
  std::vector<uint64_t> frame_send_ns;
  SimulationResult result;
  uint16_t sequence = static_cast<uint16_t>(rng());
  for (int f = 0; f < options.frames; ++f) {
    const uint64_t send = start + f * kFrameNs;
    frame_send_ns.push_back(send);
    // A keyframe every second (40 packets), else 1-12 packets.
    const int count = f % 60 == 0 ? 40 : 1 + static_cast<int>(rng() % 12);
    for (int p = 0; p < count; ++p) {
      // Paced at 80 us per packet (~15 Mbit/s of 1,200-byte packets).
      const uint64_t packet_send = send + p * 80'000;
      PacketIn packet = testing::make_packet(sequence, rtp_of(send), p == count - 1,
                                             options.start_hints && p == 0, 0,
                                             static_cast<uint32_t>(sent.size()));
      if (f == 0 && p == 0) packet.starts_frame = true;  // the stream's first packet
      sent.push_back(packet);
      ++sequence;
      if (uniform(rng) < options.loss) {
        ++result.packets_lost_on_path;
        continue;
      }
      packet.arrival_ns = packet_send + path_delay(rng);
      events.push({packet.arrival_ns, 0, packet, 0});
    }
  }
  for (uint64_t t = start; t < start + options.frames * kFrameNs; t += 500 * kMs) {
    events.push({t + path_delay(rng), 2, PacketIn{}, t});
  }

  JitterBufferConfig config;
  config.mode = options.mode;
  JitterBuffer buffer(config);
  NackScheduler nack;
  ClockSkewEstimator skew;
  RecordingSink sink;
  const uint64_t rtt = 40 * kMs;  // the mean of two 15-25 ms legs
  buffer.set_rtt(rtt);
  std::array<uint16_t, 64> nacked{};
  const uint64_t end = start + options.frames * kFrameNs + 2'000 * kMs;
  for (uint64_t now = start; now < end; now += kMs) {
    while (!events.empty() && events.top().at <= now) {
      const Event event = events.top();
      events.pop();
      if (event.kind == 0) {
        buffer.insert(event.packet, event.at, sink);
        nack.on_packet(buffer.last_extended_sequence(), event.at, event.packet.repaired);
      } else if (event.kind == 1) {
        // The sender retransmits (RTX); it arrives one forward leg later, flagged repaired.
        PacketIn packet = sent[event.packet.handle];
        if (uniform(rng) < options.retransmission_loss) continue;
        packet.repaired = true;
        packet.arrival_ns = event.at + path_delay(rng);
        events.push({packet.arrival_ns, 0, packet, 0});
      } else {
        skew.on_sender_report(sender_clock(event.sender_ns), rtp_of(event.sender_ns), event.at);
        buffer.set_local_ns_per_tick(skew.local_ns_per_tick());
      }
    }
    buffer.advance(now, sink);
    const size_t count = nack.collect(now, rtt, buffer, nacked);
    for (size_t i = 0; i < count; ++i) {
      // Find the packet by its 16-bit number among the recent ones, as the sender's history.
      for (size_t j = sent.size(); j-- > 0;) {
        if (sent[j].sequence == nacked[i]) {
          PacketIn request;
          request.handle = static_cast<uint32_t>(j);
          if (now >= start + (j > 0 ? 0 : 0)) events.push({now + path_delay(rng), 1, request, 0});
          break;
        }
      }
    }
  }
  for (const auto& frame : sink.frames) {
    // The frame's index from its packets' handles: handles are indices into `sent`.
    size_t index = 0;
    for (size_t f = 0; f < frame_send_ns.size(); ++f) {
      if (rtp_of(frame_send_ns[f]) == frame.rtp_timestamp) {
        index = f;
        break;
      }
    }
    result.release_over_one_way.push_back(static_cast<int64_t>(frame.release_ns) -
                                          static_cast<int64_t>(frame_send_ns[index]) -
                                          static_cast<int64_t>(20 * kMs));
  }
  result.frames_released = sink.frames.size();
  for (uint64_t dropped : buffer.counters().frames_dropped) result.frames_dropped += dropped;
  result.nack = nack.counters();
  result.allowance_ns = nack.reorder_allowance_ns();
  result.allowance_packets = nack.reorder_allowance_packets();
  result.buffer = buffer.counters();
  EXPECT_NEAR(skew.skew_ppm(), options.sender_ppm, 10.0);
  return result;
}

int64_t percentile(std::vector<int64_t> values, int p) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) * p / 100];
}

void print(const char* name, const SimulationResult& r) {
  std::printf(
      "%s: %zu frames released, %llu dropped; path lost %llu packets; NACK requested %llu, "
      "retried %llu, recovered %llu (spurious %llu), gave up %llu; allowance %.1f ms %u packets; "
      "release - send - 20 ms: p50 %.2f ms, p99 "
      "%.2f ms, max %.2f ms; target %.2f ms\n",
      name, r.frames_released, static_cast<unsigned long long>(r.frames_dropped),
      static_cast<unsigned long long>(r.packets_lost_on_path),
      static_cast<unsigned long long>(r.nack.requested),
      static_cast<unsigned long long>(r.nack.retried),
      static_cast<unsigned long long>(r.nack.recovered),
      static_cast<unsigned long long>(r.nack.spurious),
      static_cast<unsigned long long>(r.nack.given_up_deadline + r.nack.given_up_tries),
      r.allowance_ns / 1e6, r.allowance_packets, percentile(r.release_over_one_way, 50) / 1e6,
      percentile(r.release_over_one_way, 99) / 1e6, percentile(r.release_over_one_way, 100) / 1e6,
      r.buffer.target_delay_ns / 1e6);
}

TEST(JitterSimulation, OnePercentLossTwentyMsPathNoFrameLost) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    SimulationOptions options;
    options.seed = seed;
    const SimulationResult result = simulate(options);
    print("playout", result);
    EXPECT_GT(result.packets_lost_on_path, 100u);
    EXPECT_EQ(result.frames_dropped, 0u) << "seed " << seed;
    EXPECT_EQ(result.frames_released, static_cast<size_t>(options.frames)) << "seed " << seed;
    EXPECT_LT(percentile(result.release_over_one_way, 50), static_cast<int64_t>(kFrameNs));
    EXPECT_GT(result.nack.recovered, 0u);
  }
}

TEST(JitterSimulation, ReleaseWhenCompleteWithoutStartHints) {
  SimulationOptions options;
  options.mode = ReleaseMode::kWhenComplete;
  options.start_hints = false;
  const SimulationResult result = simulate(options);
  print("when complete, no hints", result);
  EXPECT_EQ(result.frames_dropped, 0u);
  EXPECT_EQ(result.frames_released, static_cast<size_t>(options.frames));
  EXPECT_LT(percentile(result.release_over_one_way, 50), static_cast<int64_t>(kFrameNs));
}

TEST(JitterSimulation, LostRetransmissionsAreRetried) {
  // Retransmissions lost at 10 %: the retry within the budget still recovers nearly all.
  SimulationOptions options;
  options.retransmission_loss = 0.10;
  const SimulationResult result = simulate(options);
  print("10 % of retransmissions lost", result);
  EXPECT_GT(result.nack.retried, 0u);
  EXPECT_LE(result.frames_dropped, 3u);
}

}  // namespace
}  // namespace syncd::jitter
