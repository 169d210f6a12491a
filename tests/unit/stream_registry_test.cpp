#include "media/stream_registry.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/content_hash.h"
#include "media/pattern_source.h"
#include "media/publishers/test_publisher.h"

using namespace syncd::media;

namespace {
StreamConfig small(const char* name, uint32_t slots = 2) {
  StreamConfig c;
  c.name = name;
  c.width = 16;
  c.height = 8;
  c.slots = slots;
  return c;
}

struct Fixture : ::testing::Test {
  Fixture() {
    auto p = std::make_unique<TestPublisher>();
    test = p.get();
    registry.add_publisher(std::move(p));
  }
  // Fills a slot like a producer would and admits it.
  void produce(Stream& s, uint64_t seq, bool corrupt = false, uint64_t now = 1'000'000'000) {
    s.count_offered();
    FrameSlot* slot = s.pool()->acquire();
    ASSERT_NE(slot, nullptr);
    for (size_t i = 0; i < s.frame_bytes(); ++i) slot->pixels[i] = uint8_t(i * 7 + seq);
    stamp_sequence_marker(slot->pixels, seq);
    slot->info.flags = frame_flag::kHasContentHash;
    slot->info.sequence = seq;
    slot->info.bytes = s.frame_bytes();
    slot->info.content_hash = XXH3_64bits(slot->pixels, slot->info.bytes);
    if (corrupt) slot->pixels[s.frame_bytes() - 1] ^= 1;
    registry.admit(s, slot, now);
  }
  StreamRegistry registry;
  TestPublisher* test = nullptr;
};
}  // namespace

TEST_F(Fixture, OpenRefusesDuplicateNamesAndBadConfig) {
  OpenError e;
  ASSERT_NE(registry.open(small("a"), 1, e), nullptr);
  EXPECT_EQ(registry.open(small("a"), 2, e), nullptr);
  EXPECT_EQ(e, OpenError::kNameTaken);
  StreamConfig bad = small("b");
  bad.width = 0;
  EXPECT_EQ(registry.open(bad, 1, e), nullptr);
  EXPECT_EQ(e, OpenError::kBadGeometry);
  EXPECT_EQ(registry.open(small("c", 0), 1, e), nullptr);
  EXPECT_EQ(e, OpenError::kBadSlots);
}

TEST_F(Fixture, VerifiesEveryByteAndSequence) {
  OpenError e;
  Stream* s = registry.open(small("v"), 1, e);
  produce(*s, 0);
  produce(*s, 1);
  produce(*s, 1);        // duplicate
  produce(*s, 4);        // gap of 2
  produce(*s, 3);        // reordered
  produce(*s, 5, true);  // one flipped bit in the last byte
  const TestVerdicts* v = test->verdicts(s->id());
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->delivered, 6u);
  EXPECT_EQ(v->verified, 5u);
  EXPECT_EQ(v->hash_mismatches, 1u);
  EXPECT_EQ(v->sequence_duplicates, 1u);
  EXPECT_EQ(v->sequence_gaps, 2u);
  EXPECT_EQ(v->sequence_reordered, 1u);
  EXPECT_EQ(s->counters().accepted, 6u);
  EXPECT_EQ(s->counters().unique, 4u);  // 0, 1, 4, 5
}

TEST_F(Fixture, AccountingIdentityHoldsWithPoolFull) {
  OpenError e;
  Stream* s = registry.open(small("p", 1), 1, e);
  FrameSlot* held = s->pool()->acquire();  // a publisher holding the only slot
  s->count_offered();
  EXPECT_EQ(s->pool()->acquire(), nullptr);
  s->count_dropped(DropReason::kPoolFull);
  FramePool::release(held);
  produce(*s, 1);
  const auto& c = s->counters();
  EXPECT_EQ(c.offered, 2u);
  EXPECT_EQ(c.offered, c.accepted + c.dropped_total());
  EXPECT_EQ(c.dropped[size_t(DropReason::kPoolFull)], 1u);
}

TEST_F(Fixture, ClosedStreamKeepsItsAccount) {
  OpenError e;
  Stream* s = registry.open(small("c"), 7, e);
  const uint32_t id = s->id();
  produce(*s, 0);
  registry.close_owned_by(7);
  EXPECT_EQ(registry.find(id), nullptr);
  nlohmann::json j;
  registry.write_stats(j);
  ASSERT_EQ(j["streams"].size(), 1u);
  EXPECT_EQ(j["streams"][0]["open"], false);
  EXPECT_EQ(j["streams"][0]["frames_verified"], 1);
  // The name is free again.
  EXPECT_NE(registry.open(small("c"), 8, e), nullptr);
}

TEST_F(Fixture, PatternSourceFramesVerify) {
  PatternConfig pc;
  pc.width = 64;
  pc.height = 32;
  pc.fps = 100;
  PatternSource source(registry, pc);
  std::string err;
  ASSERT_TRUE(source.start(err)) << err;
  uint64_t now = 5'000'000'000;
  for (int i = 0; i < 250; ++i) now += source.produce_due(now);
  Stream* s = registry.find(std::string("pattern"));
  ASSERT_NE(s, nullptr);
  const TestVerdicts* v = test->verdicts(s->id());
  EXPECT_EQ(v->verified, source.frames_produced());
  EXPECT_EQ(v->hash_mismatches, 0u);
  EXPECT_EQ(v->sequence_gaps, 0u);
  EXPECT_GE(source.frames_produced(), 249u);
  EXPECT_EQ(s->rate().last_complete_fps(), 100u);
}

TEST(PatternSpec, Parses) {
  PatternConfig c;
  std::string err;
  EXPECT_TRUE(parse_pattern_spec("pattern:1280x720@30", c, err));
  EXPECT_EQ(c.width, 1280u);
  EXPECT_EQ(c.height, 720u);
  EXPECT_EQ(c.fps, 30.0);
  EXPECT_FALSE(parse_pattern_spec("pattern:1280x@30", c, err));
  EXPECT_FALSE(parse_pattern_spec("camera", c, err));
}

TEST(ContentHasher, PiecesInOrderGiveTheWholeFramesHash) {
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 131 + (i >> 9));
  const uint64_t whole = syncd::core::content_hash(bytes.data(), bytes.size());
  // Window sizes like syncd's reads: odd, tiny, larger than the stripe, and the whole.
  for (size_t window : {size_t{1}, size_t{63}, size_t{4096}, size_t{256 * 1024 + 7}, bytes.size()}) {
    syncd::core::ContentHasher h;
    for (size_t at = 0; at < bytes.size(); at += window)
      h.update(bytes.data() + at, std::min(window, bytes.size() - at));
    EXPECT_EQ(h.digest(), whole) << "window " << window;
  }
  syncd::core::ContentHasher h;
  h.update(bytes.data(), 1000);
  h.reset();  // a hasher reused for the next frame starts over
  h.update(bytes.data(), bytes.size());
  EXPECT_EQ(h.digest(), whole);
}

TEST_F(Fixture, ComparesTheIngestsDigestWhenItHasOne) {
  EXPECT_TRUE(registry.verifies_content());
  OpenError e;
  Stream* s = registry.open(small("d"), 1, e);
  for (uint64_t seq = 0; seq < 2; ++seq) {
    s->count_offered();
    FrameSlot* slot = s->pool()->acquire();
    ASSERT_NE(slot, nullptr);
    EXPECT_FALSE(slot->info.received_hash_valid);  // acquire() clears what the last frame left
    for (size_t i = 0; i < s->frame_bytes(); ++i) slot->pixels[i] = uint8_t(i + seq);
    slot->info.flags = frame_flag::kHasContentHash;
    slot->info.sequence = seq;
    slot->info.bytes = s->frame_bytes();
    slot->info.content_hash = XXH3_64bits(slot->pixels, slot->info.bytes);
    // The ingest's digest is what is compared: a wrong one fails even though the pixels match.
    slot->info.received_hash = seq == 0 ? slot->info.content_hash : slot->info.content_hash ^ 1;
    slot->info.received_hash_valid = true;
    registry.admit(*s, slot, 1'000'000'000);
  }
  const TestVerdicts* v = test->verdicts(s->id());
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verified, 1u);
  EXPECT_EQ(v->hash_mismatches, 1u);
}
