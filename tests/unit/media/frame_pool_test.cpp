#include "media/frame_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

using syncd::media::FramePool;
using syncd::media::FrameSlot;

TEST(FramePool, AcquireUntilFullThenRefuse) {
  FramePool* pool = FramePool::create(1000, 3);
  ASSERT_NE(pool, nullptr);
  FrameSlot* a = pool->acquire();
  FrameSlot* b = pool->acquire();
  FrameSlot* c = pool->acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(pool->acquire(), nullptr);
  EXPECT_EQ(pool->slots_in_use(), 3u);
  FramePool::release(b);
  FrameSlot* d = pool->acquire();
  EXPECT_EQ(d, b);
  FramePool::release(a);
  FramePool::release(c);
  FramePool::release(d);
  EXPECT_EQ(pool->slots_in_use(), 0u);
  pool->drop_ref();
}

TEST(FramePool, RetainKeepsSlotUntilLastRelease) {
  FramePool* pool = FramePool::create(64, 1);
  FrameSlot* s = pool->acquire();
  FramePool::retain(s);
  FramePool::release(s);
  EXPECT_EQ(pool->acquire(), nullptr);
  FramePool::release(s);
  FrameSlot* again = pool->acquire();
  EXPECT_EQ(again, s);
  FramePool::release(again);
  pool->drop_ref();
}

TEST(FramePool, OutlivesOwnerWhileSlotHeld) {
  FramePool* pool = FramePool::create(4096, 2);
  FrameSlot* s = pool->acquire();
  s->pixels[4095] = 7;  // memory still mapped
  pool->drop_ref();     // the owner lets go first
  EXPECT_EQ(s->pixels[4095], 7);
  FramePool::release(s);  // last reference: pool freed here (ASan checks)
}

TEST(FramePool, SlotsAreDistinctAndPageAligned) {
  FramePool* pool = FramePool::create(8294400, 2);
  FrameSlot* a = pool->acquire();
  FrameSlot* b = pool->acquire();
  EXPECT_GE(size_t(std::abs(b->pixels - a->pixels)), size_t(8294400));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->pixels) % 4096, 0u);
  FramePool::release(a);
  FramePool::release(b);
  pool->drop_ref();
}

TEST(FramePool, LeastRecentReuseTakesTheSlotReleasedLongestAgo) {
  // Shared-memory readers read the newest frame in place; it must be the last slot rewritten.
  alignas(64) static uint8_t memory[3 * 64];
  FramePool* pool =
      FramePool::create_in(memory, 64, 3, 64, nullptr, syncd::media::SlotReuse::kLeastRecent);
  FrameSlot* a = pool->acquire();
  FramePool::release(a);
  FrameSlot* b = pool->acquire();
  EXPECT_NE(b, a);
  FramePool::release(b);
  FrameSlot* c = pool->acquire();
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  FramePool::release(c);
  FrameSlot* again = pool->acquire();
  EXPECT_EQ(again, a);  // now the oldest release
  FramePool::release(again);
  pool->drop_ref();
}

TEST(FramePool, AnonymousPoolReusesTheSlotReleasedLast) {
  // The slot still in cache is the one handed out again, even with others free.
  FramePool* pool = FramePool::create(64, 3);
  FrameSlot* a = pool->acquire();
  FrameSlot* b = pool->acquire();
  FramePool::release(a);
  FramePool::release(b);
  FrameSlot* next = pool->acquire();
  EXPECT_EQ(next, b);
  FrameSlot* after = pool->acquire();
  EXPECT_EQ(after, a);
  FrameSlot* last = pool->acquire();
  EXPECT_NE(last, a);
  EXPECT_NE(last, b);
  EXPECT_EQ(pool->acquire(), nullptr);
  FramePool::release(next);
  FramePool::release(after);
  FramePool::release(last);
  pool->drop_ref();
}

TEST(FramePool, AnonymousPoolIsAlignedForHugePages) {
  FramePool* pool = FramePool::create(8294400, 2);
  FrameSlot* a = pool->acquire();
  FrameSlot* b = pool->acquire();
  const uint8_t* first = std::min(a->pixels, b->pixels);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2u << 20), 0u);
  EXPECT_EQ(pool->mapped_bytes() % (2u << 20), 0u);
  EXPECT_GE(pool->mapped_bytes(), size_t(2 * 8294400));
  FramePool::release(a);
  FramePool::release(b);
  pool->drop_ref();
}
