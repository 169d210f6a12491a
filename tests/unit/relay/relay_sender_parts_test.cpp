// The relay sender's pure parts: what it sent (SentRecord), its probes (PaddingProbe) and its
// repairs' budget (RepairBudget).
#include <gtest/gtest.h>

#include <cstdint>

#include "relay/padding_probe.h"
#include "relay/relay_path.h"
#include "relay/repair_budget.h"
#include "relay/sent_record.h"

namespace syncd::relay {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;

// --- SentRecord ---

// 10 Mbit/s for `seconds`: 1250-byte packets every ms from t, media packets numbered from
// `sequence`, 80 % of the bytes access units. Returns the time after.
uint64_t send_steadily(SentRecord& r, uint64_t t, double seconds, uint16_t& sequence) {
  const uint64_t end = t + uint64_t(seconds * 1e9);
  for (; t < end; t += kMs) {
    r.on_access_unit(1000);
    r.on_sent(1250);
    r.on_media_sent(sequence++, t);
    r.sample(t);
  }
  return t;
}

TEST(RelaySentRecord, RatesAndTheMediaShare) {
  SentRecord r;
  EXPECT_EQ(r.sent_bps(10), 0u);  // nothing sampled yet
  EXPECT_EQ(r.media_share(), 0);
  uint16_t sequence = 100;
  send_steadily(r, kSecond, 2.0, sequence);
  EXPECT_NEAR(double(r.sent_bps(10)), 10e6, 0.1e6);
  EXPECT_NEAR(double(r.sent_bps_between(200, 900)), 10e6, 0.1e6);
  EXPECT_NEAR(r.media_share(), 0.8, 0.01);
  // Under 100 ms apart, or no longer (or never) marked: 0.
  EXPECT_EQ(r.sent_bps_between(1000, 1050), 0u);
  EXPECT_EQ(r.sent_bps_between(5000, 5100), 0u);
  // Padding is left out of the share.
  for (int i = 0; i < 1000; ++i) {
    r.on_padding(1250);
    r.on_sent(1250);
  }
  r.sample(4 * kSecond);
  EXPECT_NEAR(r.media_share(), 0.8, 0.01);
}

TEST(RelaySentRecord, LossSamplesSpanEnoughTimeAndPackets) {
  SentRecord r;
  uint16_t sequence = 0;
  uint64_t t = send_steadily(r, kSecond, 1.0, sequence);
  // The first report starts a span.
  EXPECT_FALSE(r.loss_sample(100, 0, t, false).has_value());
  EXPECT_EQ(r.loss_span_start_ns(), t);
  // Too soon (under 300 ms), then too few packets: the span goes on.
  EXPECT_FALSE(r.loss_sample(400, 10, t + 200 * kMs, false).has_value());
  EXPECT_FALSE(r.loss_sample(130, 1, t + 400 * kMs, false).has_value());
  const auto s = r.loss_sample(600, 50, t + 400 * kMs, false);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->fraction, 0.1);  // 50 of 500
  EXPECT_EQ(s->from_ns, t);
  EXPECT_NEAR(double(s->sent_bps), 10e6, 0.1e6);  // between the marks of packets 100 and 600
  // A restart (a probe's span) gives nothing and starts afresh.
  EXPECT_FALSE(r.loss_sample(1000, 60, t + 900 * kMs, true).has_value());
  EXPECT_EQ(r.loss_span_start_sequence(), 1000u);
}

// --- PaddingProbe ---

TEST(RelayPaddingProbe, APolicersProbeCarriedOrLost) {
  PaddingProbe p;
  EXPECT_FALSE(p.running());
  EXPECT_EQ(p.next_wakeup_ns(), UINT64_MAX);
  p.start(PaddingProbe::Kind::kCeiling, 10'000'000, kSecond, 0);
  EXPECT_TRUE(p.padding());
  EXPECT_EQ(p.next_wakeup_ns(), kSecond + PaddingProbe::kCeilingNs);
  // A NACK for media sent before it is not its loss; for one sent during it, it is.
  EXPECT_FALSE(p.lost(10));
  p.on_media_sent(20);
  p.on_media_sent(21);
  EXPECT_FALSE(p.lost(19));
  EXPECT_TRUE(p.lost(21));
  EXPECT_EQ(p.advance(kSecond + 100 * kMs, 0, 40 * kMs), PaddingProbe::Step::kNone);
  // 400 ms at 10 Mbit/s is 500 kB: it reached its rate.
  EXPECT_EQ(p.advance(kSecond + 400 * kMs, 500'000, 40 * kMs), PaddingProbe::Step::kPaddingDone);
  EXPECT_FALSE(p.padding());
  EXPECT_EQ(p.advance(kSecond + 480 * kMs, 0, 40 * kMs), PaddingProbe::Step::kNone);
  EXPECT_EQ(p.advance(kSecond + 490 * kMs, 0, 40 * kMs), PaddingProbe::Step::kCarried);
  p.end(kSecond + 490 * kMs, 30);

  // One that fell short of its rate says nothing: not carried.
  p.start(PaddingProbe::Kind::kCeiling, 10'000'000, 2 * kSecond, 0);
  p.on_media_sent(40);
  p.advance(2 * kSecond + 400 * kMs, 300'000, 40 * kMs);
  EXPECT_EQ(p.advance(3 * kSecond, 0, 40 * kMs), PaddingProbe::Step::kLost);
}

TEST(RelayPaddingProbe, AFasterPathsProbeIsShortAndHoldsTheLossOfItsSpan) {
  PaddingProbe p;
  p.start(PaddingProbe::Kind::kFasterPath, 20'000'000, kSecond, 0);
  p.on_media_sent(100);
  EXPECT_FALSE(p.lost(100));  // the receiver's measurement says, not NACKs
  EXPECT_TRUE(p.holds_loss_of(0, 0, kSecond + 10 * kMs));  // running
  EXPECT_EQ(p.advance(kSecond + 29 * kMs, 0, 0), PaddingProbe::Step::kNone);
  EXPECT_EQ(p.advance(kSecond + 30 * kMs, 0, 0), PaddingProbe::Step::kDone);
  p.end(kSecond + 30 * kMs, 110);
  EXPECT_FALSE(p.running());
  // A span that began before it ended, or before its last packet, is its; a later one is not.
  EXPECT_TRUE(p.holds_loss_of(kSecond, 120, 2 * kSecond));
  EXPECT_TRUE(p.holds_loss_of(2 * kSecond, 105, 2 * kSecond));
  EXPECT_FALSE(p.holds_loss_of(2 * kSecond, 115, 2 * kSecond));
  EXPECT_FALSE(p.holds_loss_of(4 * kSecond, 105, 4 * kSecond));  // long after: not compared
}

// --- RepairBudget ---

TEST(RelayRepairBudget, RetransmissionsGetAQuarterOfTheTarget) {
  RepairBudget b;
  // 10 Mbit/s: 2.5 Mbit/s for repairs, a bucket of 100 ms of it (31,250 bytes), full at first.
  int taken = 0;
  while (b.take(1250, 10'000'000, kSecond)) ++taken;
  EXPECT_EQ(taken, 25);
  // 10 ms later, 3,125 bytes more: two packets.
  EXPECT_TRUE(b.take(1250, 10'000'000, kSecond + 10 * kMs));
  EXPECT_TRUE(b.take(1250, 10'000'000, kSecond + 10 * kMs));
  EXPECT_FALSE(b.take(1250, 10'000'000, kSecond + 10 * kMs));
  // It never holds more than 100 ms of it.
  taken = 0;
  while (b.take(1250, 10'000'000, 10 * kSecond)) ++taken;
  EXPECT_EQ(taken, 25);
}

TEST(RelayRepairBudget, SecondCopiesOnlyOnALossyPathAndInOrder) {
  RepairBudget b;
  EXPECT_EQ(b.next_second_copy_ns(), UINT64_MAX);
  EXPECT_FALSE(b.schedule_second_copy(1, 0.01, kSecond));  // a clean path
  EXPECT_FALSE(b.schedule_second_copy(1, 0.20, kSecond));  // congestion
  EXPECT_TRUE(b.schedule_second_copy(1, 0.05, kSecond));
  EXPECT_TRUE(b.schedule_second_copy(2, 0.05, kSecond + kMs));
  EXPECT_EQ(b.next_second_copy_ns(), kSecond + kSecondCopyDelayNs);
  EXPECT_FALSE(b.take_due_second_copy(kSecond + kSecondCopyDelayNs - 1).has_value());
  EXPECT_EQ(b.take_due_second_copy(kSecond + kSecondCopyDelayNs + kMs), std::optional<uint16_t>(1));
  EXPECT_EQ(b.take_due_second_copy(kSecond + kSecondCopyDelayNs + kMs), std::optional<uint16_t>(2));
  EXPECT_FALSE(b.take_due_second_copy(10 * kSecond).has_value());
  // The queue holds 256; more are not queued.
  int queued = 0;
  for (int i = 0; i < 300; ++i) queued += b.schedule_second_copy(uint16_t(i), 0.05, kSecond);
  EXPECT_EQ(queued, 256);
}

}  // namespace
}  // namespace syncd::relay
