// The receiving half of an RTP stream (src/rtp_media/receive_stream.h) over a real packet store
// and jitter buffer: frames complete in order, a gap is NACKed, a report block is made, and a new
// sender starts the stream over after the old one's frames are handed out.
#include "rtp_media/receive_stream.h"

#include <gtest/gtest.h>

#include <vector>

#include "rtp/rtp_packet.h"
#include "transport/packet_store.h"

using namespace syncd;
using namespace syncd::rtp_media;

namespace {

struct Frames final : jitter::FrameSink {
  explicit Frames(transport::PacketStore& s) : store(s) {}
  transport::PacketStore& store;
  std::vector<uint32_t> complete;  // rtp timestamps
  size_t dropped = 0;
  void on_frame(const jitter::FrameEvent& f) override {
    complete.push_back(f.rtp_timestamp);
    for (const auto& p : f.packets) store.give_back(p.handle);
  }
  void on_drop(const jitter::DropEvent& d) override {
    ++dropped;
    for (const auto& p : d.packets) store.give_back(p.handle);
  }
};

// One packet of a frame: every frame is two packets, the second with the marker.
struct Sent {
  std::vector<uint8_t> bytes;
  rtp::RtpPacketView view;
};
Sent packet(uint32_t ssrc, uint16_t sequence, uint32_t timestamp, bool marker,
            bool first_of_frame) {
  rtp::RtpHeader h;
  h.payload_type = 96;
  h.ssrc = ssrc;
  h.sequence = sequence;
  h.timestamp = timestamp;
  h.marker = marker;
  uint8_t payload[100] = {};
  payload[0] = first_of_frame ? 9 : 1;  // an access unit delimiter starts each frame
  Sent s;
  s.bytes.resize(200);
  s.bytes.resize(rtp::write_rtp_packet(h, payload, s.bytes));
  EXPECT_EQ(rtp::parse_rtp(s.bytes, s.view), rtp::RtpParseError::kOk);
  return s;
}

constexpr uint64_t kMs = 1'000'000;

}  // namespace

TEST(ReceiveStream, FramesCompleteAGapIsNackedAndANewSenderStartsOver) {
  transport::PacketStore store(256);
  Frames sink(store);
  ReceiveStream stream(
      {.clock_rate = 90'000,
       .starts_frame = [](std::span<const uint8_t> p) { return !p.empty() && p[0] == 9; }},
      store);
  EXPECT_FALSE(stream.knows_sender());
  stream.start_sender(0xA, 0, sink);
  ASSERT_TRUE(stream.knows_sender());
  EXPECT_EQ(stream.sender_ssrc(), 0xAu);
  uint64_t now = 1000 * kMs;
  bool no_buffer = false;
  uint16_t nacks[16];
  size_t nacked = 0;
  // Ten frames at 60 fps, two packets each; frame 5's first packet (sequence 10) is lost.
  for (uint16_t f = 0; f < 10; ++f, now += 16 * kMs) {
    for (uint16_t k = 0; k < 2; ++k) {
      const uint16_t seq = uint16_t(f * 2 + k);
      if (seq == 10) continue;
      const Sent p = packet(0xA, seq, f * 1500u, k == 1, k == 0);
      EXPECT_TRUE(stream.accept(p.view, p.bytes, false, now, sink, no_buffer));
      EXPECT_FALSE(no_buffer);
    }
    stream.advance(now, sink);
    // The gap is NACKed once the reorder allowance has passed (2 ms), while frame 5 can still
    // be repaired.
    nacked += stream.collect_nacks(now + 3 * kMs, std::span(nacks + nacked, 16 - nacked));
  }
  stream.advance(now + 40 * kMs, sink);
  EXPECT_EQ(sink.complete.size(), 5u);  // frames 0-4; 5 waits for its repair, 6-9 behind it
  // Asked for once, and again a round trip (50 ms before one is measured) later.
  ASSERT_GE(nacked, 1u);
  for (size_t i = 0; i < nacked; ++i) EXPECT_EQ(nacks[i], 10);
  EXPECT_EQ(stream.nack_counters().requested, 1u);
  // The repair completes frame 5.
  const Sent repair = packet(0xA, 10, 5 * 1500u, false, true);
  EXPECT_TRUE(stream.accept(repair.view, repair.bytes, true, now, sink, no_buffer));
  stream.advance(now + 200 * kMs, sink);
  EXPECT_EQ(sink.complete.size(), 10u);
  EXPECT_EQ(sink.dropped, 0u);
  const auto block = stream.report_block(now);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->source_ssrc, 0xAu);
  EXPECT_EQ(block->cumulative_lost, 1);  // the repair is not counted as received
  // A new sender: the stream starts over and takes its packets from its own sequence numbers.
  stream.start_sender(0xB, now, sink);
  EXPECT_EQ(stream.sender_ssrc(), 0xBu);
  EXPECT_FALSE(stream.report_block(now).has_value());  // its statistics start again
  for (uint16_t k = 0; k < 2; ++k) {
    const Sent p = packet(0xB, uint16_t(40000 + k), 777u, k == 1, k == 0);
    EXPECT_TRUE(stream.accept(p.view, p.bytes, false, now, sink, no_buffer));
  }
  stream.advance(now + 200 * kMs, sink);
  EXPECT_EQ(sink.complete.back(), 777u);
  EXPECT_EQ(store.in_use(), 0u);  // every packet went back through the sink
}

TEST(ReceiveStream, AFullStoreSaysNoBuffer) {
  transport::PacketStore store(1);
  Frames sink(store);
  ReceiveStream stream({}, store);
  stream.start_sender(1, 0, sink);
  bool no_buffer = false;
  const Sent a = packet(1, 1, 0, false, true);
  const Sent b = packet(1, 2, 0, false, false);
  EXPECT_TRUE(stream.accept(a.view, a.bytes, false, 0, sink, no_buffer));
  EXPECT_FALSE(stream.accept(b.view, b.bytes, false, 0, sink, no_buffer));
  EXPECT_TRUE(no_buffer);
}
