#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "media/publishers/shm_region.h"
#include "sync/shm_reader.h"

using syncd::media::FrameLayout;
using syncd::media::FramePool;
using syncd::media::FrameSlot;
using syncd::media::PixelFormat;
using syncd::media::ShmRegion;

namespace {

FrameLayout layout_of(PixelFormat format, uint32_t width, uint32_t height) {
  FrameLayout l;
  EXPECT_TRUE(syncd::media::frame_layout(format, width, height, l));
  return l;
}

struct Ring : ::testing::Test {
  void SetUp() override {
    path = "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    syncd::media::ShmRegionError error;
    auto region =
        ShmRegion::create(path, "unit", layout_of(PixelFormat::kRgba8, 8, 4), kSlots, error);
    ASSERT_TRUE(region) << error.message;
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

namespace {

// A ring of one format and size, written by ShmRegion (which takes syncd's media::frame_layout)
// and opened by the C reader (which computes the layout on its own).
struct FormatRing {
  FormatRing(PixelFormat format, uint32_t width, uint32_t height, const char* tag)
      : layout(layout_of(format, width, height)) {
    path = "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-fmt-" + tag;
    syncd::media::ShmRegionError error;
    auto region = ShmRegion::create(path, "fmt", layout, 2, error);
    EXPECT_TRUE(region) << error.message;
    if (!region) return;
    writer = region.get();
    pool = FramePool::create_in(writer->first_slot(), writer->slot_stride(), 2, layout.bytes,
                                std::move(region), syncd::media::SlotReuse::kLeastRecent);
  }
  ~FormatRing() {
    if (pool) pool->drop_ref();
  }
  // Rewrites one header field in the file, as a writer with a bug (or another program) would.
  template <typename F>
  void tamper(F&& change) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    void* m = ::mmap(nullptr, sizeof(sync_shm_header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(m, MAP_FAILED);
    change(*static_cast<sync_shm_header*>(m));
    ::munmap(m, sizeof(sync_shm_header));
  }
  int open_status() {
    sync_shm_reader* r = nullptr;
    const int rc = sync_shm_open(path.c_str(), &r);
    sync_shm_close(r);
    return rc;
  }

  FrameLayout layout;
  std::string path;
  ShmRegion* writer = nullptr;
  FramePool* pool = nullptr;
};

}  // namespace

TEST(ShmFormats, HeaderAndReaderCarryEveryFormatsPlanes) {
  struct Case {
    PixelFormat format;
    uint32_t width, height;
    uint32_t planes;
    uint64_t bytes;
  };
  const Case cases[] = {
      {PixelFormat::kRgba8, 6, 2, 1, 6 * 2 * 4},
      {PixelFormat::kBgra8, 1920, 1080, 1, 1920 * 1080 * 4},
      {PixelFormat::kNv12, 2, 2, 2, 6},
      {PixelFormat::kNv12, 1920, 1080, 2, 1920 * 1080 * 3 / 2},
      {PixelFormat::kI420, 2, 2, 3, 6},
      {PixelFormat::kI420, 1280, 720, 3, 1280 * 720 * 3 / 2},
      {PixelFormat::kI420, 1920, 1080, 3, 1920 * 1080 * 3 / 2},
  };
  for (const Case& c : cases) {
    const std::string tag = std::string(syncd::media::pixel_format_name(c.format)) + "-" +
                            std::to_string(c.width) + "x" + std::to_string(c.height);
    SCOPED_TRACE(tag);
    FormatRing ring(c.format, c.width, c.height, tag.c_str());
    ASSERT_TRUE(ring.pool);
    sync_shm_reader* reader = nullptr;
    ASSERT_EQ(sync_shm_open(ring.path.c_str(), &reader), SYNC_SHM_OK);
    const sync_shm_header* h = sync_shm_info(reader);
    EXPECT_EQ(h->format, uint32_t(c.format));
    EXPECT_EQ(h->frame_bytes, c.bytes);
    EXPECT_EQ(h->plane_count, c.planes);
    const sync_shm_layout* l = sync_shm_get_layout(reader);
    EXPECT_EQ(l->format, uint32_t(c.format));
    EXPECT_EQ(l->width, c.width);
    EXPECT_EQ(l->height, c.height);
    EXPECT_EQ(l->frame_bytes, c.bytes);
    EXPECT_STREQ(sync_shm_format_name(l->format), syncd::media::pixel_format_name(c.format));
    ASSERT_EQ(l->plane_count, c.planes);
    for (uint32_t i = 0; i < c.planes; ++i) {
      SCOPED_TRACE("plane " + std::to_string(i));
      // The header as syncd wrote it, and the reader's own computation, both equal syncd's.
      EXPECT_EQ(h->planes[i].offset, ring.layout.planes[i].offset);
      EXPECT_EQ(h->planes[i].stride, ring.layout.planes[i].stride);
      EXPECT_EQ(h->planes[i].rows, ring.layout.planes[i].rows);
      EXPECT_EQ(l->planes[i].offset, ring.layout.planes[i].offset);
      EXPECT_EQ(l->planes[i].stride, ring.layout.planes[i].stride);
      EXPECT_EQ(l->planes[i].rows, ring.layout.planes[i].rows);
    }
    for (uint32_t i = c.planes; i < SYNC_SHM_MAX_PLANES; ++i) EXPECT_EQ(h->planes[i].stride, 0u);
    // The last plane ends where the frame does: nothing unaccounted for, nothing overlapping.
    const sync_shm_plane& last = l->planes[c.planes - 1];
    EXPECT_EQ(last.offset + uint64_t(last.stride) * last.rows, c.bytes);

    // A frame comes back whole: its size is the format's, and its last (chroma) byte arrives.
    FrameSlot* s = ring.pool->acquire();
    ASSERT_NE(s, nullptr);
    std::memset(s->pixels, 0x11, c.bytes);
    s->pixels[c.bytes - 1] = 0x77;
    s->info.sequence = 9;
    ring.writer->publish(*s, 1);
    FramePool::release(s);
    sync_shm_frame f;
    ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
    EXPECT_EQ(f.bytes, c.bytes);
    EXPECT_EQ(f.sequence, 9u);
    EXPECT_EQ(f.pixels[c.bytes - 1], 0x77);
    EXPECT_EQ(sync_shm_check(reader, &f), SYNC_SHM_OK);
    sync_shm_close(reader);
  }
}

TEST(ShmFormats, ReaderRefusesAFrameSizeThatIsNotTheFormats) {
  FormatRing ring(PixelFormat::kNv12, 64, 32, "size");
  ASSERT_TRUE(ring.pool);
  ASSERT_EQ(ring.open_status(), SYNC_SHM_OK);
  // What a writer that still assumed 4 bytes a pixel would have written.
  ring.tamper([](sync_shm_header& h) { h.frame_bytes = uint64_t(h.width) * h.height * 4; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ring.tamper([](sync_shm_header& h) { h.frame_bytes = uint64_t(h.width) * h.height * 3 / 2; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_OK);
}

TEST(ShmFormats, ReaderRefusesPlanesThatAreNotTheFormats) {
  FormatRing ring(PixelFormat::kI420, 64, 32, "planes");
  ASSERT_TRUE(ring.pool);
  ASSERT_EQ(ring.open_status(), SYNC_SHM_OK);
  ring.tamper([](sync_shm_header& h) { h.planes[1].stride = h.width; });  // NV12's chroma stride
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ring.tamper([](sync_shm_header& h) { h.planes[1].stride = h.width / 2; });
  ring.tamper([](sync_shm_header& h) { h.planes[2].offset += 1; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ring.tamper([](sync_shm_header& h) { h.planes[2].offset -= 1; });
  ring.tamper([](sync_shm_header& h) { h.plane_count = 2; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ring.tamper([](sync_shm_header& h) { h.plane_count = 3; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_OK);
  // Same bytes, other format: I420's planes are not NV12's.
  ring.tamper([](sync_shm_header& h) { h.format = SYNC_SHM_FORMAT_NV12; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ring.tamper([](sync_shm_header& h) { h.format = 5; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
}

TEST(ShmFormats, ReaderRefusesOddSizesForFourTwoZero) {
  FormatRing ring(PixelFormat::kNv12, 64, 32, "odd");
  ASSERT_TRUE(ring.pool);
  // 63 x 32: its chroma would not cover whole 2x2 blocks, whatever frame_bytes says.
  ring.tamper([](sync_shm_header& h) {
    h.width = 63;
    h.frame_bytes = 63 * 32 + 32 * 32;
    h.planes[0].stride = 63;
    h.planes[1] = {63 * 32, 64, 16};
  });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
}

TEST(ShmFormats, RingFromAWriterBeforePlaneFieldsStillOpensAsOnePlane) {
  FormatRing rgba(PixelFormat::kBgra8, 16, 8, "old-bgra");
  ASSERT_TRUE(rgba.pool);
  rgba.tamper([](sync_shm_header& h) {
    h.plane_count = 0;
    std::memset(h.planes, 0, sizeof h.planes);
  });
  sync_shm_reader* r = nullptr;
  ASSERT_EQ(sync_shm_open(rgba.path.c_str(), &r), SYNC_SHM_OK);
  const sync_shm_layout* l = sync_shm_get_layout(r);
  EXPECT_EQ(l->plane_count, 1u);  // filled in by the reader
  EXPECT_EQ(l->planes[0].stride, 16u * 4);
  EXPECT_EQ(l->planes[0].rows, 8u);
  EXPECT_EQ(l->frame_bytes, 16u * 8 * 4);
  sync_shm_close(r);

  // Such a writer never wrote a 4:2:0 ring, so no planes there means a broken header.
  FormatRing nv12(PixelFormat::kNv12, 16, 8, "old-nv12");
  ASSERT_TRUE(nv12.pool);
  nv12.tamper([](sync_shm_header& h) { h.plane_count = 0; });
  EXPECT_EQ(nv12.open_status(), SYNC_SHM_EFORMAT);
}

TEST(ShmFormats, WriterRefusesALayoutTheHeaderCannotHold) {
  syncd::media::ShmRegionError error;
  FrameLayout none;  // no planes
  const std::string path = "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-none";
  EXPECT_FALSE(ShmRegion::create(path, "x", none, 2, error));
  EXPECT_STREQ(error.code, "shm_bad_layout");
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}
