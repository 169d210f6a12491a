// The sending half of an RTP stream (src/rtp_media/send_stream.h): its clock, history, NACK
// answers, sender-report counts and tail-probe timing, over a real packet store.
#include "rtp_media/send_stream.h"

#include <gtest/gtest.h>

#include "transport/packet_store.h"

using namespace syncd;
using namespace syncd::rtp_media;

namespace {

uint32_t stored(transport::PacketStore& store, uint8_t mark) {
  const uint32_t h = store.take();
  store.room(h)[0] = mark;
  store.set_size(h, 100);
  return h;
}

}  // namespace

TEST(RtpClock, Ticks90kHzFromItsOffsetAndEpochWithoutOverflow) {
  RtpClock clock(90'000, 1000, 5'000'000'000ull);
  EXPECT_EQ(clock.at(5'000'000'000ull), 1000u);
  EXPECT_EQ(clock.at(4'000'000'000ull), 1000u);  // before the epoch: the offset
  EXPECT_EQ(clock.at(5'000'000'000ull + 1'000'000'000ull), 1000u + 90'000u);
  EXPECT_EQ(clock.at(5'000'000'000ull + 11'111), 1000u + 0u);  // under a tick
  EXPECT_EQ(clock.at(5'000'000'000ull + 11'112), 1000u + 1u);
  // Ten years in: still exact (elapsed * rate alone would pass 2^64).
  const uint64_t ten_years = 10ull * 365 * 24 * 3600 * 1'000'000'000ull;
  EXPECT_EQ(RtpClock(90'000, 0).at(ten_years), uint32_t(10ull * 365 * 24 * 3600 * 90'000));
  EXPECT_EQ(RtpClock(48'000, 7).at(20'000'000), 7u + 960u);  // 20 ms of Opus
}

TEST(SendStream, HistoryHoldsEachPacketUntilItsEntryIsReusedAndAnswersNacks) {
  transport::PacketStore store(8);
  {
    SendStream stream({.ssrc = 42, .first_sequence = 65534, .history = 4}, store);
    EXPECT_EQ(stream.ssrc(), 42u);
    uint16_t seqs[6];
    for (int i = 0; i < 6; ++i) {
      seqs[i] = stream.take_sequence();
      stream.remember(seqs[i], stored(store, uint8_t(i)));
    }
    EXPECT_EQ(seqs[2], 0);  // wrapped
    // Four entries: the first two were let go of and their buffers are free again.
    EXPECT_EQ(store.in_use(), 4u);
    EXPECT_FALSE(stream.holds(seqs[0]));
    EXPECT_FALSE(stream.holds(seqs[1]));
    EXPECT_TRUE(stream.holds(seqs[5]));
    EXPECT_EQ(stream.packet(seqs[3])[0], 3);
    EXPECT_EQ(stream.answer_nack(seqs[0], 1000, 0), NackAnswer::kUnavailable);
    EXPECT_EQ(stream.answer_nack(uint16_t(seqs[5] + 1), 1000, 0), NackAnswer::kUnavailable);
    EXPECT_EQ(stream.answer_nack(seqs[4], 1000, 500), NackAnswer::kResend);
    stream.mark_resent(seqs[4], 1000);
    EXPECT_EQ(stream.answer_nack(seqs[4], 1400, 500), NackAnswer::kJustResent);
    EXPECT_EQ(stream.answer_nack(seqs[4], 1500, 500), NackAnswer::kResend);
  }
  EXPECT_EQ(store.in_use(), 0u);  // the history let go of everything it held
}

TEST(SendStream, APacketHeldByAQueueToo) {
  transport::PacketStore store(4);
  SendStream stream({.history = 2}, store);
  const uint32_t h = stored(store, 9);
  store.hold(h);  // the pacer's queue
  stream.remember(stream.take_sequence(), h);
  stream.remember(stream.take_sequence(), stored(store, 1));
  stream.remember(stream.take_sequence(), stored(store, 2));  // lands on h's entry
  EXPECT_EQ(store.holders(h), 1u);                            // still queued
  EXPECT_EQ(store.in_use(), 3u);
  store.release(h);  // sent
  EXPECT_EQ(store.in_use(), 2u);
}

TEST(SendStream, SenderInfoCountsPayloadOctetsOnTheMediaClock) {
  transport::PacketStore store(2);
  SendStream stream({.clock_offset = 100}, store);
  stream.set_clock_epoch(1'000'000'000);
  stream.count_sent(1000);
  stream.count_sent(200);
  const rtp::SenderInfo info = stream.sender_info(2'000'000'000, 0);
  EXPECT_EQ(info.packet_count, 2u);
  EXPECT_EQ(info.octet_count, 1200u);
  EXPECT_EQ(info.rtp_timestamp, 100u + 90'000u);
}

TEST(SendStream, TailProbeWaitsTwoFrameIntervalsAfterAFramesLastPacket) {
  transport::PacketStore store(4);
  SendStream stream({.history = 4}, store);
  EXPECT_EQ(stream.tail_probe_due_ns(), SendStream::kNoProbe);
  // Before the rate is known: 50 ms.
  const uint16_t a = stream.take_sequence();
  stream.remember(a, stored(store, 0));
  stream.on_media_sent(a, true, 1'000'000'000);
  EXPECT_EQ(stream.tail_probe_due_ns(), 1'050'000'000u);
  // 60 fps: two intervals, 33.3 ms.
  for (int i = 0; i < 10; ++i) stream.on_frame(2'000'000'000ull + i * 16'666'667ull);
  stream.on_media_sent(a, true, 3'000'000'000ull);
  EXPECT_NEAR(double(stream.tail_probe_due_ns() - 3'000'000'000ull), 33'333'333.0, 2.0);
  // A later frame's first packet disarms it.
  stream.on_media_sent(uint16_t(a + 1), false, 3'001'000'000ull);
  EXPECT_EQ(stream.tail_probe_due_ns(), SendStream::kNoProbe);
  stream.on_media_sent(a, true, 3'002'000'000ull);
  EXPECT_EQ(stream.take_tail_probe(), std::optional<uint16_t>(a));
  EXPECT_EQ(stream.tail_probe_due_ns(), SendStream::kNoProbe);
  // Gone from the history: nothing to probe with.
  stream.on_media_sent(uint16_t(a + 9), true, 3'003'000'000ull);
  EXPECT_EQ(stream.take_tail_probe(), std::nullopt);
}
