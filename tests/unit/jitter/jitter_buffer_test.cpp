// JitterBuffer: ordering, completeness, duplicates, repair, deadlines, wraparound, gaps and the
// adaptive target. Structural tests release on completion (ReleaseMode::kWhenComplete); the
// timing tests use playout times.
#include "jitter/jitter_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "jitter_test_support.h"

namespace syncd::jitter {
namespace {

using testing::kMs;
using testing::kTicksPerFrame;
using testing::make_packet;
using testing::RecordingSink;

constexpr uint64_t kFrameNs = 16'666'667;

JitterBufferConfig when_complete() {
  JitterBufferConfig config;
  config.mode = ReleaseMode::kWhenComplete;
  return config;
}

// The packets of `frames` frames of `per_frame` packets each, from `first_sequence` (wrapping)
// and `first_timestamp`, sent one frame interval apart and arriving 20 ms later; the first
// packet of each frame carries the start hint.
std::vector<PacketIn> stream(uint16_t first_sequence, uint32_t first_timestamp, int frames,
                             int per_frame, uint64_t start_ns = 1'000 * kMs) {
  std::vector<PacketIn> packets;
  uint16_t sequence = first_sequence;
  for (int f = 0; f < frames; ++f) {
    const uint32_t timestamp = first_timestamp + static_cast<uint32_t>(f) * kTicksPerFrame;
    for (int p = 0; p < per_frame; ++p) {
      const uint64_t arrival = start_ns + f * kFrameNs + 20 * kMs + p * 100'000;
      packets.push_back(make_packet(sequence, timestamp, p == per_frame - 1, p == 0, arrival,
                                    static_cast<uint32_t>(packets.size() + 1)));
      ++sequence;
    }
  }
  return packets;
}

void expect_counters_add_up(const JitterBuffer& buffer) {
  const JitterBufferCounters& c = buffer.counters();
  EXPECT_EQ(c.packets_in, c.packets_accepted + c.duplicates + c.late + c.conflicts + c.no_room);
  EXPECT_EQ(c.packets_accepted, c.packets_released + c.packets_dropped + buffer.packets_held());
}

TEST(JitterBuffer, InOrderFramesGoOutAsSoonAsComplete) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(100, 9000, 3, 3);
  for (size_t i = 0; i < packets.size(); ++i) {
    EXPECT_EQ(buffer.insert(packets[i], packets[i].arrival_ns, sink), InsertResult::kAccepted);
    // Released exactly when its marker packet arrives.
    EXPECT_EQ(sink.frames.size(), (i + 1) / 3) << "after packet " << i;
  }
  ASSERT_EQ(sink.frames.size(), 3u);
  for (int f = 0; f < 3; ++f) {
    const auto& frame = sink.frames[f];
    EXPECT_EQ(frame.rtp_timestamp, 9000u + f * kTicksPerFrame);
    ASSERT_EQ(frame.handles.size(), 3u);
    EXPECT_EQ(frame.handles, (std::vector<uint32_t>{3u * f + 1, 3u * f + 2, 3u * f + 3}));
    EXPECT_EQ(frame.first_arrival_ns, packets[3 * f].arrival_ns);
    EXPECT_EQ(frame.completion_ns, packets[3 * f + 2].arrival_ns);
    EXPECT_EQ(frame.release_ns, packets[3 * f + 2].arrival_ns);
    EXPECT_FALSE(frame.repaired);
  }
  EXPECT_TRUE(sink.drops.empty());
  EXPECT_EQ(buffer.counters().frames_released, 3u);
  EXPECT_EQ(buffer.counters().packets_released, 9u);
  EXPECT_EQ(buffer.packets_held(), 0u);
  EXPECT_EQ(buffer.frames_in_flight(), 0u);
  EXPECT_FALSE(buffer.take_keyframe_request());
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, MarkerOfThePreviousFrameMarksTheStartWithoutHints) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  std::vector<PacketIn> packets = stream(100, 9000, 3, 2);
  for (size_t i = 1; i < packets.size(); ++i) packets[i].starts_frame = false;
  for (const PacketIn& packet : packets) buffer.insert(packet, packet.arrival_ns, sink);
  EXPECT_EQ(sink.frames.size(), 3u);
}

TEST(JitterBuffer, FirstFrameWithoutAStartIsDroppedAtItsDeadlineAndTheNextFlows) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  std::vector<PacketIn> packets = stream(100, 9000, 3, 2);
  for (PacketIn& packet : packets) packet.starts_frame = false;
  for (const PacketIn& packet : packets) buffer.insert(packet, packet.arrival_ns, sink);
  // Packets before 100 may have been lost: frame one cannot be known complete.
  EXPECT_TRUE(sink.frames.empty());
  const uint64_t deadline = buffer.next_wakeup_ns();
  ASSERT_NE(deadline, UINT64_MAX);
  EXPECT_EQ(buffer.deadline_for(buffer.extend(100)), deadline);
  buffer.advance(deadline - 1, sink);
  EXPECT_TRUE(sink.frames.empty());
  buffer.advance(deadline, sink);
  ASSERT_EQ(sink.drops.size(), 1u);
  EXPECT_EQ(sink.drops[0].reason, DropReason::kIncomplete);
  EXPECT_EQ(sink.drops[0].handles, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(sink.frames.size(), 2u);  // the two behind it, at once
  EXPECT_TRUE(buffer.take_keyframe_request());
  EXPECT_FALSE(buffer.take_keyframe_request());
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, ReorderedPacketsComeOutInOrder) {
  // Seeded property test: frames of 1-8 packets, each packet displaced by up to 12 places.
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937 rng(seed);
    std::vector<PacketIn> packets;
    uint16_t sequence = static_cast<uint16_t>(rng());
    uint32_t timestamp = static_cast<uint32_t>(rng());
    const int frames = 40;
    for (int f = 0; f < frames; ++f) {
      const int count = 1 + static_cast<int>(rng() % 8);
      for (int p = 0; p < count; ++p) {
        packets.push_back(make_packet(sequence, timestamp, p == count - 1, p == 0, 0,
                                      static_cast<uint32_t>(packets.size() + 1)));
        ++sequence;
      }
      timestamp += kTicksPerFrame;
    }
    // Each packet is delayed by up to 12 packet times: sort by index + a random lag.
    std::vector<std::pair<double, size_t>> keyed;
    for (size_t i = 0; i < packets.size(); ++i) {
      keyed.push_back({static_cast<double>(i) + (rng() % 1300) / 100.0, i});
    }
    // The stream starts with its first packet: nothing before it can be waited for.
    keyed[0].first = -1;
    std::sort(keyed.begin(), keyed.end());
    JitterBuffer buffer(when_complete());
    RecordingSink sink;
    uint64_t now = 1'000 * kMs;
    for (const auto& [key, index] : keyed) {
      now += 200'000;  // 5,000 packets/s
      PacketIn packet = packets[index];
      packet.arrival_ns = now;
      EXPECT_EQ(buffer.insert(packet, now, sink), InsertResult::kAccepted);
    }
    EXPECT_EQ(sink.frames.size(), static_cast<size_t>(frames)) << "seed " << seed;
    EXPECT_TRUE(sink.drops.empty()) << "seed " << seed;
    for (size_t f = 1; f < sink.frames.size(); ++f) {
      EXPECT_EQ(sink.frames[f].rtp_timestamp - sink.frames[f - 1].rtp_timestamp, kTicksPerFrame);
    }
    expect_counters_add_up(buffer);
  }
}

TEST(JitterBuffer, DuplicatesAreRefusedAndLatePacketsToo) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(100, 9000, 2, 3);
  EXPECT_EQ(buffer.insert(packets[0], 0, sink), InsertResult::kAccepted);
  EXPECT_EQ(buffer.insert(packets[0], 0, sink), InsertResult::kDuplicate);
  EXPECT_EQ(buffer.insert(packets[1], 0, sink), InsertResult::kAccepted);
  EXPECT_EQ(buffer.insert(packets[2], 0, sink), InsertResult::kAccepted);
  ASSERT_EQ(sink.frames.size(), 1u);
  // After release, the same packets are late, not duplicates.
  EXPECT_EQ(buffer.insert(packets[1], 0, sink), InsertResult::kLate);
  EXPECT_EQ(buffer.insert(packets[2], 0, sink), InsertResult::kLate);
  for (size_t i = 3; i < packets.size(); ++i) buffer.insert(packets[i], 0, sink);
  EXPECT_EQ(buffer.insert(packets[4], 0, sink), InsertResult::kLate);
  EXPECT_EQ(sink.frames.size(), 2u);
  EXPECT_EQ(buffer.counters().duplicates, 1u);
  EXPECT_EQ(buffer.counters().late, 3u);
  expect_counters_add_up(buffer);
}

// A packet repaired before its original arrived (the original was late, not lost): the
// original is a duplicate, counted apart so "recovered" can be told from "late".
TEST(JitterBuffer, AnOriginalAfterItsRepairIsCountedApart) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(100, 9000, 1, 3);
  PacketIn repair = packets[1];
  repair.repaired = true;
  EXPECT_EQ(buffer.insert(packets[0], 0, sink), InsertResult::kAccepted);
  EXPECT_EQ(buffer.insert(repair, 0, sink), InsertResult::kAccepted);
  EXPECT_EQ(buffer.insert(packets[1], 0, sink), InsertResult::kDuplicate);
  EXPECT_EQ(buffer.insert(repair, 0, sink), InsertResult::kDuplicate);  // a second repair
  EXPECT_EQ(buffer.counters().originals_after_repair, 1u);
  EXPECT_EQ(buffer.counters().duplicates, 2u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, ContradictionsAreRefusedAsConflicts) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  // Frame A: 10..12 (marker on 12); frame B starts at 13, frame C at 20.
  buffer.insert(make_packet(10, 100, false, true, 0), 0, sink);
  buffer.insert(make_packet(12, 100, true, false, 0), 0, sink);
  buffer.insert(make_packet(14, 200, false, false, 0), 0, sink);
  buffer.insert(make_packet(20, 300, false, false, 0), 0, sink);
  // After its frame's marker.
  EXPECT_EQ(buffer.insert(make_packet(13, 100, false, false, 0), 0, sink), InsertResult::kConflict);
  // A marker before packets already held of its frame.
  EXPECT_EQ(buffer.insert(make_packet(11, 100, true, false, 0), 0, sink), InsertResult::kConflict);
  // Another timestamp inside frame A's range.
  EXPECT_EQ(buffer.insert(make_packet(11, 999, false, false, 0), 0, sink), InsertResult::kConflict);
  // Frame B's timestamp beyond frame C's start.
  EXPECT_EQ(buffer.insert(make_packet(21, 200, false, false, 0), 0, sink), InsertResult::kConflict);
  EXPECT_EQ(buffer.counters().conflicts, 4u);
  EXPECT_EQ(buffer.insert(make_packet(11, 100, false, false, 0), 0, sink), InsertResult::kAccepted);
  EXPECT_EQ(sink.frames.size(), 1u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, LostThenRepairedReleasesBothFramesInOrder) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(500, 0, 3, 3);
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i == 4) continue;  // the middle packet of frame two
    buffer.insert(packets[i], packets[i].arrival_ns, sink);
  }
  // Frame three is complete but waits behind frame two.
  ASSERT_EQ(sink.frames.size(), 1u);
  EXPECT_EQ(buffer.frames_in_flight(), 2u);
  PacketIn repair = packets[4];
  repair.repaired = true;
  repair.arrival_ns = packets.back().arrival_ns + 40 * kMs;
  EXPECT_EQ(buffer.insert(repair, repair.arrival_ns, sink), InsertResult::kAccepted);
  ASSERT_EQ(sink.frames.size(), 3u);
  EXPECT_TRUE(sink.frames[1].repaired);
  EXPECT_EQ(sink.frames[1].completion_ns, repair.arrival_ns);
  EXPECT_EQ(sink.frames[1].handles, (std::vector<uint32_t>{4, 5, 6}));
  EXPECT_FALSE(sink.frames[2].repaired);
  EXPECT_EQ(sink.frames[2].release_ns, repair.arrival_ns);
  EXPECT_EQ(buffer.counters().repaired_accepted, 1u);
  EXPECT_TRUE(sink.drops.empty());
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, LostForeverIsDroppedAtItsDeadlineAndTheNextFramesFlow) {
  JitterBufferConfig config = when_complete();
  config.initial_rtt_ns = 40 * kMs;
  JitterBuffer buffer(config);
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(500, 0, 6, 3);
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i == 8) continue;  // the marker packet of frame three
    buffer.insert(packets[i], packets[i].arrival_ns, sink);
  }
  ASSERT_EQ(sink.frames.size(), 2u);
  // The deadline: playout (sender time mapped + lowest lateness + target) + the repair budget
  // (3 x 40 ms + 10 ms). Frames one and two set the lowest lateness to 0.2 ms (their last
  // packet's offset); the target is at its 2 ms floor.
  const uint64_t deadline = buffer.next_wakeup_ns();
  EXPECT_EQ(buffer.counters().repair_budget_ns, 130 * kMs);
  const uint64_t frame_three_mapped = packets[0].arrival_ns + 2 * kFrameNs;
  EXPECT_NEAR(static_cast<double>(deadline),
              static_cast<double>(frame_three_mapped + 200'000 + 2 * kMs + 130 * kMs), 1e3);
  // The missing packet 508 may be frame three's or frame four's: the later deadline counts.
  EXPECT_EQ(buffer.deadline_for(buffer.extend(507)), deadline);
  EXPECT_NEAR(static_cast<double>(buffer.deadline_for(buffer.extend(508))),
              static_cast<double>(deadline + kFrameNs), 1e3);
  EXPECT_EQ(buffer.deadline_for(buffer.extend(499)), 0u);
  buffer.advance(deadline - 1, sink);
  EXPECT_TRUE(sink.drops.empty());
  buffer.advance(deadline, sink);
  ASSERT_EQ(sink.drops.size(), 1u);
  EXPECT_EQ(sink.drops[0].reason, DropReason::kIncomplete);
  EXPECT_EQ(sink.drops[0].handles, (std::vector<uint32_t>{7, 8}));
  // Frames four to six did not wait any longer: one frame interval between the timestamps of
  // frames three and four leaves no room for a lost frame, so packet 508 was frame three's.
  EXPECT_EQ(sink.frames.size(), 5u);
  EXPECT_TRUE(buffer.take_keyframe_request());
  // The lost packet turning up now is late.
  EXPECT_EQ(buffer.insert(packets[8], deadline + 1, sink), InsertResult::kLate);
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kIncomplete)], 1u);
  expect_counters_add_up(buffer);
}

// A frame whose tail is late (its sender, or the receiving thread, was not scheduled for a
// while) with nothing after it is not given up at its deadline: no later packet says anything
// was lost. It goes out when its tail comes. Once a later frame starts, an incomplete frame past
// its deadline is dropped as before.
TEST(JitterBuffer, AnIncompleteFrameWithNothingAfterItIsHeldPastItsDeadline) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(100, 9000, 3, 3);
  for (size_t i = 0; i < 5; ++i) buffer.insert(packets[i], packets[i].arrival_ns, sink);
  ASSERT_EQ(sink.frames.size(), 1u);
  const uint64_t late = packets[4].arrival_ns + 1'000 * kMs;  // within the 2-s hold
  buffer.advance(late, sink);
  EXPECT_TRUE(sink.drops.empty());
  buffer.insert(packets[5], late, sink);
  ASSERT_EQ(sink.frames.size(), 2u);
  EXPECT_FALSE(buffer.take_keyframe_request());

  // Frame three loses its tail; frame four's first packet, long after, settles it.
  const std::vector<PacketIn> more = stream(109, 9000 + 3 * kTicksPerFrame, 1, 3, late);
  buffer.insert(packets[6], late, sink);
  buffer.advance(late + 1'000 * kMs, sink);
  EXPECT_TRUE(sink.drops.empty());
  PacketIn next = more[0];
  next.handle = 100;
  buffer.insert(next, late + 1'000 * kMs, sink);
  ASSERT_EQ(sink.drops.size(), 1u);
  EXPECT_EQ(sink.drops[0].reason, DropReason::kIncomplete);
  EXPECT_TRUE(buffer.take_keyframe_request());
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, ALoneIncompleteFrameIsDroppedWhenItsHoldEnds) {
  JitterBufferConfig config = when_complete();
  config.lone_frame_hold_ns = 500 * kMs;
  JitterBuffer buffer(config);
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(100, 9000, 2, 3);
  for (size_t i = 0; i < 5; ++i) buffer.insert(packets[i], packets[i].arrival_ns, sink);
  ASSERT_EQ(sink.frames.size(), 1u);
  // The last frame lost its tail and the stream stopped: held past its deadline, not forever.
  const uint64_t release = buffer.next_wakeup_ns();
  ASSERT_NE(release, UINT64_MAX);
  buffer.advance(release - 1, sink);
  EXPECT_TRUE(sink.drops.empty());
  buffer.advance(release, sink);
  ASSERT_EQ(sink.drops.size(), 1u);
  EXPECT_EQ(sink.drops[0].reason, DropReason::kIncomplete);
  EXPECT_EQ(buffer.frames_in_flight(), 0u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, AWholeLostFrameIsReportedAsLostAndTheNextGoesOut) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(500, 0, 3, 2);
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i == 2 || i == 3) continue;  // all of frame two
    buffer.insert(packets[i], packets[i].arrival_ns, sink);
  }
  ASSERT_EQ(sink.frames.size(), 1u);
  const uint64_t deadline = buffer.next_wakeup_ns();
  EXPECT_EQ(deadline, buffer.deadline_for(buffer.extend(502)));
  buffer.advance(deadline, sink);
  ASSERT_EQ(sink.drops.size(), 1u);
  EXPECT_EQ(sink.drops[0].reason, DropReason::kLost);
  EXPECT_TRUE(sink.drops[0].handles.empty());
  ASSERT_EQ(sink.frames.size(), 2u);
  EXPECT_EQ(sink.frames[1].handles, (std::vector<uint32_t>{5, 6}));
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, SequenceAndTimestampWraparound) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  // 65530 .. 65535, 0 .. 5 and timestamps crossing 2^32.
  const std::vector<PacketIn> packets = stream(65530, 0xffffffffu - 2 * kTicksPerFrame, 4, 3);
  for (const PacketIn& packet : packets) {
    EXPECT_EQ(buffer.insert(packet, packet.arrival_ns, sink), InsertResult::kAccepted);
  }
  ASSERT_EQ(sink.frames.size(), 4u);
  for (size_t f = 0; f < 4; ++f) {
    EXPECT_EQ(sink.frames[f].rtp_timestamp,
              static_cast<uint32_t>(0xffffffffu - 2 * kTicksPerFrame + f * kTicksPerFrame));
  }
  // Extended sequence numbers run on through the wrap.
  EXPECT_EQ(sink.frames[2].sequences[0] - sink.frames[0].sequences[0], 6u);
  EXPECT_EQ(static_cast<uint16_t>(sink.frames[2].sequences[0]), 0);
  EXPECT_EQ(buffer.extend(6) - buffer.extend(65535), 7u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, BurstLossRepairedOutOfOrder) {
  JitterBufferConfig config = when_complete();
  config.initial_rtt_ns = 100 * kMs;  // the repairs come 30 ms after the last packet
  JitterBuffer buffer(config);
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(65000, 0, 10, 4);
  // Lose 14 in a row: the end of frame two, all of three to five.
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i >= 6 && i < 20) continue;
    buffer.insert(packets[i], packets[i].arrival_ns, sink);
  }
  ASSERT_EQ(sink.frames.size(), 1u);
  for (size_t i = 20; i-- > 6;) {
    PacketIn repair = packets[i];
    repair.repaired = true;
    buffer.insert(repair, packets.back().arrival_ns + 30 * kMs, sink);
  }
  EXPECT_EQ(sink.frames.size(), 10u);
  EXPECT_TRUE(sink.drops.empty());
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, BurstLossNeverRepairedDropsThenFlows) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(65000, 0, 10, 4);
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i >= 6 && i < 20) continue;
    buffer.insert(packets[i], packets[i].arrival_ns, sink);
  }
  buffer.advance(packets.back().arrival_ns + 1'000 * kMs, sink);
  // Frame two incomplete; frames three to five lost in one gap (one event); six to ten go out.
  EXPECT_EQ(sink.frames.size(), 1u + 5u);
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kIncomplete)], 1u);
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kLost)], 1u);
  ASSERT_EQ(sink.drops.size(), 2u);
  // The gap is given up at frame six's deadline, later than frame two's.
  EXPECT_LT(sink.drops[0].now_ns, sink.drops[1].now_ns + 1);
  EXPECT_EQ(buffer.frames_in_flight(), 0u);
  EXPECT_EQ(buffer.packets_held(), 0u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, AJumpOf30000SequenceNumbersEvictsTheOldAndTheNewFlow) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  // Two frames, the second missing its marker packet, then the sequence jumps by 30,000.
  const std::vector<PacketIn> before = stream(1000, 0, 2, 3);
  for (size_t i = 0; i < 5; ++i) buffer.insert(before[i], before[i].arrival_ns, sink);
  ASSERT_EQ(sink.frames.size(), 1u);
  std::vector<PacketIn> after =
      stream(static_cast<uint16_t>(1000 + 6 + 30000), 10 * kTicksPerFrame, 4, 3, 1'100 * kMs);
  for (size_t i = 0; i < after.size(); ++i) after[i].handle += 100;
  for (const PacketIn& packet : after) {
    EXPECT_EQ(buffer.insert(packet, packet.arrival_ns, sink), InsertResult::kAccepted);
  }
  // The incomplete frame fell out of the window at once, and everything after the jump flows.
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kEvicted)], 1u);
  EXPECT_EQ(sink.frames.size(), 1u + 4u);
  EXPECT_TRUE(buffer.take_keyframe_request());
  // Old packets are now far below the window.
  EXPECT_EQ(buffer.insert(before[5], after.back().arrival_ns, sink), InsertResult::kLate);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, AJumpWithoutHintsCostsOneFrame) {
  JitterBuffer buffer(when_complete());
  RecordingSink sink;
  std::vector<PacketIn> packets = stream(1000, 0, 2, 3);
  std::vector<PacketIn> after =
      stream(static_cast<uint16_t>(1000 + 6 + 30000), 10 * kTicksPerFrame, 4, 3, 1'100 * kMs);
  for (PacketIn& packet : after) {
    packet.handle += 100;
    packet.starts_frame = false;
  }
  for (const PacketIn& packet : packets) buffer.insert(packet, packet.arrival_ns, sink);
  for (const PacketIn& packet : after) buffer.insert(packet, packet.arrival_ns, sink);
  EXPECT_EQ(sink.frames.size(), 2u);
  buffer.advance(buffer.next_wakeup_ns(), sink);
  EXPECT_EQ(sink.frames.size(), 2u + 3u);
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kIncomplete)], 1u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, MoreFramesThanRecordsEvictsTheOldest) {
  JitterBufferConfig config = when_complete();
  config.frame_capacity = 8;
  JitterBuffer buffer(config);
  RecordingSink sink;
  // 20 frames whose marker packets are all lost.
  const std::vector<PacketIn> packets = stream(0, 0, 20, 2);
  for (size_t i = 0; i < packets.size(); i += 2) buffer.insert(packets[i], 0, sink);
  EXPECT_EQ(buffer.frames_in_flight(), 8u);
  EXPECT_EQ(buffer.counters().frames_dropped[static_cast<size_t>(DropReason::kEvicted)], 12u);
  expect_counters_add_up(buffer);
}

TEST(JitterBuffer, PacketWindowFullEvicts) {
  JitterBufferConfig config = when_complete();
  config.packet_capacity = 64;
  JitterBuffer buffer(config);
  RecordingSink sink;
  // One frame of 200 packets cannot fit 64 slots: it is cut at the window and never released.
  for (uint16_t s = 0; s < 200; ++s) {
    buffer.insert(make_packet(s, 0, s == 199, s == 0, 0), 0, sink);
  }
  EXPECT_TRUE(sink.frames.empty());
  EXPECT_LE(buffer.packets_held(), 64u);
  expect_counters_add_up(buffer);
}

// Playout timing: frames released at max(completion, playout), the target following jitter.
struct TimedRun {
  std::vector<uint64_t> release_minus_send;
  uint64_t target = 0;
};

TimedRun run_jittered(uint64_t jitter_ns, uint32_t seed, const JitterBufferConfig& config) {
  JitterBuffer buffer(config);
  RecordingSink sink;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> jitter(0, jitter_ns);
  TimedRun run;
  const int frames = 600;
  struct Arrival {
    uint64_t at;
    PacketIn packet;
  };
  std::vector<Arrival> arrivals;
  uint16_t sequence = 0;
  for (int f = 0; f < frames; ++f) {
    for (int p = 0; p < 4; ++p) {
      const uint64_t send = 1'000 * kMs + f * kFrameNs + p * 100'000;
      const uint64_t at = send + 15 * kMs + jitter(rng);
      arrivals.push_back({at, make_packet(sequence, static_cast<uint32_t>(f) * kTicksPerFrame,
                                          p == 3, p == 0, at)});
      ++sequence;
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  // 1 ms ticks between arrivals, as a relay thread's timer would.
  size_t next = 0;
  for (uint64_t now = 1'000 * kMs; next < arrivals.size() || buffer.frames_in_flight() > 0;
       now += kMs) {
    while (next < arrivals.size() && arrivals[next].at <= now) {
      buffer.insert(arrivals[next].packet, arrivals[next].at, sink);
      ++next;
    }
    buffer.advance(now, sink);
  }
  EXPECT_EQ(sink.frames.size(), static_cast<size_t>(frames));
  for (const auto& frame : sink.frames) {
    const uint64_t send = 1'000 * kMs + (frame.rtp_timestamp / kTicksPerFrame) * kFrameNs;
    run.release_minus_send.push_back(frame.release_ns - send);
    EXPECT_GE(frame.release_ns, frame.completion_ns);
    if (config.mode == ReleaseMode::kPlayout) {
      EXPECT_GE(frame.release_ns + kMs, frame.playout_ns);
    }
  }
  run.target = buffer.counters().target_delay_ns;
  return run;
}

uint64_t percentile(std::vector<uint64_t> values, int p) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) * p / 100];
}

TEST(JitterBuffer, TargetFollowsJitterBetweenFloorAndCeiling) {
  JitterBufferConfig config;
  // No jitter: the target sits at its floor; the packets' own spread (0.3 ms) is below it.
  EXPECT_EQ(run_jittered(0, 1, config).target, config.target_floor_ns);
  // 10 ms of uniform jitter: a frame completes with the last of its 4 packets, the largest of 4
  // uniform delays: 95th percentile 9.9 ms, lowest of 120 frames about 3 ms: target ~7 ms.
  const TimedRun jittered = run_jittered(10 * kMs, 2, config);
  EXPECT_GT(jittered.target, 5 * kMs);
  EXPECT_LT(jittered.target, 9 * kMs);
  // Smooth release: at least 90 % of frames go out within 2 ms of one fixed delay (the playout
  // delay), though their completion times spread over 10 ms.
  const uint64_t p5 = percentile(jittered.release_minus_send, 5);
  const uint64_t p90 = percentile(jittered.release_minus_send, 90);
  EXPECT_LT(p90 - p5, 2 * kMs);
  // 200 ms of jitter: clamped to the ceiling.
  EXPECT_EQ(run_jittered(200 * kMs, 3, config).target, config.target_ceiling_ns);
}

TEST(JitterBuffer, TargetIsThePercentileOfTheWindowExactly) {
  // Single-packet frames with known lateness: after each frame the target must equal the 95th
  // percentile minus the lowest of the last 120 samples, clamped, as a brute-force sort says.
  JitterBufferConfig config = when_complete();
  config.target_floor_ns = 1 * kMs;
  config.target_ceiling_ns = 25 * kMs;
  JitterBuffer buffer(config);
  RecordingSink sink;
  std::mt19937_64 rng(11);
  const uint64_t origin = 5'000 * kMs;
  std::vector<int64_t> samples;
  for (int f = 0; f < 1000; ++f) {
    // Mostly a few ms, sometimes far out, so the percentile moves and the ceiling is reached.
    const int64_t lateness =
        f == 0 ? 0 : static_cast<int64_t>(rng() % (rng() % 10 == 0 ? 60'000'000 : 8'000'000));
    const uint32_t timestamp = static_cast<uint32_t>(f) * kTicksPerFrame;
    const int64_t mapped = static_cast<int64_t>(origin) +
                           static_cast<int64_t>(static_cast<double>(timestamp) * (1e9 / 90000));
    const uint64_t arrival = static_cast<uint64_t>(mapped + lateness);
    ASSERT_EQ(buffer.insert(make_packet(static_cast<uint16_t>(f), timestamp, true, true, arrival),
                            arrival, sink),
              InsertResult::kAccepted);
    ASSERT_EQ(sink.frames.size(), static_cast<size_t>(f + 1));
    samples.push_back(lateness);
    std::vector<int64_t> window(samples.end() - std::min<size_t>(samples.size(), 120),
                                samples.end());
    std::sort(window.begin(), window.end());
    const int64_t spread = window[(window.size() - 1) * 95 / 100] - window[0];
    const uint64_t expected = std::clamp<uint64_t>(
        static_cast<uint64_t>(spread), config.target_floor_ns, config.target_ceiling_ns);
    ASSERT_EQ(buffer.counters().target_delay_ns, expected) << "frame " << f;
  }
}

TEST(JitterBuffer, ReleaseWhenCompleteAddsNoDelay) {
  const TimedRun run = run_jittered(10 * kMs, 4, when_complete());
  // Completion (the last of four packets) lands 15.3-25.3 ms after the send; the 1 ms tick of
  // the test's loop is the only addition.
  EXPECT_LE(percentile(run.release_minus_send, 100), 26 * kMs + kMs);
  const TimedRun smooth = run_jittered(10 * kMs, 4, JitterBufferConfig{});
  EXPECT_LT(percentile(run.release_minus_send, 50), percentile(smooth.release_minus_send, 50));
}

TEST(JitterBuffer, RateChangeKeepsPlayoutContinuous) {
  JitterBuffer buffer;
  RecordingSink sink;
  const std::vector<PacketIn> packets = stream(0, 0, 30, 1);
  for (const PacketIn& packet : packets) {
    buffer.insert(packet, packet.arrival_ns, sink);
    buffer.advance(packet.arrival_ns + 20 * kMs, sink);
  }
  // Frame 31 is pending; a 100 ppm rate correction moves its playout by about 100 ppm of one
  // frame interval, not by 100 ppm of the 500 ms since the anchor.
  buffer.insert(make_packet(30, 30 * kTicksPerFrame, false, true, 1'600 * kMs), 1'600 * kMs, sink);
  const uint64_t before = buffer.next_wakeup_ns();
  buffer.set_local_ns_per_tick(1e9 / 90000 * (1 - 100e-6));
  const uint64_t after = buffer.next_wakeup_ns();
  EXPECT_LT(before > after ? before - after : after - before, 10'000u);
  // A rate off by 1 % is refused.
  buffer.set_local_ns_per_tick(1e9 / 90000 * 1.01);
  EXPECT_EQ(buffer.next_wakeup_ns(), after);
}

}  // namespace
}  // namespace syncd::jitter
