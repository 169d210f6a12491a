// Encoder + decoder of src/fec: every loss pattern up to m recovers byte for byte, the 16-bit
// sequence wraps inside a block, the volatile extension, frame-end closing, ageing, and a seeded
// random stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "fec/decoder.h"
#include "fec/encoder.h"
#include "fec_test_packets.h"

namespace syncd::fec {
namespace {

using testing::encode_block;
using testing::kSsrc;
using testing::make_rtp;
using testing::RecordingSink;
using testing::test_decoder_config;

// Feeds the survivors of one block (lost[i]: index i of k + m is lost) in a seeded shuffled
// order and checks that every lost source comes out, byte for byte, and nothing comes out twice
// or after it arrived. (A source not lost may come out too when its block's repairs arrive
// before it does: reordering.)
void check_pattern(const testing::EncodedBlock& block, uint16_t base, const std::vector<bool>& lost,
                   std::mt19937& rng) {
  const size_t k = block.sources.size();
  const size_t n = k + block.repairs.size();
  // One decoder, reset per pattern: constructing one per pattern (1.6 MB) dominates under ASan.
  static Decoder decoder(test_decoder_config());
  decoder.reset(kSsrc);
  const uint64_t refused_before = decoder.counters().refused_total();
  RecordingSink sink;
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (!lost[i]) order.push_back(i);
  }
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<bool> seen(k, false);  // arrived or recovered
  size_t reported = 0;
  auto check_new_recoveries = [&] {
    for (; reported < sink.recovered.size(); ++reported) {
      const auto& r = sink.recovered[reported];
      const size_t index = static_cast<uint16_t>(r.sequence - base);
      ASSERT_LT(index, k) << "sequence " << r.sequence << " outside the block";
      ASSERT_FALSE(seen[index]) << "sequence " << r.sequence << " reported twice or after arrival";
      ASSERT_EQ(r.packet, block.sources[index]) << "sequence " << r.sequence;
      seen[index] = true;
    }
  };
  for (size_t i : order) {
    if (i < k) {
      ASSERT_EQ(decoder.add_source(static_cast<uint16_t>(base + i), block.sources[i], 1000, sink),
                Refusal::kNone);
      seen[i] = true;
    } else {
      ASSERT_EQ(decoder.add_repair(block.repairs[i - k], 1000, sink), Refusal::kNone);
    }
    check_new_recoveries();
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (size_t i = 0; i < k; ++i) ASSERT_TRUE(seen[i]) << "index " << i << " never recovered";
  EXPECT_EQ(decoder.counters().refused_total(), refused_before);
}

// Every pattern of up to m losses among the k + m packets of a block, for several shapes.
TEST(FecCodec, RecoversEveryPatternOfUpToMLosses) {
  const std::pair<uint8_t, uint8_t> shapes[] = {{1, 1},  {2, 1},  {3, 3},  {4, 2},  {5, 5},
                                                {10, 4}, {20, 2}, {20, 4}, {48, 1}, {16, 16}};
  std::mt19937 rng(16);
  size_t patterns = 0;
  for (auto [k, m] : shapes) {
    const uint16_t base = static_cast<uint16_t>(rng());
    const auto block = encode_block(base, k, m, rng);
    ASSERT_EQ(block.sources.size(), k);
    const size_t n = size_t{k} + m;
    // {16,16} has 2^32 subsets: there all patterns of up to 2 losses and seeded ones of 3..16.
    const size_t exhaustive_losses = n > 26 ? std::min<size_t>(2, m) : m;
    for (size_t losses = 0; losses <= exhaustive_losses; ++losses) {
      std::vector<bool> lost(n, false);
      std::fill(lost.begin(), lost.begin() + static_cast<long>(losses), true);
      std::sort(lost.begin(), lost.end());
      do {
        check_pattern(block, base, lost, rng);
        ++patterns;
        if (HasFatalFailure()) return;
      } while (std::next_permutation(lost.begin(), lost.end()));
    }
    if (exhaustive_losses < m) {
      for (int trial = 0; trial < 2000; ++trial) {
        std::vector<bool> lost(n, false);
        const size_t losses = 3 + rng() % (m - 2);
        for (size_t i = 0; i < losses; ++i) lost[i] = true;
        std::shuffle(lost.begin(), lost.end(), rng);
        check_pattern(block, base, lost, rng);
        ++patterns;
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(patterns, 15000u);
}

// One loss more than m: nothing is emitted (no guess), whatever the order.
TEST(FecCodec, MorethanMLossesEmitNothing) {
  std::mt19937 rng(17);
  const auto block = encode_block(100, 10, 3, rng);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<bool> lost(13, false);
    for (int i = 0; i < 4; ++i) lost[i] = true;
    std::shuffle(lost.begin(), lost.end(), rng);
    Decoder decoder(test_decoder_config());
    RecordingSink sink;
    for (size_t i = 0; i < 13; ++i) {
      if (lost[i]) continue;
      if (i < 10)
        decoder.add_source(static_cast<uint16_t>(100 + i), block.sources[i], 0, sink);
      else
        decoder.add_repair(block.repairs[i - 10], 0, sink);
    }
    EXPECT_TRUE(sink.recovered.empty());
  }
}

// A block that starts at 65530 holds 65530..65535, 0..5: the 16-bit sequence wraps inside it.
TEST(FecCodec, SequenceWrapsInsideABlock) {
  std::mt19937 rng(18);
  const uint16_t base = 65530;
  const auto block = encode_block(base, 12, 3, rng);
  for (const auto& lost_indices :
       {std::vector<size_t>{5, 6, 7}, std::vector<size_t>{0, 11}, std::vector<size_t>{6}}) {
    std::vector<bool> lost(15, false);
    for (size_t i : lost_indices) lost[i] = true;
    check_pattern(block, base, lost, rng);
  }
  // The repairs name base 65530 on the wire.
  RepairHeader header;
  ASSERT_EQ(parse_repair_header(block.repairs[0], &header), Refusal::kNone);
  EXPECT_EQ(header.base_sequence, 65530);
  EXPECT_EQ(header.k, 12);
}

// The pacer writes abs-send-time after FEC: the received packets' value differs from the
// encoder's, and the rebuilt packet carries zeros there and the rest byte for byte.
TEST(FecCodec, VolatileExtensionIsZeroedOnBothSides) {
  std::mt19937 rng(19);
  EncoderConfig config;
  config.media_ssrc = kSsrc;
  config.initial_shape = {6, 2};
  Encoder encoder(config);
  std::vector<std::vector<uint8_t>> sent;
  for (uint16_t i = 0; i < 6; ++i) {
    sent.push_back(make_rtp(static_cast<uint16_t>(7000 + i), 300 + 50 * i, rng, false, 0));
    encoder.add_source(static_cast<uint16_t>(7000 + i), sent.back());
  }
  ASSERT_TRUE(encoder.block_ready());
  std::vector<std::vector<uint8_t>> repairs(2, std::vector<uint8_t>(encoder.ready_payload_bytes()));
  uint8_t* out[] = {repairs[0].data(), repairs[1].data()};
  ASSERT_EQ(encoder.emit_repairs(out), 2u);
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  for (uint16_t i = 0; i < 6; ++i) {
    if (i == 1 || i == 4) continue;
    auto on_wire = sent[i];
    on_wire[17] = 0xAB;  // the pacer's abs-send-time
    on_wire[19] = static_cast<uint8_t>(i);
    decoder.add_source(static_cast<uint16_t>(7000 + i), on_wire, 0, sink);
  }
  decoder.add_repair(repairs[0], 0, sink);
  decoder.add_repair(repairs[1], 0, sink);
  ASSERT_EQ(sink.recovered.size(), 2u);
  for (const auto& r : sink.recovered) {
    auto expected = sent[r.sequence - 7000];
    EXPECT_EQ(r.packet, expected);  // sent with value 0: equal as a whole
  }
}

TEST(FecCodec, BlockClosesAtFrameEndAndAtK) {
  std::mt19937 rng(20);
  EncoderConfig config;
  config.media_ssrc = kSsrc;
  config.initial_shape = {20, 4};
  Encoder encoder(config);
  for (uint16_t i = 0; i < 4; ++i) {
    EXPECT_EQ(encoder.add_source(i, make_rtp(i, 500, rng)), AddStatus::kBuffered);
  }
  EXPECT_EQ(encoder.add_source(4, make_rtp(4, 500, rng, /*marker=*/true)), AddStatus::kBlockReady);
  EXPECT_EQ(encoder.ready_repair_count(), 4);
  std::vector<uint8_t> repair(kMaxRepairPayloadBytes);
  std::vector<uint8_t*> out(4, repair.data());
  ASSERT_EQ(encoder.emit_repairs(out), 4u);
  RepairHeader header;
  ASSERT_EQ(parse_repair_header({repair.data(), kHeaderBytes + 502}, &header), Refusal::kNone);
  EXPECT_EQ(header.k, 5);
  EXPECT_EQ(header.repair_index, 3);
  EXPECT_EQ(encoder.counters().blocks_closed_at_frame_end, 1u);
  // At k without a marker.
  encoder.set_shape({3, 1});
  EXPECT_EQ(encoder.add_source(5, make_rtp(5, 100, rng)), AddStatus::kBuffered);
  EXPECT_EQ(encoder.add_source(6, make_rtp(6, 100, rng)), AddStatus::kBuffered);
  EXPECT_EQ(encoder.add_source(7, make_rtp(7, 100, rng)), AddStatus::kBlockReady);
  EXPECT_EQ(encoder.ready_payload_bytes(), kHeaderBytes + 102);
  // Not emitted, then a new packet: the block is abandoned and counted.
  EXPECT_EQ(encoder.add_source(8, make_rtp(8, 100, rng)), AddStatus::kBuffered);
  EXPECT_EQ(encoder.counters().blocks_abandoned, 1u);
  // A sequence gap abandons the open block too.
  EXPECT_EQ(encoder.add_source(10, make_rtp(10, 100, rng)), AddStatus::kBuffered);
  EXPECT_EQ(encoder.counters().blocks_abandoned, 2u);
  // close_block() closes early.
  EXPECT_TRUE(encoder.close_block());
  EXPECT_EQ(encoder.ready_repair_count(), 1);
  EXPECT_FALSE(encoder.close_block());
}

TEST(FecCodec, EncoderRefusesAndPassesThrough) {
  std::mt19937 rng(21);
  EncoderConfig config;
  config.initial_shape = {4, 0};
  Encoder encoder(config);
  EXPECT_EQ(encoder.add_source(1, make_rtp(1, 200, rng)), AddStatus::kUnprotected);
  std::vector<uint8_t> short_packet(11, 0x80);
  EXPECT_EQ(encoder.add_source(2, short_packet), AddStatus::kRefused);
  EXPECT_EQ(encoder.last_refusal(), Refusal::kSourceTooShort);
  std::vector<uint8_t> long_packet(kMaxPacketBytes + 1, 0x80);
  EXPECT_EQ(encoder.add_source(2, long_packet), AddStatus::kRefused);
  EXPECT_EQ(encoder.last_refusal(), Refusal::kSourceTooLong);
  auto not_rtp = make_rtp(3, 100, rng);
  not_rtp[0] = 0x40;
  EXPECT_EQ(encoder.add_source(3, not_rtp), AddStatus::kRefused);
  EXPECT_EQ(encoder.last_refusal(), Refusal::kSourceNotRtp);
  EXPECT_EQ(encoder.counters().sources_refused, 3u);
  // Shapes are clamped to the limits.
  encoder.set_shape({200, 200});
  EXPECT_EQ(encoder.shape(), (BlockShape{kMaxK, kMaxM}));
  encoder.set_shape({0, 1});
  EXPECT_EQ(encoder.shape(), (BlockShape{1, 1}));
}

// Once each: late repairs and late sources of a recovered block emit nothing more.
TEST(FecCodec, RecoveredPacketsAreEmittedOnce) {
  std::mt19937 rng(22);
  const auto block = encode_block(300, 8, 4, rng);
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  for (uint16_t i = 2; i < 8; ++i) decoder.add_source(300 + i, block.sources[i], 0, sink);
  decoder.add_repair(block.repairs[0], 0, sink);
  decoder.add_repair(block.repairs[3], 0, sink);
  ASSERT_EQ(sink.recovered.size(), 2u);
  decoder.add_repair(block.repairs[1], 0, sink);
  decoder.add_repair(block.repairs[2], 0, sink);
  decoder.add_source(300, block.sources[0], 0, sink);
  decoder.add_source(301, block.sources[1], 0, sink);
  EXPECT_EQ(sink.recovered.size(), 2u);
  EXPECT_EQ(decoder.counters().repairs_unneeded, 2u);
  EXPECT_EQ(decoder.counters().blocks_recovered, 1u);
  EXPECT_EQ(decoder.counters().packets_recovered, 2u);
  // The block ages out by time; its repair again finds every source present: nothing emitted.
  decoder.expire(10'000'000'000);
  EXPECT_EQ(decoder.blocks_in_flight(), 0u);
  decoder.add_repair(block.repairs[1], 10'000'000'000, sink);
  EXPECT_EQ(sink.recovered.size(), 2u);
  EXPECT_EQ(decoder.counters().blocks_complete, 1u);
}

TEST(FecCodec, BlocksAgeOutByTimeAndByWindow) {
  std::mt19937 rng(23);
  DecoderConfig config = test_decoder_config();
  config.max_block_age_ns = 100'000'000;
  config.source_ring_packets = 256;
  {
    const auto block = encode_block(10, 4, 1, rng);
    Decoder decoder(config);
    RecordingSink sink;
    decoder.add_repair(block.repairs[0], 0, sink);
    decoder.add_source(10, block.sources[0], 50'000'000, sink);
    decoder.add_source(11, block.sources[1], 60'000'000, sink);
    // 150 ms after the repair: the block is gone, the last source recovers nothing.
    decoder.add_source(12, block.sources[2], 150'000'000, sink);
    EXPECT_TRUE(sink.recovered.empty());
    EXPECT_EQ(decoder.counters().blocks_expired_unrecovered, 1u);
  }
  {
    const auto block = encode_block(10, 4, 1, rng);
    Decoder decoder(config);
    RecordingSink sink;
    decoder.add_repair(block.repairs[0], 0, sink);
    decoder.add_source(10, block.sources[0], 0, sink);
    // The stream moves on by more than the window (256 - 2 * 48 = 160 packets).
    decoder.add_source(200, make_rtp(200, 100, rng), 0, sink);
    EXPECT_EQ(decoder.blocks_in_flight(), 0u);
    EXPECT_EQ(decoder.counters().blocks_expired_unrecovered, 1u);
    // Its other repairs are now out of the window.
    EXPECT_EQ(decoder.add_repair(block.repairs[0], 0, sink), Refusal::kRepairOutOfWindow);
  }
}

TEST(FecCodec, FullBlockTableEvictsTheOldest) {
  std::mt19937 rng(24);
  DecoderConfig config = test_decoder_config();
  config.max_blocks = 2;
  Decoder decoder(config);
  RecordingSink sink;
  std::vector<testing::EncodedBlock> blocks;
  for (int b = 0; b < 3; ++b)
    blocks.push_back(encode_block(static_cast<uint16_t>(b * 10), 4, 2, rng));
  for (int b = 0; b < 3; ++b) decoder.add_repair(blocks[b].repairs[0], b * 1000, sink);
  EXPECT_EQ(decoder.blocks_in_flight(), 2u);
  EXPECT_EQ(decoder.counters().blocks_evicted, 1u);
  // Block 0 was evicted: its sources cannot be rebuilt; block 2's can.
  for (uint16_t i = 1; i < 4; ++i) decoder.add_source(i, blocks[0].sources[i], 5000, sink);
  EXPECT_TRUE(sink.recovered.empty());
  for (uint16_t i = 0; i < 3; ++i) decoder.add_source(20 + i, blocks[2].sources[i], 5000, sink);
  ASSERT_EQ(sink.recovered.size(), 1u);
  EXPECT_EQ(sink.recovered[0].packet, blocks[2].sources[3]);
}

// A seeded stream of frames through encoder, a lossy channel and decoder: every rebuilt packet
// is byte for byte the one sent, and every block that lost at most m of its packets is whole.
TEST(FecCodec, RandomStreamThroughALossyChannel) {
  std::mt19937 rng(25);
  EncoderConfig encoder_config;
  encoder_config.media_ssrc = kSsrc;
  Encoder encoder(encoder_config);
  Decoder decoder(test_decoder_config());
  RecordingSink sink;
  std::map<uint16_t, std::vector<uint8_t>> sent;
  std::vector<std::vector<uint8_t>> repairs(kMaxM, std::vector<uint8_t>(kMaxRepairPayloadBytes));
  std::vector<uint8_t*> out;
  for (auto& r : repairs) out.push_back(r.data());
  std::bernoulli_distribution lose(0.05);
  uint16_t sequence = 65000;  // wraps during the run
  uint64_t now = 0;
  size_t blocks_recoverable = 0, blocks_whole = 0;
  std::vector<uint16_t> block_lost;
  size_t block_losses = 0;
  for (int frame = 0; frame < 600; ++frame) {
    const int packets = 1 + static_cast<int>(rng() % 60);
    encoder.set_shape({static_cast<uint8_t>(5 + rng() % 40), static_cast<uint8_t>(1 + rng() % 6)});
    now += 16'666'667;
    for (int p = 0; p < packets; ++p, ++sequence) {
      auto packet = make_rtp(sequence, 12 + rng() % (kMaxPacketBytes - 11), rng, p == packets - 1);
      sent[sequence] = packet;
      const AddStatus status = encoder.add_source(sequence, packet);
      ASSERT_NE(status, AddStatus::kRefused);
      if (lose(rng)) {
        ++block_losses;
        block_lost.push_back(sequence);
      } else {
        ASSERT_EQ(decoder.add_source(sequence, packet, now, sink), Refusal::kNone);
      }
      if (status == AddStatus::kBlockReady) {
        const uint8_t m = encoder.ready_repair_count();
        const size_t bytes = encoder.ready_payload_bytes();
        ASSERT_EQ(encoder.emit_repairs(out), m);
        for (uint8_t r = 0; r < m; ++r) {
          if (lose(rng))
            ++block_losses;
          else
            decoder.add_repair({out[r], bytes}, now, sink);
        }
        if (block_losses <= m) {
          ++blocks_recoverable;
          size_t found = 0;
          for (uint16_t s : block_lost) {
            found += std::count_if(sink.recovered.begin(), sink.recovered.end(),
                                   [&](const auto& r) { return r.sequence == s; });
          }
          if (found == block_lost.size()) ++blocks_whole;
        }
        block_lost.clear();
        block_losses = 0;
      }
    }
  }
  EXPECT_EQ(blocks_whole, blocks_recoverable);
  EXPECT_GT(blocks_recoverable, 500u);
  EXPECT_GT(sink.recovered.size(), 500u);
  for (const auto& r : sink.recovered) ASSERT_EQ(r.packet, sent[r.sequence]);
  EXPECT_EQ(decoder.counters().refused_total(), 0u);
}

}  // namespace
}  // namespace syncd::fec
