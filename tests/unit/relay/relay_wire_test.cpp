// The relay's own wire formats (src/relay/relay_wire.h): the frame-info header extension
// elements, the stream description APP packet, audio descriptions and channel selections.
#include "relay/relay_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

using namespace syncd::relay;

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

TEST(RelayWire, AudioDescriptionRoundTripsAndStaysApartFromTheStreamDescription) {
  AudioDescription d;
  d.ssrc = 0x01020304;
  d.channels = 9;
  d.groups = 1;
  d.payload_type = 111;
  d.frame_samples = 480;
  d.source_channels = 32;
  d.bitrate_per_channel = 32000;
  const uint8_t map[] = {0, 1, 2, 3, 4, 5, 6, 7, 16};
  std::memcpy(d.channel_map, map, sizeof(map));
  uint8_t out[kMaxAudioDescriptionBytes];
  const size_t n = write_audio_description(d, out);
  ASSERT_EQ(n, 24u + 12u);
  AudioDescription back;
  ASSERT_EQ(parse_audio_description({out, n}, back), AudioDescriptionError::kNone);
  EXPECT_EQ(back.ssrc, d.ssrc);
  EXPECT_EQ(back.channels, 9);
  EXPECT_EQ(back.source_channels, 32);
  EXPECT_EQ(back.bitrate_per_channel, 32000u);
  EXPECT_EQ(back.channel_map[8], 16);
  // The video description's parser does not take it for its own, nor the other way round.
  StreamDescription video;
  EXPECT_EQ(parse_stream_description({out, n}, video), DescriptionError::kNotApp);
  // Every byte cut short, and each field broken, is refused with its reason.
  for (size_t cut = 0; cut < n; ++cut)
    EXPECT_NE(parse_audio_description({out, cut}, back), AudioDescriptionError::kNone) << cut;
  uint8_t bad[kMaxAudioDescriptionBytes];
  std::memcpy(bad, out, n);
  bad[24 + 8] = 3;  // not increasing
  EXPECT_EQ(parse_audio_description({bad, n}, back), AudioDescriptionError::kBadChannels);
  std::memcpy(bad, out, n);
  bad[19] = 8;  // a capture of 8 channels cannot hold channel 16
  EXPECT_EQ(parse_audio_description({bad, n}, back), AudioDescriptionError::kBadChannels);
  std::memcpy(bad, out, n);
  bad[17] = 100;  // 100 samples per frame
  EXPECT_EQ(parse_audio_description({bad, n}, back), AudioDescriptionError::kBadFraming);
  std::memcpy(bad, out, n);
  bad[12] = 2;
  EXPECT_EQ(parse_audio_description({bad, n}, back), AudioDescriptionError::kBadVersion);
  std::memcpy(bad, out, n);
  bad[13] = 200;  // more channels than the packet holds
  EXPECT_EQ(parse_audio_description({bad, n}, back), AudioDescriptionError::kBadChannels);
}

TEST(RelayWire, ChannelSelectionsParseToIncreasingMaps) {
  uint8_t map[kMaxAudioChannels];
  uint32_t count = 0;
  std::string error;
  ASSERT_TRUE(parse_channel_selection("0-7,16", 32, map, count, error)) << error;
  ASSERT_EQ(count, 9u);
  EXPECT_EQ(map[7], 7);
  EXPECT_EQ(map[8], 16);
  ASSERT_TRUE(parse_channel_selection("5,1,1-2", 8, map, count, error));
  ASSERT_EQ(count, 3u);
  EXPECT_EQ(map[0], 1);
  EXPECT_EQ(map[2], 5);
  ASSERT_TRUE(parse_channel_selection("all", 4, map, count, error));
  EXPECT_EQ(count, 4u);
  ASSERT_TRUE(parse_channel_selection("none", 4, map, count, error));
  EXPECT_EQ(count, 0u);
  for (const char* bad : {"4", "0-4", "3-1", "x", "1,,2", "-1", "1-"}) {
    error.clear();
    EXPECT_FALSE(parse_channel_selection(bad, 4, map, count, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}
