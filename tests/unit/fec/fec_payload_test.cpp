// The FEC payload header and the decoder's refusals: every field that lies is refused with its
// reason and counted, truncation at every byte offset, and the extension zeroing.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec/payload.h"
#include "fec_test_packets.h"

namespace syncd::fec {
namespace {

using testing::encode_block;
using testing::kSsrc;
using testing::make_rtp;
using testing::RecordingSink;
using testing::test_decoder_config;

TEST(FecPayload, HeaderRoundTripAndByteLayout) {
  RepairHeader header{48, 16, 15, 0xFFFE, 1502, 0xA1B2C3D4};
  std::vector<uint8_t> payload(kHeaderBytes + 1502);
  write_repair_header(header, payload.data());
  const uint8_t expected[kHeaderBytes] = {0x10, 48,   16,   15,   0xFF, 0xFE,
                                          0x05, 0xDE, 0xA1, 0xB2, 0xC3, 0xD4};
  EXPECT_TRUE(std::equal(expected, expected + kHeaderBytes, payload.begin()));
  RepairHeader parsed;
  ASSERT_EQ(parse_repair_header(payload, &parsed), Refusal::kNone);
  EXPECT_EQ(parsed.k, 48);
  EXPECT_EQ(parsed.m, 16);
  EXPECT_EQ(parsed.repair_index, 15);
  EXPECT_EQ(parsed.base_sequence, 0xFFFE);
  EXPECT_EQ(parsed.symbol_bytes, 1502);
  EXPECT_EQ(parsed.media_ssrc, 0xA1B2C3D4u);
}

// Each field lie, alone, gets its own reason.
TEST(FecPayload, HeaderLiesAreRefusedWithTheirReason) {
  RepairHeader good{10, 4, 0, 500, 100, kSsrc};
  auto make = [&](RepairHeader h, size_t symbol_bytes) {
    std::vector<uint8_t> p(kHeaderBytes + symbol_bytes);
    write_repair_header(h, p.data());
    return p;
  };
  RepairHeader h;
  EXPECT_EQ(parse_repair_header(make(good, 100), &h), Refusal::kNone);
  auto version = make(good, 100);
  version[0] = 0x20;
  EXPECT_EQ(parse_repair_header(version, &h), Refusal::kRepairBadVersion);
  version[0] = 0x11;  // reserved bits
  EXPECT_EQ(parse_repair_header(version, &h), Refusal::kRepairBadVersion);
  for (auto [k, m] : {std::pair{0, 4}, {49, 4}, {10, 0}, {10, 17}, {255, 255}}) {
    RepairHeader bad = good;
    bad.k = static_cast<uint8_t>(k);
    bad.m = static_cast<uint8_t>(m);
    EXPECT_EQ(parse_repair_header(make(bad, 100), &h), Refusal::kRepairBadShape) << k << "," << m;
  }
  RepairHeader index = good;
  index.repair_index = 4;
  EXPECT_EQ(parse_repair_header(make(index, 100), &h), Refusal::kRepairBadIndex);
  for (uint16_t symbol : {0, 13, 1503, 65535}) {
    RepairHeader bad = good;
    bad.symbol_bytes = symbol;
    EXPECT_EQ(parse_repair_header(make(bad, 100), &h), Refusal::kRepairBadSymbolLength) << symbol;
  }
  // The payload is exactly header + symbol length: one byte more or less is refused.
  EXPECT_EQ(parse_repair_header(make(good, 101), &h), Refusal::kRepairLengthMismatch);
  EXPECT_EQ(parse_repair_header(make(good, 99), &h), Refusal::kRepairLengthMismatch);
}

TEST(FecPayload, TruncationAtEveryOffsetIsRefused) {
  std::mt19937 rng(30);
  const auto block = encode_block(40, 6, 2, rng);
  const auto& repair = block.repairs[0];
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  for (size_t size = 0; size < repair.size(); ++size) {
    const Refusal why = decoder.add_repair({repair.data(), size}, 0, sink);
    EXPECT_EQ(why, size < kHeaderBytes ? Refusal::kRepairTooShort : Refusal::kRepairLengthMismatch)
        << size;
  }
  EXPECT_EQ(decoder.counters().refused_total(), repair.size());
  EXPECT_EQ(decoder.blocks_in_flight(), 0u);
  // Source packets truncated below an RTP header.
  for (size_t size = 0; size < kMinPacketBytes; ++size) {
    EXPECT_EQ(decoder.add_source(40, {block.sources[0].data(), size}, 0, sink),
              Refusal::kSourceTooShort);
  }
  EXPECT_TRUE(sink.recovered.empty());
}

TEST(FecPayload, BlockLiesAreRefusedAndCounted) {
  std::mt19937 rng(31);
  const auto block = encode_block(1000, 8, 3, rng, 200, 400);
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  ASSERT_EQ(decoder.add_repair(block.repairs[0], 0, sink), Refusal::kNone);
  // The same repair again.
  EXPECT_EQ(decoder.add_repair(block.repairs[0], 0, sink), Refusal::kRepairDuplicate);
  // Another repair of the same base that disagrees on k, m or the symbol length.
  for (int field : {1, 2}) {
    auto lie = block.repairs[1];
    lie[field] = static_cast<uint8_t>(lie[field] - 1);
    EXPECT_EQ(decoder.add_repair(lie, 0, sink), Refusal::kRepairInconsistent) << field;
  }
  {
    RepairHeader h;
    ASSERT_EQ(parse_repair_header(block.repairs[1], &h), Refusal::kNone);
    h.symbol_bytes = static_cast<uint16_t>(h.symbol_bytes - 1);
    std::vector<uint8_t> lie(kHeaderBytes + h.symbol_bytes);
    write_repair_header(h, lie.data());
    EXPECT_EQ(decoder.add_repair(lie, 0, sink), Refusal::kRepairInconsistent);
  }
  // A block starting inside this one.
  {
    RepairHeader h;
    ASSERT_EQ(parse_repair_header(block.repairs[1], &h), Refusal::kNone);
    for (int shift : {1, 7, -1, -5}) {
      RepairHeader other = h;
      other.base_sequence = static_cast<uint16_t>(h.base_sequence + shift);
      other.k = 6;
      std::vector<uint8_t> lie(kHeaderBytes + h.symbol_bytes);
      write_repair_header(other, lie.data());
      EXPECT_EQ(decoder.add_repair(lie, 0, sink), Refusal::kRepairOverlap) << shift;
    }
    // Adjacent blocks do not overlap.
    RepairHeader next = h;
    next.base_sequence = static_cast<uint16_t>(h.base_sequence + 8);
    std::vector<uint8_t> adjacent(kHeaderBytes + h.symbol_bytes);
    write_repair_header(next, adjacent.data());
    EXPECT_EQ(decoder.add_repair(adjacent, 0, sink), Refusal::kNone);
  }
  // Another SSRC.
  {
    auto foreign = block.repairs[2];
    foreign[11] ^= 1;
    EXPECT_EQ(decoder.add_repair(foreign, 0, sink), Refusal::kRepairForeignSsrc);
    auto packet = block.sources[0];
    packet[11] ^= 1;
    EXPECT_EQ(decoder.add_source(1000, packet, 0, sink), Refusal::kSourceForeignSsrc);
  }
  // A source whose sequence is not the one given; not RTP; too long.
  EXPECT_EQ(decoder.add_source(999, block.sources[0], 0, sink), Refusal::kSourceSequenceMismatch);
  auto not_rtp = block.sources[0];
  not_rtp[0] = 0;
  EXPECT_EQ(decoder.add_source(1000, not_rtp, 0, sink), Refusal::kSourceNotRtp);
  std::vector<uint8_t> too_long(kMaxPacketBytes + 1);
  EXPECT_EQ(decoder.add_source(1000, too_long, 0, sink), Refusal::kSourceTooLong);
  const auto& c = decoder.counters();
  EXPECT_EQ(c.refused[size_t(Refusal::kRepairDuplicate)], 1u);
  EXPECT_EQ(c.refused[size_t(Refusal::kRepairInconsistent)], 3u);
  EXPECT_EQ(c.refused[size_t(Refusal::kRepairOverlap)], 4u);
  EXPECT_EQ(c.refused_total(), 13u);
  EXPECT_TRUE(sink.recovered.empty());
}

// A symbol length shorter than one of the block's own sources is a lie found once the source is
// there; the block is dropped, nothing emitted.
TEST(FecPayload, SymbolShorterThanASourceIsRefused) {
  std::mt19937 rng(32);
  const auto block = encode_block(50, 4, 2, rng, 100, 100);
  auto longer = make_rtp(50, 300, rng);  // same sequence, longer than the symbol (102)
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  decoder.add_source(50, longer, 0, sink);
  decoder.add_source(51, block.sources[1], 0, sink);
  decoder.add_source(52, block.sources[2], 0, sink);
  EXPECT_EQ(decoder.add_repair(block.repairs[0], 0, sink), Refusal::kRepairSymbolTooShort);
  EXPECT_TRUE(sink.recovered.empty());
  EXPECT_EQ(decoder.counters().refused[size_t(Refusal::kRepairSymbolTooShort)], 1u);
}

// A repair symbol whose bytes were changed rebuilds bytes that contradict the block (length
// prefix, zero padding, sequence or SSRC): refused, never emitted.
TEST(FecPayload, DecodedBytesThatContradictTheBlockAreRefused) {
  std::mt19937 rng(33);
  const auto block = encode_block(60, 5, 1, rng, 100, 1000);
  size_t shortest = 0;
  for (size_t i = 1; i < 5; ++i) {
    if (block.sources[i].size() < block.sources[shortest].size()) shortest = i;
  }
  // Byte offsets in the symbol: the length prefix, the sequence, the SSRC, the padding.
  const size_t symbol_bytes = block.repairs[0].size() - kHeaderBytes;
  for (size_t offset :
       {size_t{0}, size_t{2 + 2}, size_t{2 + 3}, size_t{2 + 8}, size_t{2 + 11}, symbol_bytes - 1}) {
    if (offset == symbol_bytes - 1 && block.sources[shortest].size() + 2 == symbol_bytes) continue;
    Decoder decoder(test_decoder_config());
    RecordingSink sink;
    for (size_t i = 0; i < 5; ++i) {
      if (i != shortest)
        decoder.add_source(static_cast<uint16_t>(60 + i), block.sources[i], 0, sink);
    }
    auto bad = block.repairs[0];
    bad[kHeaderBytes + offset] ^= 0x40;
    decoder.add_repair(bad, 0, sink);
    EXPECT_TRUE(sink.recovered.empty()) << offset;
    EXPECT_EQ(decoder.counters().refused[size_t(Refusal::kRecoveredInvalid)], 1u) << offset;
  }
}

TEST(FecPayload, RepairsOutsideTheWindowAreRefused) {
  std::mt19937 rng(34);
  DecoderConfig config = test_decoder_config();
  config.source_ring_packets = 512;
  Decoder decoder(config);
  RecordingSink sink;
  decoder.add_source(10000, make_rtp(10000, 100, rng), 0, sink);
  auto repair_at = [&](uint16_t base) {
    RepairHeader h{4, 1, 0, base, 102, kSsrc};
    std::vector<uint8_t> p(kHeaderBytes + 102);
    write_repair_header(h, p.data());
    return p;
  };
  // Behind by more than 512 - 96 = 416 packets, or ahead by more than 256.
  EXPECT_EQ(decoder.add_repair(repair_at(10000 - 416 - 4), 0, sink), Refusal::kRepairOutOfWindow);
  EXPECT_EQ(decoder.add_repair(repair_at(10000 - 416 - 3), 0, sink), Refusal::kNone);
  EXPECT_EQ(decoder.add_repair(repair_at(10000 + 257), 0, sink), Refusal::kRepairOutOfWindow);
  EXPECT_EQ(decoder.add_repair(repair_at(10000 + 256), 0, sink), Refusal::kNone);
}

TEST(FecPayload, ZeroExtensionTouchesOnlyItsId) {
  std::mt19937 rng(35);
  // Two elements: id 3 (3 bytes) and id 5 (2 bytes), then a padding byte: 2 words.
  std::vector<uint8_t> p = make_rtp(1, 40, rng);
  p[0] = 0x90;
  const uint8_t ext[] = {0xBE, 0xDE, 0x00, 0x02, 0x32, 0xAA, 0xBB, 0xCC, 0x51, 0xDD, 0xEE, 0x00};
  std::copy(std::begin(ext), std::end(ext), p.begin() + 12);
  auto zeroed = p;
  ASSERT_TRUE(zero_extension(zeroed, 3));
  auto expected = p;
  expected[17] = expected[18] = expected[19] = 0;
  EXPECT_EQ(zeroed, expected);
  zeroed = p;
  ASSERT_TRUE(zero_extension(zeroed, 5));
  expected = p;
  expected[21] = expected[22] = 0;
  EXPECT_EQ(zeroed, expected);
  // No such id, id 0: unchanged.
  zeroed = p;
  EXPECT_TRUE(zero_extension(zeroed, 7));
  EXPECT_TRUE(zero_extension(zeroed, 0));
  EXPECT_EQ(zeroed, p);
  // Truncated at every offset through the extension block: false or unchanged, never a write
  // out of the span.
  for (size_t size = 0; size < 24; ++size) {
    std::vector<uint8_t> cut(p.begin(), p.begin() + static_cast<long>(size));
    const auto before = cut;
    const bool ok = zero_extension(cut, 3);
    if (!ok) {
      EXPECT_EQ(cut, before) << size;
    }
    EXPECT_FALSE(ok && size < 24) << size;
  }
  // An element that claims more bytes than the block holds: refused, nothing changed.
  auto overrun = p;
  overrun[20] = 0x5F;  // id 5, 16 bytes
  auto before = overrun;
  EXPECT_FALSE(zero_extension(overrun, 3));
  EXPECT_EQ(overrun, before);
}

TEST(FecPayload, RefusalNamesAreDistinct) {
  std::set<std::string> names;
  for (size_t r = 0; r < size_t(Refusal::kCount); ++r) {
    names.insert(refusal_name(static_cast<Refusal>(r)));
  }
  EXPECT_EQ(names.size(), size_t(Refusal::kCount));
  EXPECT_EQ(names.count("unknown"), 0u);
}

}  // namespace
}  // namespace syncd::fec

namespace syncd::fec {
namespace {

// GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), written out here so the repair
// bytes are checked against docs/wan.md's formula, not against ISA-L itself.
uint8_t gf_multiply(uint8_t a, uint8_t b) {
  uint8_t product = 0;
  while (b) {
    if (b & 1) product ^= a;
    a = static_cast<uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1D : 0));
    b >>= 1;
  }
  return product;
}
uint8_t gf_inverse(uint8_t a) {
  for (int b = 1; b < 256; ++b) {
    if (gf_multiply(a, static_cast<uint8_t>(b)) == 1) return static_cast<uint8_t>(b);
  }
  return 0;
}

// repair_r = sum_j C[r][j] symbol_j, C[r][j] = 1 / ((k + r) XOR j); symbols are the 2-byte
// length, the packet, zeros up to L = 2 + the longest packet.
TEST(FecPayload, RepairBytesFollowTheDocumentedFormula) {
  std::mt19937 rng(36);
  const uint8_t k = 3, m = 2;
  const uint16_t base = 65535;
  EncoderConfig config;
  config.media_ssrc = kSsrc;
  config.initial_shape = {k, m};
  config.volatile_extension_id = 0;
  Encoder encoder(config);
  std::vector<std::vector<uint8_t>> packets;
  for (uint8_t i = 0; i < k; ++i) {
    packets.push_back(make_rtp(static_cast<uint16_t>(base + i), 12 + 7 * i, rng));
    encoder.add_source(static_cast<uint16_t>(base + i), packets.back());
  }
  const size_t symbol_bytes = 2 + 12 + 14;
  ASSERT_EQ(encoder.ready_payload_bytes(), kHeaderBytes + symbol_bytes);
  std::vector<std::vector<uint8_t>> repairs(m, std::vector<uint8_t>(kHeaderBytes + symbol_bytes));
  uint8_t* out[] = {repairs[0].data(), repairs[1].data()};
  ASSERT_EQ(encoder.emit_repairs(out), m);
  for (uint8_t r = 0; r < m; ++r) {
    const uint8_t header[kHeaderBytes] = {
        0x10, k, m, r, 0xFF, 0xFF, 0, uint8_t(symbol_bytes), 0x5E, 0xED, 0x12, 0x34};
    EXPECT_TRUE(std::equal(header, header + kHeaderBytes, repairs[r].begin())) << int(r);
    for (size_t at = 0; at < symbol_bytes; ++at) {
      uint8_t expected = 0;
      for (uint8_t j = 0; j < k; ++j) {
        const auto& p = packets[j];
        uint8_t symbol_byte = 0;
        if (at == 0)
          symbol_byte = static_cast<uint8_t>(p.size() >> 8);
        else if (at == 1)
          symbol_byte = static_cast<uint8_t>(p.size());
        else if (at - 2 < p.size())
          symbol_byte = p[at - 2];
        expected ^= gf_multiply(gf_inverse(static_cast<uint8_t>((k + r) ^ j)), symbol_byte);
      }
      ASSERT_EQ(repairs[r][kHeaderBytes + at], expected) << "repair " << int(r) << " byte " << at;
    }
  }
}

}  // namespace
}  // namespace syncd::fec
