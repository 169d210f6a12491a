// libFuzzer target for syncd::jitter::JitterBuffer, with the NackScheduler and the
// ClockSkewEstimator fed alongside.
//
// Input: byte 0 picks the configuration (release mode, small or default capacities); the rest is
// a sequence of operations, each an opcode byte and its operands: insert a packet (sequence as a
// small step or a jump, timestamp the same / next / arbitrary, marker, start hint, repaired),
// advance the clock, set the RTT or the clock rate, collect NACKs, give a sender report.
// Invariants checked: events leave in sequence order, a frame's packets are consecutive, each
// accepted handle comes back once (refused ones never), the counters add up, NACK output is
// bounded and the skew estimate stays finite.
#include "jitter/jitter_buffer.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_check.h"
#include "jitter/clock_skew.h"
#include "jitter/nack_scheduler.h"

namespace {

using namespace syncd::jitter;

constexpr uint32_t kMaxHandles = 1 << 16;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return offset_ >= size_; }
  uint8_t u8() { return offset_ < size_ ? data_[offset_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return u16() | (static_cast<uint32_t>(u16()) << 16); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

class CheckingSink : public FrameSink {
 public:
  std::vector<uint8_t> outstanding = std::vector<uint8_t>(kMaxHandles, 0);
  uint64_t last_sequence = 0;
  bool any = false;
  uint64_t frames = 0;
  uint64_t drops = 0;
  uint64_t packets = 0;

  void take(std::span<const PacketRef> list) {
    for (size_t i = 0; i < list.size(); ++i) {
      const PacketRef& packet = list[i];
      FUZZ_CHECK(packet.handle < kMaxHandles);
      FUZZ_CHECK(outstanding[packet.handle] == 1);  // accepted, and not returned before
      outstanding[packet.handle] = 0;
      if (any) FUZZ_CHECK(packet.sequence > last_sequence);
      last_sequence = packet.sequence;
      any = true;
      ++packets;
    }
  }
  void on_frame(const FrameEvent& frame) override {
    FUZZ_CHECK(!frame.packets.empty());
    for (size_t i = 1; i < frame.packets.size(); ++i) {
      FUZZ_CHECK(frame.packets[i].sequence == frame.packets[i - 1].sequence + 1);
    }
    take(frame.packets);
    ++frames;
  }
  void on_drop(const DropEvent& drop) override {
    if (drop.reason == DropReason::kLost) FUZZ_CHECK(drop.packets.empty());
    take(drop.packets);
    ++drops;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const uint8_t setup = in.u8();
  JitterBufferConfig config;
  config.mode = (setup & 1) ? ReleaseMode::kWhenComplete : ReleaseMode::kPlayout;
  if (setup & 2) {
    config.packet_capacity = 64;
    config.frame_capacity = 8;
    config.window_frames = 4;
  }
  NackConfig nack_config;
  if (setup & 4) nack_config.capacity = 16;
  JitterBuffer buffer(config);
  NackScheduler nack(nack_config);
  ClockSkewEstimator skew;
  CheckingSink sink;

  uint64_t now = 1'000'000'000;
  uint16_t sequence = in.u16();
  uint32_t timestamp = in.u32();
  uint32_t next_handle = 0;
  uint64_t sender_ns = 5'000'000'000;
  uint16_t nacked[32];

  while (!in.empty() && next_handle < kMaxHandles) {
    const uint8_t op = in.u8();
    switch (op % 8) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const uint8_t flags = in.u8();
        // Sequence: mostly the next one, else a small step either way, else anything.
        if ((flags & 0x30) == 0x00) {
          sequence = static_cast<uint16_t>(sequence + 1);
        } else if ((flags & 0x30) == 0x10) {
          sequence = static_cast<uint16_t>(sequence + static_cast<int8_t>(in.u8()));
        } else if ((flags & 0x30) == 0x20) {
          sequence = static_cast<uint16_t>(sequence + 1 + (op >> 3) * 1000);
        } else {
          sequence = in.u16();
        }
        if ((flags & 0xc0) == 0x40) {
          timestamp += 1500;
        } else if ((flags & 0xc0) == 0x80) {
          timestamp -= 1500;
        } else if ((flags & 0xc0) == 0xc0) {
          timestamp = in.u32();
        }
        PacketIn packet;
        packet.sequence = sequence;
        packet.rtp_timestamp = timestamp;
        packet.marker = flags & 1;
        packet.starts_frame = flags & 2;
        packet.repaired = flags & 4;
        packet.arrival_ns = (flags & 8) ? now - (in.u8() * 100'000ull) : now;
        packet.handle = next_handle++;
        packet.length = op;
        sink.outstanding[packet.handle] = 1;
        const InsertResult result = buffer.insert(packet, now, sink);
        if (result != InsertResult::kAccepted) {
          // A refused handle stays the caller's: it must never come back.
          FUZZ_CHECK(sink.outstanding[packet.handle] == 1);
          sink.outstanding[packet.handle] = 2;
        }
        nack.on_packet(buffer.last_extended_sequence(), now, packet.repaired);
        break;
      }
      case 4:
        now += static_cast<uint64_t>(in.u16()) * ((op & 0x80) ? 10'000 : 100);
        buffer.advance(now, sink);
        if (op & 0x40) {
          const uint64_t wake = buffer.next_wakeup_ns();
          if (wake != UINT64_MAX && wake > now && wake - now < 10'000'000'000ull) {
            now = wake;
            buffer.advance(now, sink);
          }
        }
        break;
      case 5:
        if (op & 0x80) {
          buffer.set_local_ns_per_tick(1e9 / 90000 * (1.0 + (static_cast<int8_t>(in.u8())) * 1e-5));
        } else {
          buffer.set_rtt(static_cast<uint64_t>(in.u16()) * 100'000);
        }
        break;
      case 6: {
        const size_t room = 1 + (op >> 3) % 32;
        const size_t count = nack.collect(now, static_cast<uint64_t>(in.u8()) * 1'000'000, buffer,
                                          std::span<uint16_t>(nacked, room));
        FUZZ_CHECK(count <= room);
        FUZZ_CHECK(nack.tracked() <= (nack_config.capacity));
        break;
      }
      case 7:
        sender_ns += static_cast<uint64_t>(in.u16()) * 1'000'000;
        skew.on_sender_report(sender_ns, in.u32(), now + in.u16() * 1000ull);
        FUZZ_CHECK(std::isfinite(skew.skew_ppm()));
        FUZZ_CHECK(std::isfinite(skew.local_ns_per_tick()));
        if (op & 0x80) buffer.set_local_ns_per_tick(skew.local_ns_per_tick());
        break;
    }
    const JitterBufferCounters& c = buffer.counters();
    FUZZ_CHECK(c.packets_in ==
               c.packets_accepted + c.duplicates + c.late + c.conflicts + c.no_room);
    FUZZ_CHECK(c.packets_accepted ==
               c.packets_released + c.packets_dropped + buffer.packets_held());
    FUZZ_CHECK(c.packets_released + c.packets_dropped == sink.packets);
    FUZZ_CHECK(c.frames_released == sink.frames);
    uint64_t dropped = 0;
    for (uint64_t d : c.frames_dropped) dropped += d;
    FUZZ_CHECK(dropped == sink.drops);
    FUZZ_CHECK(buffer.frames_in_flight() <= config.frame_capacity);
    FUZZ_CHECK(buffer.packets_held() <= config.packet_capacity);
  }
  // At the end of time everything held has gone out, released or dropped: nothing is stuck.
  buffer.advance(UINT64_MAX, sink);
  FUZZ_CHECK(buffer.frames_in_flight() == 0);
  FUZZ_CHECK(buffer.packets_held() == 0);
  for (uint32_t h = 0; h < next_handle; ++h) FUZZ_CHECK(sink.outstanding[h] != 1);
  return 0;
}
