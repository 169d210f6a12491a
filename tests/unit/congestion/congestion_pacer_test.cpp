// The pacer: spacing, burst budget, queue bounds in packets and time
// (src/congestion/pacer.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "congestion/pacer.h"

namespace syncd::congestion {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;

PacerConfig config_at(uint64_t target_bps, double factor = 1.0) {
  PacerConfig config;
  config.initial_target_bps = target_bps;
  config.pacing_factor = factor;
  return config;
}

// Runs the pacer's timer every tick_ns until the queue is empty; returns each send time.
std::vector<uint64_t> drain(Pacer& pacer, uint64_t start_ns, uint64_t tick_ns) {
  std::vector<uint64_t> sends;
  PacedPacket out[8];
  for (uint64_t t = start_ns; pacer.queued_packets() > 0; t += tick_ns) {
    const size_t n = pacer.pop_due(t, out);
    for (size_t i = 0; i < n; ++i) {
      if (out[i].disposition == PacketDisposition::kSend) sends.push_back(t);
    }
  }
  return sends;
}

TEST(CongestionPacer, SpacesPacketsAtThePacingRate) {
  // 10 Mbit/s x 2.5 = 25 Mbit/s: a 1250-byte packet every 400 us.
  Pacer pacer(config_at(10'000'000, 2.5));
  EXPECT_EQ(pacer.pacing_bps(), 25'000'000u);
  const uint64_t start = 1'000 * kMs;
  for (uint64_t id = 0; id < 100; ++id)
    ASSERT_EQ(pacer.enqueue(start, id, 1250), EnqueueResult::kQueued);
  const std::vector<uint64_t> sends = drain(pacer, start, 10 * kUs);
  ASSERT_EQ(sends.size(), 100u);
  // The burst budget (2 ms = 6.25 packets) goes at once, then one per 400 us.
  size_t at_start = 0;
  for (uint64_t s : sends) at_start += s == start ? 1 : 0;
  EXPECT_EQ(at_start, 6u);
  for (size_t i = 7; i < sends.size(); ++i) {
    EXPECT_EQ(sends[i] - sends[i - 1], 400 * kUs) << i;
  }
  // The last of 100 leaves 94 x 400 us after the start (the first 6 rode on the credit).
  EXPECT_EQ(sends.back() - start, 94 * 400 * kUs);
  EXPECT_EQ(pacer.counters().sent, 100u);
  EXPECT_EQ(pacer.counters().sent_bytes, 125'000u);
}

TEST(CongestionPacer, SetPacingChangesTheFactorAndTheDrainAtOnce) {
  // 10 Mbit/s x 2.5, then x 1.05 (a sender that found a policer): the rate follows at once,
  // from the target it was last given; a factor under 1 (or NaN) is taken as 1.
  PacerConfig config = config_at(10'000'000, 2.5);
  config.drain_within_ns = 33 * kMs;
  Pacer pacer(config);
  EXPECT_EQ(pacer.pacing_bps(), 25'000'000u);
  pacer.set_pacing(1.05, 120 * kMs);
  EXPECT_EQ(pacer.pacing_bps(), 10'500'000u);
  pacer.set_target_rate(20'000'000);
  EXPECT_EQ(pacer.pacing_bps(), 21'000'000u);
  pacer.set_pacing(0.5, 0);
  EXPECT_EQ(pacer.pacing_bps(), 20'000'000u);
  pacer.set_pacing(std::nan(""), 0);
  EXPECT_EQ(pacer.pacing_bps(), 20'000'000u);
  // The drain: 100 KB queued at once leaves within 33 ms at 2.5 x, and at 1.05 x a 10 Mbit/s
  // target it takes its own time (76 ms at 10.5 Mbit/s), inside a 120-ms drain.
  auto span_of_100kb = [&](double factor, uint64_t drain_ns) {
    Pacer p(config_at(10'000'000, 2.5));
    p.set_pacing(factor, drain_ns);
    p.set_target_rate(10'000'000);
    for (uint64_t id = 0; id < 80; ++id) p.enqueue(0, id, 1250);
    const std::vector<uint64_t> sends = drain(p, 0, 100 * kUs);
    return sends.back() - sends.front();
  };
  EXPECT_LE(span_of_100kb(2.5, 33 * kMs), 34 * kMs);
  const uint64_t policed = span_of_100kb(1.05, 120 * kMs);
  EXPECT_GE(policed, 70 * kMs);
  EXPECT_LE(policed, 80 * kMs);
}

TEST(CongestionPacer, NextEventSaysWhen) {
  Pacer pacer(config_at(8'000'000));  // 1000 bytes = 1 ms
  const uint64_t t = 5'000 * kMs;
  EXPECT_EQ(pacer.next_event_ns(t), Pacer::kNoEvent);
  for (uint64_t id = 0; id < 5; ++id) pacer.enqueue(t, id, 1000);
  EXPECT_EQ(pacer.next_event_ns(t), t);
  PacedPacket out[16];
  // Credit: 2 ms; packets finish at t-1ms, t, t+1ms: three go now.
  EXPECT_EQ(pacer.pop_due(t, out), 3u);
  EXPECT_EQ(pacer.next_event_ns(t), t + kMs);
  EXPECT_EQ(pacer.pop_due(t + kMs - 1, out), 0u);
  EXPECT_EQ(pacer.pop_due(t + kMs, out), 1u);
  EXPECT_EQ(pacer.next_event_ns(t + kMs), t + 2 * kMs);
}

TEST(CongestionPacer, IdleCreditIsCappedAtTheBurstBudget) {
  Pacer pacer(config_at(8'000'000));  // 1000 bytes = 1 ms
  PacedPacket out[64];
  uint64_t t = 1'000 * kMs;
  pacer.enqueue(t, 0, 1000);
  pacer.pop_due(t, out);
  // A second of silence, then 20 packets: only the 2 ms budget (plus the packet that crosses
  // it) goes back to back.
  t += 1'000 * kMs;
  for (uint64_t id = 1; id <= 20; ++id) pacer.enqueue(t, id, 1000);
  EXPECT_EQ(pacer.pop_due(t, out), 3u);
}

TEST(CongestionPacer, LateTimerCatchesUpByTheBudgetOnly) {
  Pacer pacer(config_at(8'000'000));
  PacedPacket out[64];
  const uint64_t t = 1'000 * kMs;
  for (uint64_t id = 0; id < 40; ++id) pacer.enqueue(t, id, 1000);
  EXPECT_EQ(pacer.pop_due(t, out), 3u);
  // The timer comes 10 ms late: 2 ms of credit, not 10.
  EXPECT_EQ(pacer.pop_due(t + 10 * kMs, out), 3u);
}

TEST(CongestionPacer, QueueBoundInPackets) {
  PacerConfig config = config_at(100'000'000);
  config.capacity_packets = 4;
  Pacer pacer(config);
  for (uint64_t id = 0; id < 4; ++id) EXPECT_EQ(pacer.enqueue(0, id, 1000), EnqueueResult::kQueued);
  EXPECT_EQ(pacer.enqueue(0, 4, 1000), EnqueueResult::kQueueFull);
  EXPECT_EQ(pacer.counters().refused_full, 1u);
  EXPECT_EQ(pacer.queued_packets(), 4u);
  EXPECT_EQ(pacer.queued_bytes(), 4000u);
  // Ring wraps: drain two, add two, order kept.
  PacedPacket out[2];
  ASSERT_EQ(pacer.pop_due(10 * kMs, out), 2u);
  EXPECT_EQ(out[0].id, 0u);
  EXPECT_EQ(out[1].id, 1u);
  EXPECT_EQ(pacer.enqueue(10 * kMs, 5, 1000), EnqueueResult::kQueued);
  EXPECT_EQ(pacer.enqueue(10 * kMs, 6, 1000), EnqueueResult::kQueued);
  std::vector<uint64_t> ids;
  for (uint64_t t = 10 * kMs; pacer.queued_packets() > 0; t += kMs) {
    const size_t n = pacer.pop_due(t, out);
    for (size_t i = 0; i < n; ++i) ids.push_back(out[i].id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{2, 3, 5, 6}));
}

TEST(CongestionPacer, QueueBoundInTimeDropsAndReports) {
  PacerConfig config = config_at(800'000);  // 1000 bytes = 10 ms
  config.max_queue_delay_ns = 50 * kMs;
  config.burst_ns = 0;
  Pacer pacer(config);
  for (uint64_t id = 0; id < 20; ++id) pacer.enqueue(0, id, 1000);
  std::vector<uint64_t> sent, dropped;
  PacedPacket out[4];
  for (uint64_t t = 0; pacer.queued_packets() > 0; t += kMs) {
    // Asking when next never says "later" while something is due.
    const uint64_t next = pacer.next_event_ns(t);
    const size_t n = pacer.pop_due(t, out);
    if (next > t) {
      EXPECT_EQ(n, 0u) << t;
    }
    for (size_t i = 0; i < n; ++i) {
      (out[i].disposition == PacketDisposition::kSend ? sent : dropped).push_back(out[i].id);
      if (out[i].disposition == PacketDisposition::kSend) {
        EXPECT_LE(t - out[i].enqueued_ns, 50 * kMs);
      }
    }
  }
  // 10 ms per packet: those sent at 0, 10, ..., 50 ms made it; the rest waited too long.
  EXPECT_EQ(sent.size(), 6u);
  EXPECT_EQ(dropped.size(), 14u);
  EXPECT_EQ(pacer.counters().dropped_expired, 14u);
  EXPECT_EQ(pacer.counters().dropped_expired_bytes, 14'000u);
  EXPECT_EQ(pacer.queued_bytes(), 0u);
}

TEST(CongestionPacer, DrainDeadlineOutrunsATargetBelowTheSource) {
  // A 30-packet frame (36 KB) every 16.7 ms is 17 Mbit/s; the target says 4 Mbit/s (x1: 4 Mbit/s
  // of pacing). Without the deadline the queue only grows until packets expire; with 33 ms,
  // every packet leaves within 33 ms of its enqueue and none expires.
  for (const uint64_t drain : {uint64_t{0}, 33 * kMs}) {
    PacerConfig config = config_at(4'000'000);
    config.drain_within_ns = drain;
    Pacer pacer(config);
    uint64_t worst_wait = 0, sent = 0;
    PacedPacket out[16];
    const uint64_t frame_ns = 16'666'667;
    for (uint64_t t = 0; t < 2'000 * kMs; t += 100 * kUs) {
      if (t % frame_ns < 100 * kUs) {
        for (uint64_t i = 0; i < 30; ++i) pacer.enqueue(t, i, 1200);
      }
      const size_t n = pacer.pop_due(t, out);
      for (size_t i = 0; i < n; ++i) {
        if (out[i].disposition != PacketDisposition::kSend) continue;
        ++sent;
        worst_wait = std::max(worst_wait, t - out[i].enqueued_ns);
      }
    }
    if (drain == 0) {
      EXPECT_GT(pacer.counters().dropped_expired, 1000u);
    } else {
      EXPECT_EQ(pacer.counters().dropped_expired, 0u);
      EXPECT_LE(worst_wait, 33 * kMs + 200 * kUs);
      EXPECT_GT(sent, 119u * 30);  // every frame but the last one or two, still queued
    }
  }
}

TEST(CongestionPacer, DrainDeadlineKeepsThePacingRateWhenItSuffices) {
  // 10 Mbit/s, one frame of 10 packets: the pacing rate empties it in 9.6 ms, well within the
  // 33-ms deadline, so the spacing is the pacing rate's, as without the deadline.
  PacerConfig config = config_at(10'000'000);
  config.drain_within_ns = 33 * kMs;
  config.burst_ns = 0;
  Pacer pacer(config);
  for (uint64_t id = 0; id < 10; ++id) pacer.enqueue(0, id, 1200);
  const std::vector<uint64_t> sends = drain(pacer, 0, 10 * kUs);
  ASSERT_EQ(sends.size(), 10u);
  // 1200 bytes at 10 Mbit/s = 960 us; the first packet's rate was raised slightly (12 KB
  // within 33 ms = 2.9 Mbit/s < 10), so it is exactly the pacing rate throughout.
  for (size_t i = 1; i < sends.size(); ++i) EXPECT_EQ(sends[i] - sends[i - 1], 960 * kUs) << i;
}

TEST(CongestionPacer, RefusesBadPacketsWithReasons) {
  PacerConfig config;
  config.max_packet_bytes = 1500;
  Pacer pacer(config);
  EXPECT_EQ(pacer.enqueue(0, 1, 0), EnqueueResult::kEmpty);
  EXPECT_EQ(pacer.enqueue(0, 2, 1501), EnqueueResult::kTooLarge);
  EXPECT_EQ(pacer.enqueue(0, 3, 1500), EnqueueResult::kQueued);  // the largest
  EXPECT_EQ(pacer.queued_packets(), 1u);
  PacedPacket out[1];
  ASSERT_EQ(pacer.pop_due(0, out), 1u);
  EXPECT_EQ(out[0].id, 3u);
  EXPECT_EQ(pacer.counters().refused_empty, 1u);
  EXPECT_EQ(pacer.counters().refused_too_large, 1u);
  EXPECT_EQ(pacer.queued_packets(), 0u);
}

TEST(CongestionPacer, ZeroTargetDoesNotStall) {
  Pacer pacer(config_at(8'000'000));
  pacer.set_target_rate(0);
  EXPECT_EQ(pacer.pacing_bps(), 50'000u);  // the floor
  pacer.enqueue(0, 1, 1000);
  PacedPacket out[1];
  EXPECT_EQ(pacer.pop_due(0, out), 1u);
}

TEST(CongestionPacer, FrameLeavesWithinAFractionOfTheFrameInterval) {
  // A 60 fps frame at 20 Mbit/s (41,667 bytes, 35 packets) paced at 2.5x takes 6.7 ms of the
  // 16.7 ms frame interval, less the 2 ms burst budget that goes at once.
  Pacer pacer(config_at(20'000'000, 2.5));
  const uint64_t t = 1'000 * kMs;
  uint32_t left = 41'667;
  for (uint64_t id = 0; left > 0; ++id) {
    const uint32_t size = std::min<uint32_t>(left, 1200);
    pacer.enqueue(t, id, size);
    left -= size;
  }
  const std::vector<uint64_t> sends = drain(pacer, t, 100 * kUs);
  EXPECT_LT(sends.back() - t, 7 * kMs);
  EXPECT_GT(sends.back() - t, 4 * kMs);
}

}  // namespace
}  // namespace syncd::congestion
