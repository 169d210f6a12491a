#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "rtp/h264_depacketizer.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtp_packet.h"

namespace syncd::rtp {
namespace {

using Bytes = std::vector<uint8_t>;

std::vector<Bytes> split(const Bytes& annex_b, bool* found = nullptr) {
  std::vector<Bytes> nals;
  const bool ok = split_annex_b(
      annex_b, [&](std::span<const uint8_t> nal) { nals.emplace_back(nal.begin(), nal.end()); });
  if (found) *found = ok;
  return nals;
}

TEST(RtpH264, SplitsAnnexBWithBothStartCodesAndTrailingZeros) {
  const Bytes au = {0, 0, 0, 1,    0x67, 0x42, 0x00, 0x1f,  // SPS (an inner 00 is kept)
                    0, 0, 1, 0x68, 0xce,                    // PPS behind a 3-byte start code
                    0, 0, 0, 0,    1,    0x65, 0x88, 0x84,  // IDR after trailing_zero_8bits
                    0, 0};                                  // trailing zeros at the end
  bool found = false;
  const auto nals = split(au, &found);
  ASSERT_TRUE(found);
  ASSERT_EQ(nals.size(), 3u);
  EXPECT_EQ(nals[0], (Bytes{0x67, 0x42, 0x00, 0x1f}));
  EXPECT_EQ(nals[1], (Bytes{0x68, 0xce}));
  EXPECT_EQ(nals[2], (Bytes{0x65, 0x88, 0x84}));
}

TEST(RtpH264, SplitSkipsEmptyNalsAndRefusesMissingStartCode) {
  bool found = false;
  EXPECT_EQ(split(Bytes{0, 0, 1, 0, 0, 1, 0x41, 0x9a}, &found).size(), 1u);
  EXPECT_TRUE(found);
  EXPECT_TRUE(split(Bytes{0x41, 0, 0, 1, 0x41}, &found).empty());
  EXPECT_FALSE(found);
  EXPECT_TRUE(split(Bytes{0, 1, 0x41}, &found).empty());  // one zero is no start code
  EXPECT_FALSE(found);
  EXPECT_TRUE(split(Bytes{}, &found).empty());
  EXPECT_FALSE(found);
}

struct Packet {
  Bytes bytes;
  RtpPacketView view;
};

std::vector<Packet> packetize(H264Packetizer& packetizer, const Bytes& au, uint16_t first_sequence,
                              uint32_t timestamp) {
  std::vector<Packet> packets;
  EXPECT_EQ(packetizer.begin(au), PacketizeError::kOk);
  const size_t expected_count = packetizer.packet_count();
  RtpHeader header;
  header.payload_type = 96;
  header.ssrc = 0xCAFEBABE;
  header.timestamp = timestamp;
  header.has_abs_send_time = true;
  header.sequence = first_sequence;
  while (packetizer.has_next()) {
    Bytes buffer(rtp_header_size(header) + packetizer.max_payload_bytes());
    const size_t n = packetizer.write_next(header, buffer);
    EXPECT_GT(n, 0u);
    buffer.resize(n);
    packets.push_back({std::move(buffer), {}});
    ++header.sequence;
  }
  EXPECT_EQ(packets.size(), expected_count);
  for (auto& packet : packets) {
    EXPECT_EQ(parse_rtp(packet.bytes, packet.view), RtpParseError::kOk);
  }
  return packets;
}

TEST(RtpH264, SmallNalsGoAsSingleNalPacketsWithMarkerOnLast) {
  const Bytes au = {0, 0, 0, 1, 0x67, 1, 2, 3, 0, 0, 0, 1, 0x68, 4, 0, 0, 1, 0x65, 5, 6, 7};
  H264Packetizer packetizer;
  const auto packets = packetize(packetizer, au, 65535, 1234);
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(Bytes(packets[0].view.payload.begin(), packets[0].view.payload.end()),
            (Bytes{0x67, 1, 2, 3}));
  EXPECT_EQ(Bytes(packets[2].view.payload.begin(), packets[2].view.payload.end()),
            (Bytes{0x65, 5, 6, 7}));
  EXPECT_FALSE(packets[0].view.marker);
  EXPECT_FALSE(packets[1].view.marker);
  EXPECT_TRUE(packets[2].view.marker);
  EXPECT_EQ(packets[1].view.sequence, 0);  // wrapped from 65535
  for (const auto& p : packets) EXPECT_EQ(p.view.timestamp, 1234u);
  EXPECT_EQ(packetizer.counters().single_nal_packets, 3u);
}

// RFC 6184 section 5.8: FU indicator = F|NRI of the NAL header with type 28; FU header = S|E|R
// and the NAL type; the NAL header byte itself is not sent. 3000-byte IDR slice (0x65: NRI 3,
// type 5) at a 1112-byte budget: 2999 payload bytes in 3 fragments of 1110 bytes at most,
// sized evenly: 1000 + 1000 + 999.
TEST(RtpH264, LargeNalGoesAsEvenFuAFragments) {
  Bytes au = {0, 0, 0, 1, 0x65};
  for (int i = 0; i < 2999; ++i) au.push_back(static_cast<uint8_t>(i % 251 + 1));
  H264Packetizer packetizer;
  const auto packets = packetize(packetizer, au, 10, 90000);
  ASSERT_EQ(packets.size(), 3u);
  const size_t sizes[3] = {1002, 1002, 1001};
  const uint8_t fu_headers[3] = {0x85, 0x05, 0x45};
  size_t offset = 5;
  for (size_t i = 0; i < 3; ++i) {
    const auto payload = packets[i].view.payload;
    ASSERT_EQ(payload.size(), sizes[i]);
    EXPECT_EQ(payload[0], 0x7C);  // NRI 3 (0x60) | 28
    EXPECT_EQ(payload[1], fu_headers[i]);
    EXPECT_TRUE(std::equal(payload.begin() + 2, payload.end(), au.begin() + offset));
    offset += payload.size() - 2;
    EXPECT_EQ(packets[i].view.marker, i == 2);
  }
  EXPECT_EQ(offset, au.size());
  EXPECT_EQ(packetizer.counters().fu_a_packets, 3u);
}

TEST(RtpH264, PacketizerRefusesBadNalHeadersWithoutWriting) {
  H264Packetizer packetizer;
  EXPECT_EQ(packetizer.begin(Bytes{0x65, 1, 2}), PacketizeError::kNoStartCode);
  EXPECT_EQ(packetizer.begin(Bytes{0, 0, 1, 0, 0, 0, 1}), PacketizeError::kNoNalUnits);
  EXPECT_EQ(packetizer.begin(Bytes{0, 0, 1, 0xE5, 1}), PacketizeError::kForbiddenBit);
  for (uint8_t type : {0, 24, 28, 30, 31}) {
    EXPECT_EQ(packetizer.begin(Bytes{0, 0, 1, 0x41, 0, 0, 1, static_cast<uint8_t>(0x60 | type), 1}),
              PacketizeError::kReservedNalType)
        << int(type);
    EXPECT_FALSE(packetizer.has_next());
  }
  Bytes many;
  for (size_t i = 0; i <= kMaxNalUnitsPerAccessUnit; ++i) many.insert(many.end(), {0, 0, 1, 0x41});
  EXPECT_EQ(packetizer.begin(many), PacketizeError::kTooManyNalUnits);
  EXPECT_EQ(packetizer.counters().refused[static_cast<size_t>(PacketizeError::kReservedNalType)],
            5u);
}

TEST(RtpH264, WriteNextRefusesSmallBufferWithoutConsuming) {
  H264Packetizer packetizer;
  const Bytes au = {0, 0, 1, 0x41, 1, 2, 3, 4};
  ASSERT_EQ(packetizer.begin(au), PacketizeError::kOk);
  RtpHeader header;
  Bytes small(12 + 4);
  EXPECT_EQ(packetizer.write_next(header, small), 0u);
  EXPECT_TRUE(packetizer.has_next());
  Bytes enough(12 + 5);
  EXPECT_EQ(packetizer.write_next(header, enough), 17u);
  EXPECT_FALSE(packetizer.has_next());
  EXPECT_EQ(packetizer.write_next(header, enough), 0u);
}

// Random NAL units as an encoder makes them: a valid header (F = 0, type 1..23), and a body with
// no 00 00 0x (x <= 3) inside (H.264 7.4.1 emulation prevention) and a nonzero last byte.
Bytes random_nal(std::mt19937& rng, size_t size) {
  Bytes nal(size);
  nal[0] = static_cast<uint8_t>((rng() % 4) << 5 | (1 + rng() % 23));
  for (size_t i = 1; i < size; ++i) {
    // Zeros are frequent on purpose, to exercise the start-code scan.
    uint8_t b = (rng() % 4 == 0) ? 0 : static_cast<uint8_t>(rng());
    if (i >= 2 && nal[i - 1] == 0 && nal[i - 2] == 0 && b <= 3) b = 3;
    nal[i] = b;
  }
  if (nal[size - 1] == 0) nal[size - 1] = 0x80;
  return nal;
}

// An access unit of total_nal_bytes NAL bytes in random NAL sizes, each behind 00 00 00 01: the
// form the depacketizer writes, so a round trip is byte-exact.
Bytes random_access_unit(std::mt19937& rng, size_t total_nal_bytes) {
  Bytes au;
  au.reserve(total_nal_bytes + 1024);
  size_t left = total_nal_bytes;
  while (left > 0) {
    // Sizes from 1 byte to 3x the MTU and, now and then, up to 300 KB.
    size_t size = rng() % 8 == 0 ? 1 + rng() % 300000 : 1 + rng() % 3500;
    size = std::min(size, left);
    au.insert(au.end(), {0, 0, 0, 1});
    const Bytes nal = random_nal(rng, size);
    au.insert(au.end(), nal.begin(), nal.end());
    left -= size;
  }
  return au;
}

void expect_round_trip(const Bytes& au, size_t max_payload, uint16_t first_sequence) {
  H264Packetizer packetizer(PacketizerConfig{max_payload});
  const auto packets = packetize(packetizer, au, first_sequence, 0xFFFFFF00);
  ASSERT_FALSE(packets.empty());
  for (size_t i = 0; i < packets.size(); ++i) {
    ASSERT_LE(packets[i].view.payload.size(), max_payload);
    ASSERT_EQ(packets[i].view.marker, i + 1 == packets.size());
  }
  Bytes out(au.size());
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  for (const auto& packet : packets) {
    ASSERT_EQ(depacketizer.push(packet.view), DepacketizeError::kOk);
  }
  ASSERT_EQ(depacketizer.finish(), DepacketizeError::kOk);
  ASSERT_EQ(depacketizer.access_unit().size(), au.size());
  ASSERT_TRUE(std::equal(au.begin(), au.end(), depacketizer.access_unit().begin()));
  // One byte less of capacity: refused as oversize, never written past.
  Bytes short_out(au.size() - 1);
  depacketizer.begin(short_out);
  DepacketizeError last = DepacketizeError::kOk;
  for (const auto& packet : packets) {
    last = depacketizer.push(packet.view);
    if (last != DepacketizeError::kOk) break;
  }
  EXPECT_EQ(last, DepacketizeError::kOversize);
}

TEST(RtpH264, RoundTripRandomAccessUnitsOneByteToTwoMegabytes) {
  std::mt19937 rng(20261204);
  std::vector<size_t> sizes = {1, 2, 3, 1111, 1112, 1113, 1114, 2 * 1024 * 1024};
  for (int i = 0; i < 40; ++i) {
    // Log-uniform between 1 byte and 2 MB.
    const double exponent = std::uniform_real_distribution<double>(0, 21)(rng);
    sizes.push_back(std::max<size_t>(1, static_cast<size_t>(std::exp2(exponent))));
  }
  for (size_t size : sizes) {
    SCOPED_TRACE(size);
    const Bytes au = random_access_unit(rng, size);
    expect_round_trip(au, kDefaultMaxPayloadBytes, static_cast<uint16_t>(rng()));
  }
}

TEST(RtpH264, RoundTripAtSmallAndLargePayloadBudgets) {
  std::mt19937 rng(99);
  for (size_t max_payload : {size_t{3}, size_t{4}, size_t{17}, size_t{500}, size_t{1400}}) {
    SCOPED_TRACE(max_payload);
    for (int i = 0; i < 5; ++i) {
      expect_round_trip(random_access_unit(rng, 1 + rng() % 20000), max_payload, 65530);
    }
  }
}

TEST(RtpH264, ThreeByteStartCodesComeBackAsFourByteOnes) {
  const Bytes au = {0, 0, 1, 0x67, 9, 0, 0, 1, 0x65, 8, 7};
  H264Packetizer packetizer;
  const auto packets = packetize(packetizer, au, 1, 1);
  Bytes out(64);
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  for (const auto& p : packets) ASSERT_EQ(depacketizer.push(p.view), DepacketizeError::kOk);
  ASSERT_EQ(depacketizer.finish(), DepacketizeError::kOk);
  const Bytes expected = {0, 0, 0, 1, 0x67, 9, 0, 0, 0, 1, 0x65, 8, 7};
  EXPECT_EQ(Bytes(depacketizer.access_unit().begin(), depacketizer.access_unit().end()), expected);
}

// RFC 6184 section 5.7.1, figure 7: a STAP-A with two NAL units (SPS and PPS here).
TEST(RtpH264, DepacketizesStapA) {
  const Bytes stap = {0x78,                                // F 0, NRI 3, type 24
                      0x00, 0x04, 0x67, 0x42, 0x00, 0x1f,  // size 4, SPS
                      0x00, 0x02, 0x68, 0xce};             // size 2, PPS
  Bytes out(64);
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  ASSERT_EQ(depacketizer.push(stap, 1, 100, false), DepacketizeError::kOk);
  ASSERT_EQ(depacketizer.push(Bytes{0x65, 0xAA}, 2, 100, true), DepacketizeError::kOk);
  ASSERT_EQ(depacketizer.finish(), DepacketizeError::kOk);
  const Bytes expected = {0, 0, 0,    1,    0x67, 0x42, 0x00, 0x1f, 0,    0,
                          0, 1, 0x68, 0xce, 0,    0,    0,    1,    0x65, 0xAA};
  EXPECT_EQ(Bytes(depacketizer.access_unit().begin(), depacketizer.access_unit().end()), expected);
  EXPECT_EQ(depacketizer.counters().nal_units, 3u);
}

// Every prefix of a STAP-A: valid exactly at the unit boundaries, refused elsewhere.
TEST(RtpH264, StapATruncatedAtEveryOffset) {
  const Bytes stap = {0x78, 0x00, 0x04, 0x67, 0x42, 0x00, 0x1f, 0x00, 0x02, 0x68, 0xce};
  for (size_t n = 0; n <= stap.size(); ++n) {
    Bytes prefix(stap.begin(), stap.begin() + static_cast<long>(n));
    Bytes out(64);
    H264Depacketizer depacketizer;
    depacketizer.begin(out);
    const DepacketizeError error = depacketizer.push(prefix, 1, 1, true);
    if (n == 7 || n == 11) {
      EXPECT_EQ(error, DepacketizeError::kOk) << n;
    } else {
      EXPECT_NE(error, DepacketizeError::kOk) << n;
      EXPECT_EQ(depacketizer.access_unit().size(), 0u) << n;  // no partial output
    }
  }
}

// Every prefix of every packet of a fragmented AU, each pushed in place of the full packet:
// refused, or accepted and then the AU's bytes differ or finish() refuses; never a crash, and the
// output never exceeds its capacity.
TEST(RtpH264, TruncatedPacketsNeverOverrunTheOutput) {
  std::mt19937 rng(4);
  const Bytes au = random_access_unit(rng, 5000);
  H264Packetizer packetizer(PacketizerConfig{600});
  const auto packets = packetize(packetizer, au, 100, 5);
  for (size_t victim = 0; victim < packets.size(); ++victim) {
    const auto& full = packets[victim].view.payload;
    for (size_t n = 0; n < full.size(); ++n) {
      Bytes out(au.size());
      H264Depacketizer depacketizer;
      depacketizer.begin(out);
      bool refused = false;
      for (size_t i = 0; i < packets.size() && !refused; ++i) {
        const auto& v = packets[i].view;
        const auto payload = i == victim ? full.first(n) : v.payload;
        refused =
            depacketizer.push(payload, v.sequence, v.timestamp, v.marker) != DepacketizeError::kOk;
      }
      if (!refused) refused = depacketizer.finish() != DepacketizeError::kOk;
      const auto got = depacketizer.access_unit();
      EXPECT_LE(got.size(), out.size());
      if (!refused) {
        EXPECT_FALSE(std::equal(au.begin(), au.end(), got.begin(), got.end()));
      }
    }
  }
}

struct Step {
  Bytes payload;
  uint16_t sequence;
  uint32_t timestamp;
  bool marker;
};

DepacketizeError run(const std::vector<Step>& steps, size_t capacity = 1024) {
  Bytes out(capacity);
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  for (const auto& s : steps) {
    const auto error = depacketizer.push(s.payload, s.sequence, s.timestamp, s.marker);
    if (error != DepacketizeError::kOk) return error;
  }
  return depacketizer.finish();
}

TEST(RtpH264, DepacketizerRefusals) {
  using E = DepacketizeError;
  const Bytes fu_start = {0x7C, 0x85, 1, 2};
  const Bytes fu_middle = {0x7C, 0x05, 3};
  const Bytes fu_end = {0x7C, 0x45, 4};
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {fu_middle, 2, 9, false}, {fu_end, 3, 9, true}}), E::kOk);
  EXPECT_EQ(run({{fu_middle, 1, 9, false}, {fu_end, 2, 9, true}}), E::kFuWithoutStart);
  EXPECT_EQ(run({{fu_end, 1, 9, true}}), E::kFuWithoutStart);
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {fu_end, 3, 9, true}}), E::kSequenceGap);
  EXPECT_EQ(run({{fu_start, 65535, 9, false}, {fu_end, 0, 9, true}}), E::kOk);  // wrap
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {fu_end, 2, 10, true}}), E::kTimestampMismatch);
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {Bytes{0x7C, 0x41, 4}, 2, 9, true}}),
            E::kFuTypeMismatch);  // type 5 then type 1
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {Bytes{0x5C, 0x45, 4}, 2, 9, true}}),
            E::kFuTypeMismatch);  // NRI 3 then NRI 2
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {fu_start, 2, 9, true}}), E::kFuStartInsideFu);
  EXPECT_EQ(run({{fu_start, 1, 9, false}, {Bytes{0x41, 1}, 2, 9, true}}), E::kNalInsideFu);
  EXPECT_EQ(run({{fu_start, 1, 9, false}}), E::kIncompleteFu);
  EXPECT_EQ(run({{Bytes{0x7C, 0xC5, 1}, 1, 9, true}}), E::kFuStartAndEnd);
  EXPECT_EQ(run({{Bytes{0x7C, 0x85}, 1, 9, true}}), E::kFuTooShort);
  EXPECT_EQ(run({{Bytes{0x7C, 0x98, 1}, 1, 9, true}}), E::kFuNestedType);  // FU of a STAP-A
  EXPECT_EQ(run({{Bytes{0x60}, 1, 9, true}}), E::kReservedNalType);        // type 0
  EXPECT_EQ(run({{Bytes{0x7E, 1}, 1, 9, true}}), E::kReservedNalType);     // type 30
  EXPECT_EQ(run({{Bytes{0x7F, 1}, 1, 9, true}}), E::kReservedNalType);     // type 31
  EXPECT_EQ(run({{Bytes{0x79, 0, 1, 0x41}, 1, 9, true}}), E::kUnsupportedNalType);  // STAP-B
  EXPECT_EQ(run({{Bytes{0x7D, 0x85, 1}, 1, 9, true}}), E::kUnsupportedNalType);     // FU-B
  EXPECT_EQ(run({{Bytes{0xE5, 1}, 1, 9, true}}), E::kForbiddenBit);
  EXPECT_EQ(run({{Bytes{}, 1, 9, true}}), E::kEmptyPayload);
  EXPECT_EQ(run({{Bytes{0x41, 1}, 1, 9, true}, {Bytes{0x41, 2}, 2, 9, true}}), E::kAfterMarker);
  EXPECT_EQ(run({{Bytes{0x78, 0, 0}, 1, 9, true}}), E::kStapEmptyNal);
  EXPECT_EQ(run({{Bytes{0x78, 0, 1, 0x7C}, 1, 9, true}}), E::kStapNestedType);
  EXPECT_EQ(run({{Bytes{0x78, 0, 2, 0x41}, 1, 9, true}}), E::kStapTruncated);
  EXPECT_EQ(run({{Bytes{0x78, 0, 1, 0x41, 0}, 1, 9, true}}), E::kStapTruncated);
  EXPECT_EQ(run({{Bytes{0x41, 1, 2, 3}, 1, 9, true}}, 7), E::kOversize);  // 4 + 4 > 7
  EXPECT_EQ(run({{Bytes{0x41, 1, 2, 3}, 1, 9, true}}, 8), E::kOk);
  EXPECT_EQ(run({}), E::kNoNalUnits);
}

TEST(RtpH264, FailedAccessUnitStaysFailedUntilBegin) {
  Bytes out(64);
  H264Depacketizer depacketizer;
  EXPECT_EQ(depacketizer.push(Bytes{0x41}, 1, 1, true), DepacketizeError::kNotStarted);
  depacketizer.begin(out);
  EXPECT_EQ(depacketizer.push(Bytes{0x7C, 0x05, 1}, 1, 1, false),
            DepacketizeError::kFuWithoutStart);
  EXPECT_TRUE(depacketizer.failed());
  EXPECT_EQ(depacketizer.push(Bytes{0x41, 1}, 2, 1, true), DepacketizeError::kAlreadyFailed);
  EXPECT_EQ(depacketizer.finish(), DepacketizeError::kAlreadyFailed);
  depacketizer.begin(out);
  EXPECT_EQ(depacketizer.push(Bytes{0x41, 1}, 7, 1, true), DepacketizeError::kOk);
  EXPECT_EQ(depacketizer.finish(), DepacketizeError::kOk);
  const auto& c = depacketizer.counters();
  EXPECT_EQ(c.refused[static_cast<size_t>(DepacketizeError::kFuWithoutStart)], 1u);
  EXPECT_EQ(c.refused[static_cast<size_t>(DepacketizeError::kAlreadyFailed)], 2u);
  EXPECT_EQ(c.access_units, 1u);
}

}  // namespace
}  // namespace syncd::rtp
