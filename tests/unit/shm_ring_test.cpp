#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "media/publishers/shm_region.h"
#include "sync/shm_reader.h"

using syncd::media::FramePool;
using syncd::media::FrameSlot;
using syncd::media::ShmRegion;

namespace {

struct Ring : ::testing::Test {
  void SetUp() override {
    path = "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string error;
    auto region = ShmRegion::create(path, "unit", 8, 4, 1, kSlots, error);
    ASSERT_TRUE(region) << error;
    writer = region.get();
    pool = FramePool::create_in(writer->first_slot(), writer->slot_stride(), kSlots, 8 * 4 * 4,
                                std::move(region), syncd::media::SlotReuse::kLeastRecent);
    ASSERT_EQ(sync_shm_open(path.c_str(), &reader), SYNC_SHM_OK);
  }
  void TearDown() override {
    sync_shm_close(reader);
    if (pool) pool->drop_ref();
  }
  // Writes and publishes one frame whose pixels are all `fill`.
  FrameSlot* publish(uint64_t sequence, uint8_t fill, bool release = true) {
    FrameSlot* s = pool->acquire();
    EXPECT_NE(s, nullptr);
    std::memset(s->pixels, fill, 128);
    s->info.sequence = sequence;
    writer->publish(*s, 1000 + sequence);
    if (release) FramePool::release(s);
    return s;
  }
  static constexpr uint32_t kSlots = 4;
  std::string path;
  ShmRegion* writer = nullptr;
  FramePool* pool = nullptr;
  sync_shm_reader* reader = nullptr;
};

}  // namespace

TEST_F(Ring, HeaderDescribesTheStreamAndFileIsPrivate) {
  const sync_shm_header* h = sync_shm_info(reader);
  EXPECT_EQ(h->width, 8u);
  EXPECT_EQ(h->height, 4u);
  EXPECT_EQ(h->slot_count, kSlots);
  EXPECT_EQ(h->frame_bytes, 128u);
  EXPECT_STREQ(h->stream_name, "unit");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(Ring, ReadsFramesInOrderWithoutCopy) {
  sync_shm_frame f;
  EXPECT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_ETIMEDOUT);
  publish(7, 0xAB);
  ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 7u);
  EXPECT_EQ(f.publish_time_ns, 1007u);
  EXPECT_EQ(f.pixels[127], 0xAB);
  EXPECT_EQ(sync_shm_check(reader, &f), SYNC_SHM_OK);
  EXPECT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_ETIMEDOUT);  // nothing newer
}

TEST_F(Ring, LateReaderCatchesUpWithinTheRing) {
  sync_shm_frame f;
  publish(1, 1);
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  publish(2, 2);
  publish(3, 3);  // the reader is two frames late but both are still in the ring
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 2u);
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 3u);
  EXPECT_EQ(sync_shm_get_counters(reader).skipped, 0u);
}

TEST_F(Ring, ReaderFarBehindSkipsToNewestAndCounts) {
  sync_shm_frame f;
  publish(1, 1);
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  for (uint64_t s = 2; s <= 11; ++s) publish(s, uint8_t(s));  // 10 frames, ring of 4
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 11u);
  EXPECT_EQ(f.pixels[0], 11);
  EXPECT_EQ(sync_shm_get_counters(reader).skipped, 9u);
}

TEST_F(Ring, OverwriteWhileReadingIsDetectedAsTorn) {
  sync_shm_frame f;
  publish(1, 1);
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  // The writer cycles through every slot, so the one being read is taken again.
  for (uint64_t s = 2; s <= kSlots + 1; ++s) publish(s, uint8_t(s));
  EXPECT_EQ(sync_shm_check(reader, &f), SYNC_SHM_ETORN);
  EXPECT_EQ(sync_shm_get_counters(reader).torn, 1u);
}

TEST_F(Ring, SlotBeingWrittenIsNeverTaken) {
  sync_shm_frame f;
  FrameSlot* in_progress = pool->acquire();  // seqlock odd: a frame arriving from the socket
  EXPECT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_ETIMEDOUT);
  FramePool::release(in_progress);  // refused, never published
  publish(5, 5);
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 5u);
}

TEST_F(Ring, EndedStreamWakesReaders) {
  writer->mark_ended();
  sync_shm_frame f;
  EXPECT_EQ(sync_shm_next(reader, 1000, &f), SYNC_SHM_EENDED);
}

TEST_F(Ring, RegionUnlinkedWhenPoolGoes) {
  pool->drop_ref();
  pool = nullptr;
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  // A reader that still maps it sees the end, not a crash.
  sync_shm_frame f;
  EXPECT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_EENDED);
}

TEST(ShmReader, RefusesMissingAndForeignFiles) {
  sync_shm_reader* r = nullptr;
  EXPECT_EQ(sync_shm_open("/dev/shm/sync-unit-does-not-exist", &r), SYNC_SHM_ENOENT);
  const std::string junk = "/dev/shm/sync-unit-junk-" + std::to_string(::getpid());
  FILE* f = std::fopen(junk.c_str(), "w");
  std::fputs(std::string(4096, 'x').c_str(), f);
  std::fclose(f);
  EXPECT_EQ(sync_shm_open(junk.c_str(), &r), SYNC_SHM_EFORMAT);
  ::unlink(junk.c_str());
}
