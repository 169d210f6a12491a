// NackScheduler: the timing table of first requests, retries and giving up, and its bounds.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "jitter/nack_scheduler.h"
#include "jitter_test_support.h"

namespace syncd::jitter {
namespace {

using testing::kMs;

// A fixed deadline for every packet, or "gone" below a floor.
class FixedDeadlines : public DeadlineSource {
 public:
  uint64_t deadline = UINT64_MAX;
  uint64_t gone_below = 0;
  uint64_t deadline_for(uint64_t sequence) const override {
    return sequence < gone_below ? 0 : deadline;
  }
};

std::vector<uint16_t> collect(NackScheduler& nack, uint64_t now, uint64_t rtt,
                              const DeadlineSource& deadlines, size_t room = 64) {
  std::array<uint16_t, 256> out{};
  const size_t count = nack.collect(now, rtt, deadlines, std::span(out.data(), room));
  return {out.begin(), out.begin() + count};
}

NackConfig time_only() {
  NackConfig config;
  config.reorder_allowance_packets = 0;
  return config;
}

TEST(NackScheduler, TimingTable) {
  // Defaults: 2 ms reorder allowance, retries every RTT + 5 ms, 10 tries. RTT 40 ms.
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  const uint64_t rtt = 40 * kMs;
  nack.on_packet(9, 0);
  nack.on_packet(11, 100 * kMs);  // 10 is missing from t = 100 ms
  struct Row {
    uint64_t now_ms_tenths;  // in 0.1 ms
    std::vector<uint16_t> expected;
  };
  const std::vector<Row> table = {
      {1000, {}},    // just seen: may be reordered
      {1019, {}},    // 1.9 ms: still within the allowance
      {1020, {10}},  // 2 ms: first request
      {1021, {}},    // sent; the retransmission is a round trip away
      {1469, {}},    // 46.9 ms: RTT + 5 ms after the request not yet passed
      {1470, {10}},  // 47 ms: first retry
      {1919, {}},    //
      {1920, {10}},  // 92 ms: second retry
  };
  for (const Row& row : table) {
    EXPECT_EQ(collect(nack, row.now_ms_tenths * kMs / 10, rtt, deadlines), row.expected)
        << "at " << row.now_ms_tenths / 10.0 << " ms";
  }
  EXPECT_EQ(nack.counters().requested, 1u);
  EXPECT_EQ(nack.counters().retried, 2u);
  nack.on_packet(10, 200 * kMs);
  EXPECT_EQ(nack.counters().recovered, 1u);
  EXPECT_EQ(nack.tracked(), 0u);
  EXPECT_EQ(nack.next_wakeup_ns(rtt), UINT64_MAX);
}

TEST(NackScheduler, NewerPacketsShortenTheAllowance) {
  NackConfig config;  // 5 packets or 2 ms
  NackScheduler nack(config);
  FixedDeadlines deadlines;
  nack.on_packet(1, 0);
  nack.on_packet(3, 0);  // 2 missing
  for (uint64_t s = 4; s <= 6; ++s) nack.on_packet(s, 0);
  EXPECT_TRUE(collect(nack, 100'000, 40 * kMs, deadlines).empty());  // 4 newer: not yet
  nack.on_packet(7, 0);
  EXPECT_EQ(collect(nack, 100'000, 40 * kMs, deadlines), (std::vector<uint16_t>{2}));
}

TEST(NackScheduler, ReorderedPacketIsNeverRequested) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  nack.on_packet(1, 0);
  nack.on_packet(3, 0);
  nack.on_packet(2, kMs);
  EXPECT_TRUE(collect(nack, 10 * kMs, 40 * kMs, deadlines).empty());
  EXPECT_EQ(nack.counters().arrived_unrequested, 1u);
  EXPECT_EQ(nack.counters().requested, 0u);
}

TEST(NackScheduler, GivesUpWhenTheRetransmissionWouldMissTheDeadline) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  deadlines.deadline = 100 * kMs;
  const uint64_t rtt = 40 * kMs;
  nack.on_packet(1, 0);
  nack.on_packet(3, 0);
  EXPECT_EQ(collect(nack, 2 * kMs, rtt, deadlines), (std::vector<uint16_t>{2}));
  // Retry due at 47 ms: 47 + 40 <= 100, so it goes.
  EXPECT_EQ(collect(nack, 47 * kMs, rtt, deadlines), (std::vector<uint16_t>{2}));
  // Next retry due at 92 ms: 92 + 40 > 100: given up.
  EXPECT_TRUE(collect(nack, 92 * kMs, rtt, deadlines).empty());
  EXPECT_EQ(nack.counters().given_up_deadline, 1u);
  EXPECT_EQ(nack.tracked(), 0u);
}

TEST(NackScheduler, GivesUpWhenTheFrameIsGone) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  nack.on_packet(1, 0);
  nack.on_packet(5, 0);
  deadlines.gone_below = 3;
  EXPECT_EQ(collect(nack, 2 * kMs, 40 * kMs, deadlines), (std::vector<uint16_t>{3, 4}));
  EXPECT_EQ(nack.counters().given_up_deadline, 1u);
}

TEST(NackScheduler, GivesUpAfterMaxTries) {
  NackConfig config = time_only();
  config.max_tries = 3;
  NackScheduler nack(config);
  FixedDeadlines deadlines;
  nack.on_packet(1, 0);
  nack.on_packet(3, 0);
  size_t sent = 0;
  for (uint64_t now = 0; now < 1'000 * kMs; now += kMs) {
    sent += collect(nack, now, 10 * kMs, deadlines).size();
  }
  EXPECT_EQ(sent, 3u);
  EXPECT_EQ(nack.counters().given_up_tries, 1u);
  EXPECT_EQ(nack.tracked(), 0u);
}

TEST(NackScheduler, WrapsAt16BitsInOrder) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  // Extended numbers as the jitter buffer gives them: 65533 then 65538 (= 2 after the wrap).
  const uint64_t base = uint64_t{1} << 32;
  nack.on_packet(base + 65533, 0);
  nack.on_packet(base + 65538, 0);
  EXPECT_EQ(collect(nack, 2 * kMs, 40 * kMs, deadlines),
            (std::vector<uint16_t>{65534, 65535, 0, 1}));
}

TEST(NackScheduler, OutputIsBoundedAndTheRestFollows) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  nack.on_packet(0, 0);
  nack.on_packet(101, 0);  // 100 missing
  const std::vector<uint16_t> first = collect(nack, 2 * kMs, 40 * kMs, deadlines, 16);
  ASSERT_EQ(first.size(), 16u);
  EXPECT_EQ(first.front(), 1);
  EXPECT_EQ(first.back(), 16);
  EXPECT_EQ(nack.counters().truncated, 1u);
  const std::vector<uint16_t> rest = collect(nack, 2 * kMs, 40 * kMs, deadlines, 256);
  ASSERT_EQ(rest.size(), 84u);
  EXPECT_EQ(rest.front(), 17);
  EXPECT_EQ(nack.counters().requested, 100u);
}

TEST(NackScheduler, LargeJumpIsNotRequested) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  nack.on_packet(1000, 0);
  nack.on_packet(998 + 5, 0);  // 1001, 1002 missing
  nack.on_packet(1000 + 30000, 0);
  EXPECT_TRUE(collect(nack, 10 * kMs, 40 * kMs, deadlines).empty());
  EXPECT_EQ(nack.counters().gaps_too_large, 1u);
  EXPECT_EQ(nack.counters().forgotten, 2u);
  EXPECT_EQ(nack.tracked(), 0u);
}

TEST(NackScheduler, CapacityForgetsTheOldest) {
  NackConfig config = time_only();
  config.capacity = 8;
  NackScheduler nack(config);
  FixedDeadlines deadlines;
  nack.on_packet(0, 0);
  nack.on_packet(6, 0);   // 1..5
  nack.on_packet(12, 0);  // 7..11: 10 missing, 8 kept
  EXPECT_EQ(nack.tracked(), 8u);
  EXPECT_EQ(nack.counters().forgotten, 2u);
  EXPECT_EQ(collect(nack, 2 * kMs, 40 * kMs, deadlines),
            (std::vector<uint16_t>{3, 4, 5, 7, 8, 9, 10, 11}));
}

TEST(NackScheduler, ReorderAllowanceFollowsLateOriginals) {
  NackConfig config;  // floors 2 ms and 5 packets, 99th percentile of the last 128
  NackScheduler nack(config);
  FixedDeadlines deadlines;
  EXPECT_EQ(nack.reorder_allowance_ns(), 2 * kMs);
  EXPECT_EQ(nack.reorder_allowance_packets(), 5u);
  // 200 originals each overtaken by 8 newer packets and arriving 8 ms after their gap was seen.
  uint64_t now = 0;
  uint64_t sequence = 1000;
  nack.on_packet(sequence, now);
  for (int i = 0; i < 200; ++i) {
    const uint64_t missing = sequence + 1;
    for (uint64_t s = missing + 1; s <= missing + 8; ++s) nack.on_packet(s, now);
    now += 8 * kMs;
    nack.on_packet(missing, now);
    sequence = missing + 8;
  }
  EXPECT_EQ(nack.reorder_allowance_ns(), 8 * kMs + 500'000);
  EXPECT_EQ(nack.reorder_allowance_packets(), 9u);
  EXPECT_EQ(nack.counters().arrived_unrequested, 200u);
  // A new gap now waits 8.5 ms (or 9 newer packets) before its first request.
  nack.on_packet(sequence + 2, now);
  EXPECT_TRUE(collect(nack, now + 8 * kMs, 40 * kMs, deadlines).empty());
  EXPECT_EQ(collect(nack, now + 8 * kMs + 500'000, 40 * kMs, deadlines).size(), 1u);
  // Retransmissions say nothing about reordering: the allowance stays.
  nack.on_packet(sequence + 1, now + 50 * kMs, /*repaired=*/true);
  EXPECT_EQ(nack.reorder_allowance_ns(), 8 * kMs + 500'000);
  EXPECT_EQ(nack.counters().recovered, 1u);
  EXPECT_EQ(nack.counters().spurious, 0u);
}

TEST(NackScheduler, ReorderAllowanceHasACeiling) {
  NackConfig config = time_only();
  NackScheduler nack(config);
  nack.on_packet(0, 0);
  nack.on_packet(2, 0);
  nack.on_packet(1, 500 * kMs);  // half a second late
  EXPECT_EQ(nack.reorder_allowance_ns(), config.reorder_allowance_max_ns);
}

TEST(NackScheduler, NextWakeup) {
  NackScheduler nack(time_only());
  FixedDeadlines deadlines;
  EXPECT_EQ(nack.next_wakeup_ns(40 * kMs), UINT64_MAX);
  nack.on_packet(1, 0);
  nack.on_packet(3, 10 * kMs);
  EXPECT_EQ(nack.next_wakeup_ns(40 * kMs), 12 * kMs);
  collect(nack, 12 * kMs, 40 * kMs, deadlines);
  EXPECT_EQ(nack.next_wakeup_ns(40 * kMs), 57 * kMs);
}

}  // namespace
}  // namespace syncd::jitter
