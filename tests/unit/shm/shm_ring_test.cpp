#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "media/publishers/shm_publisher.h"
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
      // An access unit a slot, of up to an I420 frame's bytes (odd sizes rounded up).
      {PixelFormat::kH264, 1920, 1080, 1, 1920 * 1080 * 3 / 2},
      {PixelFormat::kH264, 3, 3, 1, 9 + 2 * 4},
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
    s->info.bytes = c.bytes;
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

// Access units of any size up to the slot come back at their own size; a raw format's frame is
// always the whole layout, whatever the slot's payload field says.
TEST(ShmFormats, AccessUnitsComeBackAtTheirOwnSize) {
  FormatRing ring(PixelFormat::kH264, 64, 32, "h264-sizes");
  ASSERT_TRUE(ring.pool);
  sync_shm_reader* reader = nullptr;
  ASSERT_EQ(sync_shm_open(ring.path.c_str(), &reader), SYNC_SHM_OK);
  uint64_t sequence = 0;
  for (size_t size : {size_t(1), size_t(1000), ring.layout.bytes}) {
    FrameSlot* s = ring.pool->acquire();
    ASSERT_NE(s, nullptr);
    std::memset(s->pixels, int(size & 0xFF), size);
    s->info.sequence = ++sequence;
    s->info.bytes = size;
    ring.writer->publish(*s, 1);
    FramePool::release(s);
    sync_shm_frame f;
    ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
    EXPECT_EQ(f.bytes, size);
    EXPECT_EQ(f.sequence, sequence);
    EXPECT_EQ(f.pixels[size - 1], uint8_t(size & 0xFF));
  }
  sync_shm_close(reader);

  FormatRing raw(PixelFormat::kI420, 64, 32, "i420-payload");
  ASSERT_TRUE(raw.pool);
  ASSERT_EQ(sync_shm_open(raw.path.c_str(), &reader), SYNC_SHM_OK);
  FrameSlot* s = raw.pool->acquire();
  ASSERT_NE(s, nullptr);
  s->info.sequence = 1;
  s->info.bytes = 5;  // a raw frame is its layout, whatever it says
  raw.writer->publish(*s, 1);
  FramePool::release(s);
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.bytes, raw.layout.bytes);
  sync_shm_close(reader);
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

namespace {

// Rewrites header fields of the ring file at path, as another program (or a forger) would.
template <typename F>
void tamper_file(const std::string& path, F&& change) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* m = ::mmap(nullptr, sizeof(sync_shm_header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  change(*static_cast<sync_shm_header*>(m));
  ::munmap(m, sizeof(sync_shm_header));
}

// A pid that names no process: a child that has exited and been reaped.
pid_t vanished_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

constexpr uint32_t kNobody = 65534;

}  // namespace

// --- The reader against crafted files (issue 14, item 9) ---

TEST(ShmTrust, ReaderRefusesARingOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another uid";
  FormatRing ring(PixelFormat::kRgba8, 16, 8, "foreign");
  ASSERT_TRUE(ring.pool);
  // What another user could plant: a well-formed ring, world-writable, owned by them.
  ASSERT_EQ(::chmod(ring.path.c_str(), 0666), 0);
  ASSERT_EQ(::chown(ring.path.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EOWNER);
  sync_shm_reader* r = nullptr;
  // A reader that names that uid as the writer still refuses a file anyone may write.
  EXPECT_EQ(sync_shm_open_as(ring.path.c_str(), kNobody, &r), SYNC_SHM_EMODE);
  EXPECT_EQ(r, nullptr);
  ASSERT_EQ(::chmod(ring.path.c_str(), 0640), 0);
  ASSERT_EQ(sync_shm_open_as(ring.path.c_str(), kNobody, &r), SYNC_SHM_OK);
  sync_shm_close(r);
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EOWNER);  // still not this user's
}

TEST(ShmTrust, ReaderRefusesARingOthersMayWrite) {
  FormatRing ring(PixelFormat::kRgba8, 16, 8, "mode");
  ASSERT_TRUE(ring.pool);
  for (mode_t mode : {0620, 0602, 0666}) {
    ASSERT_EQ(::chmod(ring.path.c_str(), mode), 0);
    EXPECT_EQ(ring.open_status(), SYNC_SHM_EMODE) << std::oct << mode;
  }
  ASSERT_EQ(::chmod(ring.path.c_str(), 0644), 0);  // readable by others is fine
  EXPECT_EQ(ring.open_status(), SYNC_SHM_OK);
}

TEST(ShmTrust, ReaderRefusesSymlinksAndFifos) {
  FormatRing ring(PixelFormat::kRgba8, 16, 8, "target");
  ASSERT_TRUE(ring.pool);
  const std::string link = ring.path + "-link";
  ASSERT_EQ(::symlink(ring.path.c_str(), link.c_str()), 0);
  sync_shm_reader* r = nullptr;
  EXPECT_EQ(sync_shm_open(link.c_str(), &r), SYNC_SHM_EOWNER);
  ::unlink(link.c_str());
  const std::string fifo = ring.path + "-fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sync_shm_open(fifo.c_str(), &r), SYNC_SHM_EOWNER);  // without blocking in open()
  EXPECT_LT(elapsed_ms(start), 1000);
  ::unlink(fifo.c_str());
}

TEST(ShmTrust, ReaderRefusesSizesAndOffsetsOutsideTheFile) {
  FormatRing ring(PixelFormat::kRgba8, 16, 8, "bounds");
  ASSERT_TRUE(ring.pool);
  ASSERT_EQ(ring.open_status(), SYNC_SHM_OK);
  sync_shm_header good;
  tamper_file(ring.path, [&](sync_shm_header& h) { good = h; });
  struct Case {
    const char* what;
    void (*forge)(sync_shm_header&);
  };
  const Case cases[] = {
      {"slot_stride 2^63 (times 2 slots wraps to 0)",
       [](sync_shm_header& h) { h.slot_stride = uint64_t(1) << 63; }},
      {"slot_stride 2^62 times 4 slots wraps to 0",
       [](sync_shm_header& h) {
         h.slot_stride = uint64_t(1) << 62;
         h.slot_count = 4;
       }},
      {"slots_offset 2^40", [](sync_shm_header& h) { h.slots_offset = uint64_t(1) << 40; }},
      {"slots_offset + slot records wraps",
       [](sync_shm_header& h) { h.slots_offset = UINT64_MAX - 63; }},
      {"pixels_offset + pixels wraps",
       [](sync_shm_header& h) { h.pixels_offset = UINT64_MAX - 4095; }},
      {"slot records inside the header", [](sync_shm_header& h) { h.slots_offset = 64; }},
      {"slot records misaligned", [](sync_shm_header& h) { h.slots_offset = 260; }},
      {"region_bytes past the file", [](sync_shm_header& h) { h.region_bytes += 1; }},
      {"slot_count past the file", [](sync_shm_header& h) { h.slot_count = 4096; }},
      {"slot_count 0", [](sync_shm_header& h) { h.slot_count = 0; }},
      {"writer_pid 0 (a process group)", [](sync_shm_header& h) { h.writer_pid = 0; }},
      {"writer_pid negative as pid_t", [](sync_shm_header& h) { h.writer_pid = 0x80000000u; }},
      {"magic", [](sync_shm_header& h) { h.magic = 0x12345678; }},
      {"version 2", [](sync_shm_header& h) { h.version = 2; }},
      {"width 2^31", [](sync_shm_header& h) { h.width = 1u << 31; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tamper_file(ring.path, [&](sync_shm_header& h) {
      h = good;
      c.forge(h);
    });
    EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
    // The pure check says the same of the bytes alone.
    sync_shm_header copy;
    tamper_file(ring.path, [&](sync_shm_header& h) { copy = h; });
    sync_shm_layout layout;
    EXPECT_EQ(sync_shm_check_header(&copy, good.region_bytes, &layout), SYNC_SHM_EFORMAT);
  }
  tamper_file(ring.path, [&](sync_shm_header& h) { h = good; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_OK);
  // A file cut short of what its header describes.
  ASSERT_EQ(::truncate(ring.path.c_str(), off_t(good.pixels_offset + 1)), 0);
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
  ASSERT_EQ(::truncate(ring.path.c_str(), 100), 0);
  EXPECT_EQ(ring.open_status(), SYNC_SHM_EFORMAT);
}

TEST_F(Ring, GeometryRewrittenAfterOpenIsNeverUsed) {
  publish(1, 0x11);
  sync_shm_header before = *sync_shm_info(reader);
  // Rewritten under a reader that has already opened the ring: were it read again, the next
  // slot or pixel address would lie far outside the mapping.
  tamper_file(path, [](sync_shm_header& h) {
    h.slots_offset = uint64_t(1) << 40;
    h.pixels_offset = uint64_t(1) << 40;
    h.slot_stride = uint64_t(1) << 63;
    h.slot_count = 1u << 20;
    h.frame_bytes = uint64_t(1) << 40;
  });
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 1u);
  EXPECT_EQ(f.bytes, 128u);
  EXPECT_EQ(f.pixels[127], 0x11);
  EXPECT_EQ(sync_shm_check(reader, &f), SYNC_SHM_OK);
  EXPECT_EQ(sync_shm_info(reader)->slots_offset, before.slots_offset);
  EXPECT_EQ(sync_shm_info(reader)->slot_stride, before.slot_stride);
  // A slot index past the ring is refused, not followed.
  tamper_file(path, [](sync_shm_header& h) {
    h.latest_slot = 1u << 20;
    h.write_counter += 1;
  });
  EXPECT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_EFORMAT);
  sync_shm_frame forged = f;
  forged.slot = 1u << 20;
  EXPECT_EQ(sync_shm_check(reader, &forged), SYNC_SHM_ETORN);
  tamper_file(path, [&](sync_shm_header& h) {  // the writer's own view, for its teardown
    const uint64_t counter = h.write_counter;
    h = before;
    h.write_counter = counter;
  });
}

TEST_F(Ring, NewestSlotOlderThanTheCounterTimesOutInsteadOfSpinning) {
  publish(1, 1);
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  // The counter says five frames more, but the newest slot still holds frame 1.
  tamper_file(path, [](sync_shm_header& h) { h.write_counter += 5; });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sync_shm_next(reader, 200, &f), SYNC_SHM_ETIMEDOUT);
  const int64_t took = elapsed_ms(start);
  EXPECT_GE(took, 190);
  EXPECT_LT(took, 1000);
  // It looked again after short waits rather than in a tight loop.
  EXPECT_LE(sync_shm_get_counters(reader).torn, 200u / 10 + 2);
  EXPECT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_ETIMEDOUT);
  tamper_file(path, [](sync_shm_header& h) { h.write_counter -= 5; });
}

// --- Writer liveness (issue 14, item 10) ---

TEST_F(Ring, NewRingHasAGenerationAndAFreshHeartbeat) {
  const sync_shm_header* h = sync_shm_info(reader);
  EXPECT_NE(h->generation, 0u);
  EXPECT_EQ(h->writer_pid, uint32_t(::getpid()));
  EXPECT_NE(h->heartbeat_ns, 0u);
  EXPECT_LE(h->heartbeat_ns, syncd::core::monotonic_ns());
  const uint64_t first = writer->generation();
  const std::string other = path + "-other";
  syncd::media::ShmRegionError error;
  auto second = ShmRegion::create(other, "unit", layout_of(PixelFormat::kRgba8, 8, 4), 2, error);
  ASSERT_TRUE(second) << error.message;
  EXPECT_NE(second->generation(), first);
  writer->heartbeat(123456789);
  EXPECT_EQ(writer->header()->heartbeat_ns, 123456789u);
}

TEST(ShmLiveness, WriterKilledIsReportedNotServed) {
  const std::string path = "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-killed";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the writer: one frame, then it waits to be killed (no heartbeat timer)
    syncd::media::ShmRegionError error;
    auto region = ShmRegion::create(path, "doomed", layout_of(PixelFormat::kRgba8, 8, 4), 2, error);
    if (!region) ::_exit(1);
    ShmRegion* w = region.get();
    FramePool* p = FramePool::create_in(w->first_slot(), w->slot_stride(), 2, 128,
                                        std::move(region), syncd::media::SlotReuse::kLeastRecent);
    FrameSlot* s = p->acquire();
    s->info.sequence = 1;
    w->publish(*s, 1);
    FramePool::release(s);
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  sync_shm_reader* reader = nullptr;
  ASSERT_EQ(sync_shm_open(path.c_str(), &reader), SYNC_SHM_OK);
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  ::kill(child, SIGKILL);  // leaves a live-state ring behind, as a crash would
  ::waitpid(child, nullptr, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sync_shm_next(reader, 3000, &f), SYNC_SHM_EDEAD);
  // Found by a liveness check (pid gone, heartbeat older than SYNC_SHM_PID_GONE_STALE_MS), long
  // before the timeout.
  EXPECT_LT(elapsed_ms(start), SYNC_SHM_PID_GONE_STALE_MS + 500);
  sync_shm_close(reader);
  // A reader that opens it now is refused rather than handed the last frame as if current.
  sync_shm_reader* late = nullptr;
  EXPECT_EQ(sync_shm_open(path.c_str(), &late), SYNC_SHM_EDEAD);
  EXPECT_EQ(late, nullptr);
  ::unlink(path.c_str());
}

TEST_F(Ring, HungWriterIsReportedWhenItsHeartbeatGoesStale) {
  publish(1, 1);
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  const uint64_t stale =
      syncd::core::monotonic_ns() - uint64_t(SYNC_SHM_HEARTBEAT_STALE_MS + 100) * 1'000'000u;
  tamper_file(path, [&](sync_shm_header& h) { h.heartbeat_ns = stale; });
  EXPECT_EQ(sync_shm_next(reader, 2000, &f), SYNC_SHM_EDEAD);
}

TEST(ShmLiveness, EachRuleOnItsOwn) {
  FormatRing ring(PixelFormat::kRgba8, 16, 8, "rules");
  ASSERT_TRUE(ring.pool);
  const uint64_t now = syncd::core::monotonic_ns();
  const uint32_t gone = uint32_t(vanished_pid());
  const uint32_t alive = uint32_t(::getpid());
  struct Case {
    const char* what;
    uint32_t pid;
    uint64_t beat;
    int status;
  };
  const Case cases[] = {
      {"heartbeat stale, pid alive (hung writer, or pid reused)", alive,
       now - uint64_t(SYNC_SHM_HEARTBEAT_STALE_MS + 500) * 1'000'000u, SYNC_SHM_EDEAD},
      {"pid gone, heartbeat fresh (a reader in another pid namespace)", gone, now, SYNC_SHM_OK},
      {"pid gone, heartbeat stopped", gone,
       now - uint64_t(SYNC_SHM_PID_GONE_STALE_MS + 200) * 1'000'000u, SYNC_SHM_EDEAD},
      {"writer without heartbeat, pid alive", alive, 0, SYNC_SHM_OK},
      {"writer without heartbeat, pid gone", gone, 0, SYNC_SHM_EDEAD},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ring.tamper([&](sync_shm_header& h) {
      h.writer_pid = c.pid;
      h.heartbeat_ns = c.beat;
    });
    EXPECT_EQ(ring.open_status(), c.status);
  }
  // An ended ring opens whatever its writer's state: it says itself that nothing more comes.
  ring.tamper([&](sync_shm_header& h) { h.state = SYNC_SHM_STATE_ENDED; });
  EXPECT_EQ(ring.open_status(), SYNC_SHM_OK);
}

TEST_F(Ring, ReplacedRingIsReportedAndReopenAttachesToTheNewOne) {
  publish(1, 1);
  sync_shm_frame f;
  ASSERT_EQ(sync_shm_next(reader, 0, &f), SYNC_SHM_OK);
  const uint64_t old_generation = sync_shm_info(reader)->generation;
  // syncd restarted: the new one removes the old file (its own user's) and creates another.
  syncd::media::ShmRegionError error;
  auto next = ShmRegion::create(path, "restarted", layout_of(PixelFormat::kRgba8, 8, 4), 2, error);
  ASSERT_TRUE(next) << error.message;
  ShmRegion* next_writer = next.get();
  FramePool* next_pool =
      FramePool::create_in(next_writer->first_slot(), next_writer->slot_stride(), 2, 128,
                           std::move(next), syncd::media::SlotReuse::kLeastRecent);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sync_shm_next(reader, 2000, &f), SYNC_SHM_EREPLACED);
  EXPECT_LT(elapsed_ms(start), 1000);
  ASSERT_EQ(sync_shm_reopen(reader), SYNC_SHM_OK);
  EXPECT_EQ(sync_shm_get_counters(reader).reopens, 1u);
  EXPECT_STREQ(sync_shm_info(reader)->stream_name, "restarted");
  EXPECT_NE(sync_shm_info(reader)->generation, old_generation);
  FrameSlot* s = next_pool->acquire();
  ASSERT_NE(s, nullptr);
  std::memset(s->pixels, 0x42, 128);
  s->info.sequence = 77;
  next_writer->publish(*s, 5);
  FramePool::release(s);
  ASSERT_EQ(sync_shm_next(reader, 100, &f), SYNC_SHM_OK);
  EXPECT_EQ(f.sequence, 77u);
  EXPECT_EQ(f.pixels[0], 0x42);
  // The old region goes (its pool is dropped) without unlinking its successor's file.
  pool->drop_ref();
  pool = nullptr;
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  next_pool->drop_ref();
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

// --- The writer and a planted file (issue 14, item 9) ---

namespace {
std::string planted_path(const char* tag) {
  return "/dev/shm/sync-unit-" + std::to_string(::getpid()) + "-planted-" + tag;
}
}  // namespace

TEST(ShmWriter, RefusesAFilePlantedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another uid";
  const std::string path = planted_path("foreign");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("forged", f);
  std::fclose(f);
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  syncd::media::ShmRegionError error;
  EXPECT_FALSE(ShmRegion::create(path, "x", layout_of(PixelFormat::kRgba8, 8, 4), 2, error));
  EXPECT_STREQ(error.code, "shm_foreign_file");
  EXPECT_NE(error.message.find("uid 65534"), std::string::npos) << error.message;
  struct stat st;  // left exactly as it was
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_size, 6);
  ::unlink(path.c_str());
}

TEST(ShmWriter, RefusesASymlinkOrFifoAtThePath) {
  const std::string target = planted_path("target");
  FILE* f = std::fopen(target.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const std::string link = planted_path("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  syncd::media::ShmRegionError error;
  EXPECT_FALSE(ShmRegion::create(link, "x", layout_of(PixelFormat::kRgba8, 8, 4), 2, error));
  EXPECT_STREQ(error.code, "shm_foreign_file");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));  // not removed
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);  // not written through
  ::unlink(link.c_str());
  ::unlink(target.c_str());
  const std::string fifo = planted_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ShmRegion::create(fifo, "x", layout_of(PixelFormat::kRgba8, 8, 4), 2, error));
  EXPECT_STREQ(error.code, "shm_foreign_file");
  ::unlink(fifo.c_str());
}

TEST(ShmWriter, ReplacesAStaleRingOfItsOwnUser) {
  const std::string path = planted_path("stale");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("left by a syncd that crashed", f);
  std::fclose(f);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  syncd::media::ShmRegionError error;
  auto region = ShmRegion::create(path, "x", layout_of(PixelFormat::kRgba8, 8, 4), 2, error);
  ASSERT_TRUE(region) << error.message;
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(uint64_t(st.st_size), region->header()->region_bytes);
  region.reset();
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(ShmPublisher, PlantedFileIsRefusedCountedAndShownThenTheStreamRunsWithoutRing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another uid";
  const std::string path = planted_path("publisher");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  syncd::media::ShmPublisher publisher({path, "", 8});
  syncd::media::StreamConfig config;
  config.name = "cam";
  config.width = 8;
  config.height = 4;
  EXPECT_EQ(publisher.create_pool(config, 8 * 4 * 4), nullptr);
  EXPECT_STREQ(publisher.last_error_code(), "shm_foreign_file");
  EXPECT_EQ(publisher.foreign_file_refusals(), 1u);
  syncd::telemetry::PrometheusText metrics;
  publisher.write_metrics(metrics, {});
  EXPECT_NE(metrics.text().find("syncd_shm_foreign_file_refusals_total 1"), std::string::npos)
      << metrics.text();
  ::unlink(path.c_str());
}

TEST(ShmPublisher, HeartbeatKeepsBeatingWhileNoFrameFlows) {
  const std::string path = planted_path("heartbeat");
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    syncd::media::ShmPublisher publisher({path, "", 2}, &loop);
    syncd::media::StreamConfig config;
    config.name = "quiet";
    config.width = 8;
    config.height = 4;
    FramePool* pool = publisher.create_pool(config, 8 * 4 * 4);
    ASSERT_NE(pool, nullptr);
    sync_shm_reader* r = nullptr;
    ASSERT_EQ(sync_shm_open(path.c_str(), &r), SYNC_SHM_OK);
    const uint64_t created = sync_shm_info(r)->heartbeat_ns;
    // Let the loop run for a quarter of a second with no frame.
    uv_timer_t stop;
    uv_timer_init(&loop, &stop);
    uv_timer_start(
        &stop, [](uv_timer_t* t) { uv_stop(t->loop); }, 250, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close(reinterpret_cast<uv_handle_t*>(&stop), nullptr);
    uint64_t beat = 0;
    tamper_file(path, [&](sync_shm_header& h) { beat = h.heartbeat_ns; });  // the live field
    // Beaten by the timer (every 50 ms) after creation, and recently.
    EXPECT_GT(beat, created);
    EXPECT_LT(syncd::core::monotonic_ns() - beat, uint64_t(150) * 1'000'000u);
    sync_shm_close(r);
    publisher.stop();
    pool->drop_ref();
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the publisher's timer closes
  EXPECT_EQ(uv_loop_close(&loop), 0);
}
