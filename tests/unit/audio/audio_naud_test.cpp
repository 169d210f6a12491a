// NAUD packet encoding and parsing (docs/protocol.md, "Audio: NAUD packets").
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "audio/naud.h"

namespace syncd::audio {
namespace {

TEST(Naud, HeaderLayoutIsTheDocumentedOne) {
  NaudHeader h;
  h.channels = 32;
  h.rate = 48000;
  h.flags = kNaudFlagDiscontinuity;
  h.frames = 240;
  h.first_frame = 0x0102030405060708ull;
  h.dropped_frames = 7;
  h.gap_frames = 9;
  h.timestamp_ns = 123456789;
  h.sequence = 42;
  h.xruns = 3;
  uint8_t b[kNaudHeaderBytes];
  encode_naud_header(h, b);
  EXPECT_EQ(std::memcmp(b, "NAUD", 4), 0);
  EXPECT_EQ(b[4], 1);  // version
  EXPECT_EQ(b[6], 64);
  EXPECT_EQ(b[8], 32);
  EXPECT_EQ(b[10], 1);  // f32le
  EXPECT_EQ(b[12] | (b[13] << 8) | (b[14] << 16), 48000);
  EXPECT_EQ(b[16], 0);  // interleaved
  EXPECT_EQ(b[18], 1);  // discontinuity flag
  EXPECT_EQ(b[20], 240);
  EXPECT_EQ(b[24], 0x08);  // little-endian first_frame
  EXPECT_EQ(b[31], 0x01);
  EXPECT_EQ(b[32], 7);
  EXPECT_EQ(b[40], 9);
  EXPECT_EQ(b[56], 42);
  EXPECT_EQ(b[60], 3);
}

TEST(Naud, PacketRoundTripsFromTwoRingPieces) {
  constexpr uint32_t kChannels = 2;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};  // 3 frames
  std::vector<float> c = {7, 8};              // 1 frame after the wrap
  RingSpan s;
  s.part[0] = a.data();
  s.frames[0] = 3;
  s.part[1] = c.data();
  s.frames[1] = 1;
  NaudHeader h;
  h.channels = kChannels;
  h.rate = 44100;
  h.frames = 4;
  h.first_frame = 99;
  std::vector<uint8_t> out(kNaudHeaderBytes + h.payload_bytes());
  ASSERT_EQ(encode_naud_packet(h, s, out), out.size());
  NaudHeader back;
  ASSERT_EQ(parse_naud_packet(out, back), NaudError::kNone);
  EXPECT_EQ(back.frames, 4u);
  EXPECT_EQ(back.first_frame, 99u);
  EXPECT_EQ(back.rate, 44100u);
  float samples[8];
  std::memcpy(samples, out.data() + kNaudHeaderBytes, sizeof samples);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(samples[i], float(i + 1));
}

TEST(Naud, EncodeRefusesShortBufferOrMismatchedCount) {
  std::vector<float> a(4);
  RingSpan s;
  s.part[0] = a.data();
  s.frames[0] = 2;
  NaudHeader h;
  h.channels = 2;
  h.frames = 2;
  std::vector<uint8_t> small(kNaudHeaderBytes + 8);
  EXPECT_EQ(encode_naud_packet(h, s, small), 0u);
  h.frames = 3;
  std::vector<uint8_t> big(1024);
  EXPECT_EQ(encode_naud_packet(h, s, big), 0u);
}

TEST(Naud, ParseRejectsBadPackets) {
  NaudHeader h;
  h.channels = 1;
  h.frames = 1;
  std::vector<uint8_t> p(kNaudHeaderBytes + 4);
  encode_naud_header(h, p.data());
  NaudHeader out;
  EXPECT_EQ(parse_naud_packet(p, out), NaudError::kNone);
  EXPECT_EQ(parse_naud_packet(std::span(p).first(10), out), NaudError::kTooShort);
  EXPECT_EQ(parse_naud_packet(std::span(p).first(p.size() - 1), out), NaudError::kSizeMismatch);
  auto bad = p;
  bad[0] = 'X';
  EXPECT_EQ(parse_naud_packet(bad, out), NaudError::kBadMagic);
  bad = p;
  bad[4] = 2;
  EXPECT_EQ(parse_naud_packet(bad, out), NaudError::kBadVersion);
  bad = p;
  bad[8] = 0;
  EXPECT_EQ(parse_naud_packet(bad, out), NaudError::kBadChannels);
  bad = p;
  bad[16] = 1;
  EXPECT_EQ(parse_naud_packet(bad, out), NaudError::kBadLayout);
}

}  // namespace
}  // namespace syncd::audio
