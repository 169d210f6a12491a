// Shared helpers for the jitter module's unit tests: a sink that records every event and checks
// the release contract as it goes, and a builder for packets.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "jitter/jitter_buffer.h"

namespace syncd::jitter::testing {

struct RecordedFrame {
  uint32_t rtp_timestamp = 0;
  std::vector<uint64_t> sequences;
  std::vector<uint32_t> handles;
  uint64_t first_arrival_ns = 0;
  uint64_t completion_ns = 0;
  uint64_t release_ns = 0;
  uint64_t playout_ns = 0;
  bool repaired = false;
};

struct RecordedDrop {
  uint32_t rtp_timestamp = 0;
  DropReason reason = DropReason::kIncomplete;
  std::vector<uint32_t> handles;
  uint64_t now_ns = 0;
};

// Records events; fails the test if a frame goes out of sequence order, a packet list is not
// consecutive, or a handle comes back twice.
class RecordingSink : public FrameSink {
 public:
  std::vector<RecordedFrame> frames;
  std::vector<RecordedDrop> drops;
  std::set<uint32_t> handles_seen;
  uint64_t last_sequence = 0;
  bool any = false;

  void on_frame(const FrameEvent& frame) override {
    RecordedFrame record;
    record.rtp_timestamp = frame.rtp_timestamp;
    record.first_arrival_ns = frame.first_arrival_ns;
    record.completion_ns = frame.completion_ns;
    record.release_ns = frame.release_ns;
    record.playout_ns = frame.playout_ns;
    record.repaired = frame.repaired;
    EXPECT_FALSE(frame.packets.empty());
    for (size_t i = 0; i < frame.packets.size(); ++i) {
      const PacketRef& packet = frame.packets[i];
      if (i > 0) {
        EXPECT_EQ(packet.sequence, frame.packets[i - 1].sequence + 1);
      }
      if (any) {
        EXPECT_GT(packet.sequence, last_sequence);
      }
      EXPECT_TRUE(handles_seen.insert(packet.handle).second) << "handle " << packet.handle;
      record.sequences.push_back(packet.sequence);
      record.handles.push_back(packet.handle);
    }
    last_sequence = frame.packets.back().sequence;
    any = true;
    frames.push_back(record);
  }

  void on_drop(const DropEvent& drop) override {
    RecordedDrop record;
    record.rtp_timestamp = drop.rtp_timestamp;
    record.reason = drop.reason;
    record.now_ns = drop.now_ns;
    for (const PacketRef& packet : drop.packets) {
      EXPECT_TRUE(handles_seen.insert(packet.handle).second) << "handle " << packet.handle;
      record.handles.push_back(packet.handle);
      if (any) {
        EXPECT_GT(packet.sequence, last_sequence);
      }
      last_sequence = packet.sequence;
      any = true;
    }
    drops.push_back(record);
  }
};

inline PacketIn make_packet(uint16_t sequence, uint32_t timestamp, bool marker, bool starts_frame,
                            uint64_t arrival_ns, uint32_t handle = 0, bool repaired = false) {
  PacketIn packet;
  packet.sequence = sequence;
  packet.rtp_timestamp = timestamp;
  packet.marker = marker;
  packet.starts_frame = starts_frame;
  packet.repaired = repaired;
  packet.arrival_ns = arrival_ns;
  packet.handle = handle == 0 ? sequence : handle;
  packet.length = 1000 + sequence % 200;
  return packet;
}

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kTicksPerFrame = 1500;  // 90 kHz / 60 fps

}  // namespace syncd::jitter::testing
