// The data plane of src/rtp allocates nothing per packet or per access unit: operator new is
// counted here while a key-frame-sized AU goes through packetize, parse, RTX, depacketize, and
// RTCP is written and parsed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "rtp/h264_depacketizer.h"
#include "rtp/h264_packetizer.h"
#include "rtp/receiver_statistics.h"
#include "rtp/rtcp.h"
#include "rtp/rtp_packet.h"
#include "rtp/rtx.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace syncd::rtp {
namespace {

struct CountingSink : RtcpSink {
  size_t events = 0;
  void on_receiver_report(const ReceiverReport&) override { ++events; }
  void on_nack(const Nack& n) override { events += n.lost.size(); }
  void on_remb(const Remb&) override { ++events; }
};

TEST(RtpAllocation, SteadyStateAllocatesNothing) {
  // Set-up may allocate: the AU, the packet slots, the output, the objects.
  std::vector<uint8_t> au = {0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3};
  for (int slice = 0; slice < 4; ++slice) {
    au.insert(au.end(), {0, 0, 0, 1, 0x65});
    for (int i = 0; i < 62000; ++i) au.push_back(static_cast<uint8_t>(i % 250 + 1));
  }
  std::vector<uint8_t> slots(300 * 1200);
  std::vector<uint8_t> rtx(1300);
  std::vector<uint8_t> restored(1300);
  std::vector<uint8_t> out(au.size());
  std::vector<uint8_t> rtcp(1500);
  auto packetizer = std::make_unique<H264Packetizer>();
  H264Depacketizer depacketizer;
  ReceiverStatistics stats(90000);
  CountingSink sink;

  const uint64_t before = g_allocations.load();
  for (uint32_t frame = 0; frame < 3; ++frame) {
    ASSERT_EQ(packetizer->begin(au), PacketizeError::kOk);
    RtpHeader header;
    header.payload_type = 96;
    header.timestamp = frame * 1500;
    header.has_abs_send_time = true;
    size_t count = 0;
    std::span<uint8_t> slot_span(slots);
    size_t sizes[300];
    while (packetizer->has_next()) {
      header.sequence = static_cast<uint16_t>(frame * 300 + count);
      sizes[count] = packetizer->write_next(header, slot_span.subspan(count * 1200, 1200));
      ASSERT_TRUE(set_abs_send_time(slot_span.subspan(count * 1200, sizes[count]), count));
      ++count;
    }
    depacketizer.begin(out);
    for (size_t i = 0; i < count; ++i) {
      RtpPacketView view;
      ASSERT_EQ(parse_rtp(slot_span.subspan(i * 1200, sizes[i]), view), RtpParseError::kOk);
      RtpPacketView rtx_view;
      const size_t n = write_rtx(view, {97, 1, static_cast<uint16_t>(i)}, rtx);
      ASSERT_EQ(parse_rtp(std::span(rtx).first(n), rtx_view), RtpParseError::kOk);
      size_t restored_size = 0;
      ASSERT_EQ(restore_original(rtx_view, 96, 0, restored, &restored_size), RtxError::kOk);
      ASSERT_EQ(depacketizer.push(view), DepacketizeError::kOk);
      stats.on_packet(view.sequence, view.timestamp, uint64_t{frame} * 16'666'667 + i * 10'000);
    }
    ASSERT_EQ(depacketizer.finish(), DepacketizeError::kOk);
    RtcpWriter writer(rtcp);
    const ReportBlock block = stats.make_report_block(7, uint64_t{frame} * 16'666'667);
    ASSERT_TRUE(writer.add_receiver_report(1, {&block, 1}));
    const uint16_t lost[] = {1, 2, 5, 40};
    ASSERT_TRUE(writer.add_nack(1, 7, lost));
    const uint32_t ssrc = 7;
    ASSERT_TRUE(writer.add_remb(1, 12'000'000, {&ssrc, 1}));
    ASSERT_EQ(parse_rtcp(writer.packet(), sink), RtcpParseError::kOk);
  }
  const uint64_t allocations = g_allocations.load() - before;
  EXPECT_EQ(allocations, 0u);
  // The counter does see allocations (the replacement operator new is the one linked).
  auto probe = std::make_unique<int>(1);
  EXPECT_EQ(g_allocations.load() - before, allocations + 1);
  EXPECT_EQ(depacketizer.access_unit().size(), au.size());
  EXPECT_GT(sink.events, 0u);
}

}  // namespace
}  // namespace syncd::rtp
