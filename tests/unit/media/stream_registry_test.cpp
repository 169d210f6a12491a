#include "media/stream_registry.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/content_hash.h"
#include "media/column_marker.h"
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
  static IngestRequest request(const Stream& s, uint64_t seq, uint64_t owner = 1) {
    IngestRequest r;
    r.stream_id = s.id();
    r.owner = owner;
    r.flags = frame_flag::kHasContentHash;
    r.sequence = seq;
    r.start_ns = 1'000'000'000;
    return r;
  }
  // Fills a lease like a producer would and commits it.
  void produce(Stream& s, uint64_t seq, bool corrupt = false, uint64_t now = 1'000'000'000) {
    IngestRefusal why;
    SlotLease lease = registry.begin(request(s, seq, s.owner()), why);
    ASSERT_TRUE(lease);
    for (size_t i = 0; i < s.frame_bytes(); ++i) lease.pixels()[i] = uint8_t(i * 7 + seq);
    stamp_sequence_marker(lease.pixels(), seq);
    lease.info().content_hash = XXH3_64bits(lease.pixels(), lease.frame_bytes());
    if (corrupt) lease.pixels()[s.frame_bytes() - 1] ^= 1;
    EXPECT_TRUE(lease.commit(lease.frame_bytes(), now));
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
  IngestRefusal why;
  EXPECT_FALSE(registry.begin(request(*s, 0), why));
  EXPECT_EQ(why, IngestRefusal::kPoolFull);
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
  for (size_t window :
       {size_t{1}, size_t{63}, size_t{4096}, size_t{256 * 1024 + 7}, bytes.size()}) {
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
    IngestRefusal why;
    SlotLease lease = registry.begin(request(*s, seq), why);
    ASSERT_TRUE(lease);
    FrameInfo& info = lease.info();
    EXPECT_FALSE(info.received_hash_valid);  // acquire() clears what the last frame left
    for (size_t i = 0; i < s->frame_bytes(); ++i) lease.pixels()[i] = uint8_t(i + seq);
    info.content_hash = XXH3_64bits(lease.pixels(), lease.frame_bytes());
    // The ingest's digest is what is compared: a wrong one fails even though the pixels match.
    info.received_hash = seq == 0 ? info.content_hash : info.content_hash ^ 1;
    info.received_hash_valid = true;
    lease.commit(lease.frame_bytes(), 1'000'000'000);
  }
  const TestVerdicts* v = test->verdicts(s->id());
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->verified, 1u);
  EXPECT_EQ(v->hash_mismatches, 1u);
}

// The ingest API's lease lifecycle: every way a frame can end is counted once, by reason.
TEST_F(Fixture, LeaseLifecycleKeepsTheAccountingIdentity) {
  OpenError e;
  Stream* s = registry.open(small("lease", 2), 1, e);
  ASSERT_NE(s, nullptr);
  IngestRefusal why;

  // Refusals that are not the stream's: no stream of that id, or someone else's stream.
  IngestRequest unknown = request(*s, 0);
  unknown.stream_id = 999;
  EXPECT_FALSE(registry.begin(unknown, why));
  EXPECT_EQ(why, IngestRefusal::kUnknownStream);
  EXPECT_FALSE(registry.begin(request(*s, 0, /*owner=*/2), why));
  EXPECT_EQ(why, IngestRefusal::kNotOwner);
  EXPECT_EQ(s->counters().offered, 0u);

  // Refused up front: wrong geometry, or a payload size known to be wrong.
  IngestRequest wide = request(*s, 0);
  wide.width = 17;
  EXPECT_FALSE(registry.begin(wide, why));
  EXPECT_EQ(why, IngestRefusal::kGeometryMismatch);
  IngestRequest sized = request(*s, 0);
  sized.payload_bytes = s->frame_bytes() + 1;
  EXPECT_FALSE(registry.begin(sized, why));
  EXPECT_EQ(why, IngestRefusal::kSizeMismatch);

  // Leased, then: committed short, aborted, dropped unfinished, moved and committed.
  {
    SlotLease short_frame = registry.begin(request(*s, 1), why);
    ASSERT_TRUE(short_frame);
    EXPECT_FALSE(short_frame.commit(short_frame.frame_bytes() - 1, 1'000'000'000));
    EXPECT_FALSE(short_frame);
  }
  {
    SlotLease aborted = registry.begin(request(*s, 2), why);
    ASSERT_TRUE(aborted);
    aborted.abort(DropReason::kSizeMismatch);
  }
  { SlotLease abandoned = registry.begin(request(*s, 3), why); }
  {
    SlotLease first = registry.begin(request(*s, 4), why);
    SlotLease moved = std::move(first);
    EXPECT_FALSE(first);
    ASSERT_TRUE(moved);
    EXPECT_TRUE(moved.commit(moved.frame_bytes(), 1'000'000'000));
  }
  // Two leases hold both slots; the third frame finds the pool full.
  SlotLease a = registry.begin(request(*s, 5), why);
  SlotLease b = registry.begin(request(*s, 6), why);
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(registry.begin(request(*s, 7), why));
  EXPECT_EQ(why, IngestRefusal::kPoolFull);
  // The stream closes under a lease: its commit counts as a drop, not an acceptance.
  registry.close(s);
  EXPECT_FALSE(a.commit(a.frame_bytes(), 1'000'000'000));
  b.abort(DropReason::kDisconnected);

  const StreamCounters& c = s->counters();
  EXPECT_EQ(c.offered, 9u);
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.offered, c.accepted + c.dropped_total());
  EXPECT_EQ(c.dropped[size_t(DropReason::kGeometryMismatch)], 1u);
  EXPECT_EQ(c.dropped[size_t(DropReason::kSizeMismatch)], 3u);
  EXPECT_EQ(c.dropped[size_t(DropReason::kPoolFull)], 1u);
  EXPECT_EQ(c.dropped[size_t(DropReason::kDisconnected)], 3u);
}

TEST(PixelFormats, LayoutsArePackedPlanes) {
  FrameLayout l;
  ASSERT_TRUE(frame_layout(PixelFormat::kRgba8, 1920, 1080, l));
  EXPECT_EQ(l.bytes, 8'294'400u);
  EXPECT_EQ(l.plane_count, 1u);
  EXPECT_EQ(l.planes[0].stride, 7680u);
  ASSERT_TRUE(frame_layout(PixelFormat::kNv12, 1920, 1080, l));
  EXPECT_EQ(l.bytes, 3'110'400u);
  EXPECT_EQ(l.plane_count, 2u);
  EXPECT_EQ(l.planes[1].offset, 2'073'600u);
  EXPECT_EQ(l.planes[1].stride, 1920u);
  EXPECT_EQ(l.planes[1].rows, 540u);
  ASSERT_TRUE(frame_layout(PixelFormat::kI420, 1920, 1080, l));
  EXPECT_EQ(l.plane_count, 3u);
  EXPECT_EQ(l.planes[1].stride, 960u);
  EXPECT_EQ(l.planes[2].offset, 2'073'600u + 518'400u);
  EXPECT_EQ(l.bytes, 3'110'400u);
  EXPECT_FALSE(frame_layout(PixelFormat::kNv12, 1919, 1080, l));  // 4:2:0 needs even sizes
  EXPECT_FALSE(frame_layout(PixelFormat::kStreamDefault, 16, 16, l));
  EXPECT_FALSE(frame_layout(PixelFormat(9), 16, 16, l));
  // Found by fuzz/frame_header.cpp: sizes whose byte count overflows are refused.
  EXPECT_FALSE(frame_layout(PixelFormat::kNv12, 4294967040u, 4278255616u, l));
  EXPECT_FALSE(frame_layout(PixelFormat::kRgba8, kMaxFrameSide + 1, 2, l));
  // An access unit holds up to an I420 frame's bytes, odd sizes rounded up.
  ASSERT_TRUE(frame_layout(PixelFormat::kH264, 1920, 1080, l));
  EXPECT_EQ(l.bytes, 3'110'400u);
  EXPECT_EQ(l.plane_count, 1u);
  ASSERT_TRUE(frame_layout(PixelFormat::kH264, 3, 3, l));
  EXPECT_EQ(l.bytes, 9u + 2 * 4);
  // Found by fuzz/frame_header.cpp: an access unit's one row must fit a 32-bit stride.
  EXPECT_FALSE(frame_layout(PixelFormat::kH264, 65536, 65536, l));
  EXPECT_TRUE(is_encoded(PixelFormat::kH264));
  EXPECT_FALSE(is_encoded(PixelFormat::kI420));
  for (const char* name : {"rgba8", "bgra8", "nv12", "i420", "h264"}) {
    PixelFormat f;
    ASSERT_TRUE(parse_pixel_format(name, f));
    EXPECT_STREQ(pixel_format_name(f), name);
  }
}

TEST_F(Fixture, Nv12StreamsTakeTheirPlaneSize) {
  StreamConfig c = small("yuv");
  c.format = PixelFormat::kNv12;
  OpenError e;
  Stream* s = registry.open(c, 1, e);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->frame_bytes(), 16u * 8 * 3 / 2);
  produce(*s, 0);
  EXPECT_EQ(test->verdicts(s->id())->verified, 1u);
  c.name = "odd";
  c.width = 15;
  EXPECT_EQ(registry.open(c, 1, e), nullptr);
  EXPECT_EQ(e, OpenError::kBadGeometry);
}

// A frame that says it carries the column marker (one the relay decoded, with no content hash
// left) is checked by the marker's 16 bits: in the luma plane of I420, the green of RGBA.
TEST_F(Fixture, ColumnMarkerFramesAreCheckedByTheirMarker) {
  for (PixelFormat format : {PixelFormat::kI420, PixelFormat::kRgba8}) {
    StreamConfig c = small(pixel_format_name(format));
    c.format = format;
    c.width = kMarkerWidth + 8;
    c.height = 16;
    OpenError e;
    Stream* s = registry.open(c, 1, e);
    ASSERT_NE(s, nullptr);
    for (uint64_t seq : {uint64_t{70000}, uint64_t{70001}, uint64_t{70002}}) {
      IngestRequest r = request(*s, seq);
      r.flags = frame_flag::kColumnMarker;
      IngestRefusal why;
      SlotLease lease = registry.begin(r, why);
      ASSERT_TRUE(lease);
      std::fill_n(lease.pixels(), lease.frame_bytes(), uint8_t{128});
      // The frame drawn for 70002 says 70001: a mismatch.
      const uint16_t drawn = uint16_t(seq == 70002 ? seq - 1 : seq);
      if (format == PixelFormat::kI420) {
        draw_column_marker(lease.pixels(), c.width, c.width, c.height, drawn);
      } else {
        std::vector<uint8_t> luma(size_t(c.width) * c.height);
        draw_column_marker(luma.data(), c.width, c.width, c.height, drawn);
        for (size_t i = 0; i < luma.size(); ++i) lease.pixels()[i * 4 + 1] = luma[i];
      }
      EXPECT_TRUE(lease.commit(lease.frame_bytes(), 1'000'000'000));
    }
    const TestVerdicts* v = test->verdicts(s->id());
    EXPECT_EQ(v->marker_verified, 2u) << pixel_format_name(format);
    EXPECT_EQ(v->marker_mismatches, 1u) << pixel_format_name(format);
    EXPECT_EQ(v->verified, 0u);
  }
}

// An encoded stream's frames are access units of 1 byte up to the slot: each is verified at
// its own size, and FrameInfo::bytes says the size to every publisher.
TEST_F(Fixture, EncodedStreamsTakeAccessUnitsOfAnySizeUpToTheSlot) {
  StreamConfig c = small("h264");
  c.format = PixelFormat::kH264;
  OpenError e;
  Stream* s = registry.open(c, 1, e);
  ASSERT_NE(s, nullptr);
  const size_t room = s->frame_bytes();
  EXPECT_EQ(room, 16u * 8 * 3 / 2);
  uint64_t seq = 0;
  for (size_t size : {size_t(1), size_t(17), room - 1, room}) {
    IngestRefusal why;
    IngestRequest r = request(*s, ++seq);
    r.payload_bytes = size;  // said up front, as a whole WebSocket message does
    SlotLease lease = registry.begin(r, why);
    ASSERT_TRUE(lease) << size;
    EXPECT_EQ(lease.frame_bytes(), size);
    for (size_t i = 0; i < size; ++i) lease.pixels()[i] = uint8_t(i * 13 + seq);
    lease.info().content_hash = XXH3_64bits(lease.pixels(), size);
    FrameInfo& info = lease.info();
    ASSERT_TRUE(lease.commit(size, 1'000'000'000));
    EXPECT_EQ(info.bytes, size);
  }
  // Size unknown up front (a fragmented message): whatever fills 1..room bytes.
  {
    IngestRefusal why;
    SlotLease lease = registry.begin(request(*s, ++seq), why);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease.frame_bytes(), room);
    std::fill_n(lease.pixels(), 100, uint8_t(5));
    lease.info().content_hash = XXH3_64bits(lease.pixels(), 100);
    ASSERT_TRUE(lease.commit(100, 1'000'000'000));
  }
  EXPECT_EQ(test->verdicts(s->id())->verified, seq);
  EXPECT_EQ(test->verdicts(s->id())->verify_failures(), 0u);
  // Too big up front, too big or empty at commit: size mismatches, counted.
  IngestRefusal why;
  IngestRequest big = request(*s, ++seq);
  big.payload_bytes = room + 1;
  EXPECT_FALSE(registry.begin(big, why));
  EXPECT_EQ(why, IngestRefusal::kSizeMismatch);
  SlotLease empty = registry.begin(request(*s, ++seq), why);
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty.commit(0, 1'000'000'000));
  EXPECT_EQ(s->counters().dropped[size_t(DropReason::kSizeMismatch)], 2u);
}

TEST(StreamLimits, OneConnectionCannotTakeEveryStream) {
  StreamLimits limits;
  limits.max_streams = 6;
  limits.max_streams_per_owner = 2;
  StreamRegistry registry(limits);
  OpenError e;
  ASSERT_NE(registry.open(small("a1"), /*owner=*/1, e), nullptr);
  ASSERT_NE(registry.open(small("a2"), 1, e), nullptr);
  EXPECT_EQ(registry.open(small("a3"), 1, e), nullptr);
  EXPECT_EQ(e, OpenError::kTooManyForOwner);
  EXPECT_STREQ(open_error_code(e), "connection_stream_limit");
  EXPECT_NE(registry.open(small("b1"), /*owner=*/2, e), nullptr);
  nlohmann::json stats;
  registry.write_stats(stats);
  EXPECT_EQ(stats["open_refused"]["connection_stream_limit"], 1);
}

TEST(StreamLimits, OneConnectionCannotTakeThePoolMemoryEveryOtherNeeds) {
  StreamLimits limits;  // 2 GiB in all, 1 GiB per connection
  StreamRegistry registry(limits);
  OpenError e;
  auto huge = [](const char* name) {
    StreamConfig c;
    c.name = name;
    c.width = 4096;
    c.height = 4096;
    c.format = PixelFormat::kRgba8;
    c.slots = 16;  // 1 GiB
    return c;
  };
  ASSERT_NE(registry.open(huge("a1"), /*owner=*/1, e), nullptr);
  EXPECT_EQ(registry.open(huge("a2"), 1, e), nullptr);
  EXPECT_EQ(e, OpenError::kOwnerNoMemory);
  EXPECT_STREQ(open_error_code(e), "connection_memory_limit");
  // Another client still opens a 1080p stream.
  StreamConfig hd = small("b1");
  hd.width = 1920;
  hd.height = 1080;
  hd.slots = 4;
  EXPECT_NE(registry.open(hd, /*owner=*/2, e), nullptr);
  nlohmann::json stats;
  registry.write_stats(stats);
  EXPECT_EQ(stats["open_refused"]["connection_memory_limit"], 1);
}

TEST(StreamLimits, APoolCountsAgainstTheBudgetUntilItIsUnmapped) {
  StreamLimits limits;
  limits.max_pool_bytes_total = 3 << 20;  // room for one 2 MiB pool, not two
  StreamRegistry registry(limits);
  StreamConfig big = small("big", 2);
  big.width = 512;
  big.height = 512;  // 1 MiB a frame, 2 slots
  OpenError e;
  Stream* s = registry.open(big, 1, e);
  ASSERT_NE(s, nullptr);
  EXPECT_GE(registry.pool_bytes(), size_t(2) << 20);
  // Something still holds a frame of the stream (here a lease; a stalled receiver's write
  // does the same) when the stream closes: the pool stays mapped, and counted.
  IngestRequest r;
  r.stream_id = s->id();
  r.owner = 1;
  IngestRefusal why;
  SlotLease held = registry.begin(r, why);
  ASSERT_TRUE(held);
  registry.close(s);
  EXPECT_GE(registry.pool_bytes(), size_t(2) << 20);
  big.name = "big2";
  EXPECT_EQ(registry.open(big, 2, e), nullptr);
  EXPECT_EQ(e, OpenError::kNoMemory);
  // The last frame goes: the memory is unmapped and the budget is free again.
  held.abort(DropReason::kDisconnected);
  EXPECT_EQ(registry.pool_bytes(), 0u);
  EXPECT_NE(registry.open(big, 2, e), nullptr);
}

TEST(StreamLimits, AClosedStreamsPoolGoesToTheReleaseHook) {
  StreamRegistry registry;
  FramePool* handed = nullptr;
  registry.set_pool_release([&](FramePool* pool) { handed = pool; });
  OpenError e;
  Stream* s = registry.open(small("r"), 1, e);
  ASSERT_NE(s, nullptr);
  FramePool* pool = s->pool();
  registry.close(s);
  // syncd drops it on a pool thread; until then it is mapped, and counted.
  ASSERT_EQ(handed, pool);
  EXPECT_GT(registry.pool_bytes(), 0u);
  handed->drop_ref();
  EXPECT_EQ(registry.pool_bytes(), 0u);
}

namespace {
// What an encoded stream's source hears of its consumers' requests.
struct HeardRequests final : SourceFeedback {
  std::vector<KeyframeReason> keyframes;
  std::vector<uint64_t> bitrates;
  std::vector<uint64_t> undecodable_sequences;
  void keyframe_wanted(const Stream&, KeyframeReason reason) override {
    keyframes.push_back(reason);
  }
  void target_bitrate(const Stream&, uint64_t bps) override { bitrates.push_back(bps); }
  void undecodable(const Stream&, uint64_t sequence, const char*) override {
    undecodable_sequences.push_back(sequence);
  }
};

Stream* open_h264(StreamRegistry& registry, HeardRequests& heard) {
  StreamConfig c;
  c.name = "page";
  c.width = 64;
  c.height = 32;
  c.format = PixelFormat::kH264;
  OpenError error;
  Stream* s = registry.open(c, 3, error);
  if (s) s->set_source_feedback(&heard);
  return s;
}
}  // namespace

// One access unit of the stream, committed at now_ns.
void commit_unit(StreamRegistry& registry, Stream* s, uint64_t sequence, uint64_t now_ns) {
  IngestRequest r;
  r.stream_id = s->id();
  r.owner = 3;
  r.sequence = sequence;
  r.start_ns = now_ns;
  IngestRefusal refusal;
  SlotLease lease = registry.begin(r, refusal);
  ASSERT_TRUE(lease);
  lease.pixels()[0] = 0;
  ASSERT_TRUE(lease.commit(1, now_ns));
}

TEST(SourceRequests, KeyFramesAreCountedByReasonAndMergedWithinAnInterval) {
  StreamRegistry registry;
  HeardRequests heard;
  Stream* s = open_h264(registry, heard);
  ASSERT_NE(s, nullptr);
  const uint64_t t = 10'000'000'000;
  registry.request_keyframe(s->id(), KeyframeReason::kWhep, t);
  registry.request_keyframe(s->id(), KeyframeReason::kWhep, t + 50'000'000);       // pending
  registry.request_keyframe(s->id(), KeyframeReason::kConsumer, t + 120'000'000);  // merged
  commit_unit(registry, s, 1, t + 150'000'000);  // inside the interval: still pending
  EXPECT_EQ(heard.keyframes, (std::vector<KeyframeReason>{KeyframeReason::kWhep}));
  // The first frame after the interval passes the pending one: the IDR that answered the first
  // may have gone before the consumer that asked at +120 ms joined.
  commit_unit(registry, s, 2, t + 210'000'000);
  EXPECT_EQ(heard.keyframes,
            (std::vector<KeyframeReason>{KeyframeReason::kWhep, KeyframeReason::kConsumer}));
  commit_unit(registry, s, 3, t + 500'000'000);  // nothing pending: nothing passed
  registry.request_keyframe(s->id(), KeyframeReason::kRelay, t + 600'000'000);  // at once
  EXPECT_EQ(heard.keyframes.size(), 3u);
  EXPECT_EQ(heard.keyframes.back(), KeyframeReason::kRelay);
  const SourceRequests& r = s->source_requests();
  EXPECT_EQ(r.keyframes[size_t(KeyframeReason::kWhep)], 2u);
  EXPECT_EQ(r.keyframes[size_t(KeyframeReason::kConsumer)], 1u);
  EXPECT_EQ(r.keyframes_passed, 3u);
  registry.request_keyframe(999, KeyframeReason::kWhep, t);  // no such stream: ignored
  nlohmann::json stats;
  registry.write_stats(stats);
  EXPECT_EQ(stats["streams"][0]["source_requests"]["keyframes"]["whep"], 2);
}

TEST(SourceRequests, TheSourceHearsTheLowestTargetWhenItMovesFivePercent) {
  StreamRegistry registry;
  HeardRequests heard;
  Stream* s = open_h264(registry, heard);
  ASSERT_NE(s, nullptr);
  registry.set_target_bitrate(s->id(), 1, 8'000'000);
  registry.set_target_bitrate(s->id(), 2, 4'000'000);  // the lowest
  registry.set_target_bitrate(s->id(), 2, 3'900'000);  // 2.5 %: not worth a reconfigure
  registry.set_target_bitrate(s->id(), 2, 3'700'000);  // 7.5 % from the last sent
  registry.set_target_bitrate(s->id(), 2, 0);          // withdrawn: 8 Mbit/s is the lowest
  registry.set_target_bitrate(s->id(), 1, 0);          // none left: the source keeps its rate
  EXPECT_EQ(heard.bitrates, (std::vector<uint64_t>{8'000'000, 4'000'000, 3'700'000, 8'000'000}));
  // A ninth consumer is refused and counted; the other eight still count.
  for (uintptr_t c = 10; c < 18; ++c) registry.set_target_bitrate(s->id(), c, 6'000'000 + c);
  registry.set_target_bitrate(s->id(), 99, 1'000'000);
  EXPECT_EQ(s->source_requests().targets_refused, 1u);
  EXPECT_EQ(heard.bitrates.back(), 6'000'010u);
}

TEST(SourceRequests, AStreamWithoutFeedbackCountsRequestsAndSendsNothing) {
  StreamRegistry registry;
  HeardRequests heard;
  Stream* s = open_h264(registry, heard);
  ASSERT_NE(s, nullptr);
  s->set_source_feedback(nullptr);
  registry.request_keyframe(s->id(), KeyframeReason::kDecoder, 1);
  registry.set_target_bitrate(s->id(), 1, 2'000'000);
  EXPECT_TRUE(heard.keyframes.empty());
  EXPECT_TRUE(heard.bitrates.empty());
  EXPECT_EQ(s->source_requests().keyframes[size_t(KeyframeReason::kDecoder)], 1u);
  EXPECT_EQ(s->source_requests().bitrate_sent, 2'000'000u);
}

TEST(SourceRequests, UndecodableUnitsAreCountedAndTheSourceToldOnceASecond) {
  StreamRegistry registry;
  HeardRequests heard;
  Stream* s = open_h264(registry, heard);
  ASSERT_NE(s, nullptr);
  const uint64_t t = 5'000'000'000;
  for (uint64_t seq = 1; seq <= 60; ++seq)  // a second of garbage at 60 fps
    registry.report_undecodable(s->id(), seq, "not H.264", t + (seq - 1) * 16'666'667);
  registry.report_undecodable(s->id(), 61, "not H.264", t + 1'000'000'000);
  EXPECT_EQ(heard.undecodable_sequences, (std::vector<uint64_t>{1, 61}));
  EXPECT_EQ(s->source_requests().undecodable, 61u);
  EXPECT_EQ(s->source_requests().undecodable_told, 2u);
}

TEST(StreamLimits, ALowRateSecondIsFiveSixthsOfTheNominalRate) {
  EXPECT_EQ(low_rate_threshold_for(60), 50u);  // the seed's bar
  EXPECT_EQ(low_rate_threshold_for(30), 25u);
  EXPECT_EQ(low_rate_threshold_for(59.94), 50u);
  EXPECT_EQ(low_rate_threshold_for(120), 100u);
  EXPECT_EQ(low_rate_threshold_for(1), 1u);
  EXPECT_EQ(low_rate_threshold_for(0), 50u);  // no rate given: 60's
  StreamRegistry registry;
  OpenError e;
  StreamConfig c = small("thirty");
  c.fps = 30;
  Stream* s = registry.open(c, 1, e);
  ASSERT_NE(s, nullptr);
  nlohmann::json stats;
  registry.write_stats(stats);
  EXPECT_EQ(stats["streams"][0]["low_rate_threshold"], 25);
}
