// The relay's own wire formats (src/relay/relay_wire.h): RFC 7983 demultiplexing, the
// frame-info header extension elements, the stream description APP packet; and the packet
// store the session keeps its packets in.
#include "relay/relay_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "relay/packet_store.h"

using namespace syncd::relay;

TEST(RelayWire, DatagramsAreToldApartByTheirFirstBytes) {
  auto kind = [](std::vector<uint8_t> d) { return classify_datagram(d); };
  // RFC 7983: 20..63 DTLS (22 handshake, 23 application data), 128..191 RTP/RTCP.
  EXPECT_EQ(kind({22, 0xFE, 0xFD}), DatagramKind::kDtls);
  EXPECT_EQ(kind({20}), DatagramKind::kDtls);
  EXPECT_EQ(kind({63}), DatagramKind::kDtls);
  EXPECT_EQ(kind({19}), DatagramKind::kUnknown);
  EXPECT_EQ(kind({64}), DatagramKind::kUnknown);
  EXPECT_EQ(kind({0, 1, 0, 0}), DatagramKind::kUnknown);  // STUN
  // RFC 5761: packet types 192..223 are RTCP (SR 200, RR 201, RTPFB 205, PSFB 206, APP 204).
  EXPECT_EQ(kind({0x80, 200, 0, 6, 1, 2, 3, 4}), DatagramKind::kRtcp);
  EXPECT_EQ(kind({0x81, 205, 0, 3, 1, 2, 3, 4}), DatagramKind::kRtcp);
  EXPECT_EQ(kind({0x80, 96, 0, 1, 0, 0, 0, 0}), DatagramKind::kRtp);
  EXPECT_EQ(kind({0x80, 96 | 0x80, 0, 1, 0, 0, 0, 0}), DatagramKind::kRtp);  // marker set
  EXPECT_EQ(kind({0x80, 96}), DatagramKind::kUnknown);  // shorter than any RTP/RTCP header
  EXPECT_EQ(kind({0xC0, 96, 0, 1, 0, 0, 0, 0}), DatagramKind::kUnknown);  // version 3
  EXPECT_EQ(kind({}), DatagramKind::kUnknown);
}

TEST(RelayWire, FrameInfoElementsRoundTripBigEndian) {
  FrameInfoWire in{0x0102030405060708ull, 0xF1F2F3F4F5F6F7F8ull, 123456789012ull, 0x11223344,
                   987654321098765ull};
  std::array<uint8_t, kFrameIdBytes> id;
  std::array<uint8_t, kFrameTimeBytes> time;
  std::array<uint8_t, kSenderTimeBytes> sender;
  write_frame_id(in, id.data());
  write_frame_time(in, time.data());
  write_sender_time(in, sender.data());
  EXPECT_EQ(id[0], 0x01);
  EXPECT_EQ(id[7], 0x08);
  EXPECT_EQ(id[8], 0xF1);
  EXPECT_EQ(time[8], 0x11);
  FrameInfoWire out;
  ASSERT_TRUE(read_frame_id(id, out));
  ASSERT_TRUE(read_frame_time(time, out));
  ASSERT_TRUE(read_sender_time(sender, out));
  EXPECT_EQ(out.sequence, in.sequence);
  EXPECT_EQ(out.content_hash, in.content_hash);
  EXPECT_EQ(out.capture_time_us, in.capture_time_us);
  EXPECT_EQ(out.flags, in.flags);
  EXPECT_EQ(out.sender_accept_ns, in.sender_accept_ns);
  // Another length is not this element.
  EXPECT_FALSE(read_frame_id(std::span(id).first(15), out));
  EXPECT_FALSE(read_frame_time(id, out));
  EXPECT_FALSE(read_sender_time(std::span(id).first(9), out));
}

namespace {
StreamDescription description(const char* name) {
  StreamDescription d;
  d.ssrc = 0xCAFEBABE;
  d.format = 5;
  d.source_format = 1;  // encoded by the relay from RGBA
  d.width = 1920;
  d.height = 1080;
  d.fps_millihertz = 60000;
  d.rtt_100us = 417;
  d.name_bytes = uint8_t(std::strlen(name));
  std::memcpy(d.name, name, d.name_bytes);
  return d;
}
}  // namespace

TEST(RelayWire, StreamDescriptionRoundTripsAtEveryNameLength) {
  std::array<uint8_t, kMaxStreamDescriptionBytes> buf;
  std::string name;
  for (size_t n = 1; n <= kMaxStreamNameBytes; ++n) {
    name.push_back(char('a' + n % 26));
    const StreamDescription d = description(name.c_str());
    const size_t bytes = write_stream_description(d, buf);
    ASSERT_EQ(bytes, 32 + ((n + 3) & ~size_t(3))) << n;
    EXPECT_EQ(bytes % 4, 0u);
    EXPECT_EQ(buf[1], 204);  // APP
    EXPECT_EQ(size_t((buf[2] << 8 | buf[3]) + 1) * 4, bytes);
    StreamDescription out;
    ASSERT_EQ(parse_stream_description(std::span(buf).first(bytes), out), DescriptionError::kNone);
    EXPECT_EQ(out.name_view(), name);
    EXPECT_EQ(out.ssrc, d.ssrc);
    EXPECT_EQ(out.format, 5);
    EXPECT_EQ(out.source_format, 1);
    EXPECT_EQ(out.width, 1920u);
    EXPECT_EQ(out.height, 1080u);
    EXPECT_EQ(out.fps_millihertz, 60000u);
    EXPECT_EQ(out.rtt_100us, 417);
  }
  std::array<uint8_t, 20> small;
  EXPECT_EQ(write_stream_description(description("cam"), small), 0u);  // does not fit
  StreamDescription unnamed = description("x");
  unnamed.name_bytes = 0;
  EXPECT_EQ(write_stream_description(unnamed, buf), 0u);
}

TEST(RelayWire, StreamDescriptionRefusesWhatItCannotTrust) {
  std::array<uint8_t, kMaxStreamDescriptionBytes> buf;
  const size_t bytes = write_stream_description(description("camera"), buf);
  StreamDescription out;
  // Every truncation is refused, never read past.
  for (size_t n = 0; n < bytes; ++n)
    EXPECT_NE(parse_stream_description(std::span(buf).first(n), out), DescriptionError::kNone) << n;
  auto with = [&](size_t at, uint8_t value) {
    std::array<uint8_t, kMaxStreamDescriptionBytes> copy = buf;
    copy[at] = value;
    return parse_stream_description(std::span(copy).first(bytes), out);
  };
  EXPECT_EQ(with(1, 201), DescriptionError::kNotApp);   // an RR
  EXPECT_EQ(with(0, 0x81), DescriptionError::kNotApp);  // subtype 1
  EXPECT_EQ(with(8, 'X'), DescriptionError::kNotSync);  // another application's
  EXPECT_EQ(with(3, uint8_t(buf[3] + 1)), DescriptionError::kBadLength);
  EXPECT_EQ(with(12, 2), DescriptionError::kBadVersion);
  EXPECT_EQ(with(14, 0), DescriptionError::kBadName);
  EXPECT_EQ(with(14, 65), DescriptionError::kBadName);
  EXPECT_EQ(with(14, 9), DescriptionError::kBadName);  // past the packet (8 bytes of name room)
  EXPECT_EQ(with(19, 0), DescriptionError::kNone);     // width 1920 -> 1792: still fine
  std::array<uint8_t, kMaxStreamDescriptionBytes> zero = buf;
  std::memset(zero.data() + 16, 0, 4);
  EXPECT_EQ(parse_stream_description(std::span(zero).first(bytes), out),
            DescriptionError::kBadGeometry);
}

TEST(PacketStore, HandsOutEveryBufferOnceAndRefusesASecondGiveBack) {
  PacketStore store(4);
  std::vector<uint32_t> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(store.take());
  EXPECT_EQ(store.take(), PacketStore::kNone);
  EXPECT_EQ(store.in_use(), 4u);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (std::vector<uint32_t>{0, 1, 2, 3}));
  store.room(2)[0] = 0xAB;
  store.set_size(2, 1200);
  EXPECT_EQ(store.packet(2).size(), 1200u);
  EXPECT_EQ(store.packet(2)[0], 0xAB);
  EXPECT_NE(store.room(1).data(), store.room(2).data());
  EXPECT_TRUE(store.give_back(2));
  EXPECT_FALSE(store.give_back(2));  // already free
  EXPECT_FALSE(store.give_back(9));  // not a handle
  EXPECT_EQ(store.in_use(), 3u);
  EXPECT_EQ(store.take(), 2u);
  EXPECT_EQ(store.packet(2).size(), 0u);
}
