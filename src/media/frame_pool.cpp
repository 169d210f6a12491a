#include "media/frame_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace syncd::media {

namespace {
constexpr size_t kHugePageBytes = size_t(2) << 20;  // x86-64 and arm64 (4 KiB granule)

class AnonymousMapping final : public PoolBacking {
 public:
  AnonymousMapping(void* memory, size_t bytes) : memory_(memory), bytes_(bytes) {}
  ~AnonymousMapping() override { ::munmap(memory_, bytes_); }

 private:
  void* memory_;
  size_t bytes_;
};
}  // namespace

FramePool* FramePool::create(size_t slot_bytes, uint32_t slot_count, Prefault prefault) {
  if (slot_count == 0 || slot_count > kMaxSlots || slot_bytes == 0) return nullptr;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t stride = (slot_bytes + page - 1) / page * page;
  // A 1080p frame spans 2025 small pages; the kernel's copy into a slot and every pass over it
  // walk them all. Huge pages cut the TLB misses (kernel copy ~0.74 -> ~0.59 ms a frame,
  // docs/benchmarks.md), and the kernel only gives them to 2 MiB-aligned ranges, so the mapping
  // is aligned by hand: map 2 MiB extra, unmap what lies outside the aligned range.
  const size_t total = (stride * slot_count + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* raw = ::mmap(nullptr, total + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* base = static_cast<uint8_t*>(raw);
  auto* aligned = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(base) + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1));
  const size_t head = size_t(aligned - base);  // the mapping's 2 MiB extra: head + tail
  if (head > 0) ::munmap(base, head);
  if (head < kHugePageBytes) ::munmap(aligned + total, kHugePageBytes - head);
  ::madvise(aligned, total, MADV_HUGEPAGE);  // advisory: small pages when the kernel says no
  FramePool* pool =
      create_in(aligned, stride, slot_count, slot_bytes,
                std::make_unique<AnonymousMapping>(aligned, total), SlotReuse::kMostRecent);
  pool->mapped_bytes_ = total;
  if (prefault == Prefault::kNow) pool->prefault();
  return pool;
}

void FramePool::prefault() {
  // Every page is made ready before the first frame, so that resident memory is flat from setup
  // on and the first frames do not pay for it on the loop. Two passes, in steps of 2 MiB:
  //  - MADV_POPULATE_WRITE (Linux 5.14) allocates and maps the pages, leaving bytes as they are;
  //  - then one atomic add of zero to a byte of every page, from this thread. On the VMs syncd
  //    runs on in CI (Firecracker), the first user-space access to a page after the kernel mapped
  //    it still costs ~5 us (no fault is counted): 10-20 ms for the first frame into each 1080p
  //    slot instead of 0.5 ms, which made the first frames of every stream late by one slot
  //    count (docs/benchmarks.md, "First frames"). Adding zero leaves the bytes as they are
  //    even if a writer is already at work, and on older kernels (EINVAL) it also faults pages in.
  // Steps, because the kernel holds the process's memory-map lock while it populates: a thread
  // that maps memory meanwhile (the loop's malloc of a large reply) would wait for all of a
  // 1 GiB pool, and every page fault behind that thread with it.
  uint8_t* start = first_slot_;
  const size_t bytes = slot_stride_ * slot_count_;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < bytes; off += kHugePageBytes) {
    const size_t step = std::min(kHugePageBytes, bytes - off);
    ::madvise(start + off, step, MADV_POPULATE_WRITE);  // advisory: the pass below suffices
    for (size_t p = off; p < off + step; p += page)
      __atomic_fetch_add(start + p, uint8_t(0), __ATOMIC_RELAXED);
  }
}

void FramePool::charge_to(std::shared_ptr<std::atomic<size_t>> account) {
  account->fetch_add(mapped_bytes_, std::memory_order_relaxed);
  account_ = std::move(account);
}

FramePool* FramePool::create_in(uint8_t* first_slot, size_t slot_stride, uint32_t slot_count,
                                size_t slot_bytes, std::unique_ptr<PoolBacking> backing,
                                SlotReuse reuse) {
  if (slot_count == 0 || slot_count > kMaxSlots) return nullptr;
  auto* pool = new FramePool();
  pool->reuse_ = reuse;
  pool->backing_ = std::move(backing);
  pool->first_slot_ = first_slot;
  pool->slot_stride_ = slot_stride;
  pool->mapped_bytes_ = slot_stride * slot_count;
  pool->slot_bytes_ = slot_bytes;
  pool->slot_count_ = slot_count;
  pool->slots_ = std::make_unique<FrameSlot[]>(slot_count);
  for (uint32_t i = 0; i < slot_count; ++i) {
    FrameSlot& s = pool->slots_[i];
    s.pixels = first_slot + size_t(i) * slot_stride;
    s.index = i;
    s.pool = pool;
    s.released_at = i;  // first use in index order
  }
  pool->release_clock_.store(slot_count, std::memory_order_relaxed);
  pool->free_mask_.store(slot_count == 64 ? ~uint64_t(0) : (uint64_t(1) << slot_count) - 1,
                         std::memory_order_release);
  return pool;
}

FramePool::~FramePool() {
  backing_.reset();  // the memory is unmapped here
  if (account_) account_->fetch_sub(mapped_bytes_, std::memory_order_relaxed);
}

FrameSlot* FramePool::acquire() {
  // Only this thread clears bits, so the set seen here can only grow until the fetch_and below.
  uint64_t mask = free_mask_.load(std::memory_order_acquire);
  if (mask == 0) return nullptr;
  FrameSlot* best = nullptr;
  for (uint64_t m = mask; m != 0; m &= m - 1) {
    FrameSlot* s = &slots_[__builtin_ctzll(m)];
    if (!best || (reuse_ == SlotReuse::kMostRecent ? s->released_at > best->released_at
                                                   : s->released_at < best->released_at))
      best = s;
  }
  free_mask_.fetch_and(~(uint64_t(1) << best->index), std::memory_order_relaxed);
  best->refs.store(1, std::memory_order_relaxed);
  best->info = FrameInfo{};
  refs_.fetch_add(1, std::memory_order_relaxed);
  if (backing_) backing_->on_acquire(*best);
  return best;
}

void FramePool::release(FrameSlot* slot) {
  // acq_rel: the thread that frees the slot sees every write other holders made to it.
  if (slot->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) slot->pool->give_back(slot);
}

bool FramePool::try_pin(FrameSlot* slot) {
  FramePool* pool = slot->pool;
  uint32_t pins = slot->pins.load(std::memory_order_relaxed);
  for (;;) {
    if (pins > 0) {
      // Already pinned: one more consumer of the same slot costs the cap nothing.
      if (slot->pins.compare_exchange_weak(pins, pins + 1, std::memory_order_relaxed)) break;
      continue;
    }
    // The slot's first pin takes one of the pool's pinned slots, if the cap allows.
    uint32_t pinned = pool->pinned_slots_.load(std::memory_order_relaxed);
    do {
      if (pinned >= pool->pin_cap()) {
        pool->pins_refused_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (
        !pool->pinned_slots_.compare_exchange_weak(pinned, pinned + 1, std::memory_order_relaxed));
    if (slot->pins.compare_exchange_strong(pins, 1, std::memory_order_relaxed)) break;
    // Someone pinned it meanwhile: give the reservation back and join their pin.
    pool->pinned_slots_.fetch_sub(1, std::memory_order_relaxed);
  }
  retain(slot);
  return true;
}

void FramePool::unpin(FrameSlot* slot) {
  FramePool* pool = slot->pool;
  if (slot->pins.fetch_sub(1, std::memory_order_relaxed) == 1)
    pool->pinned_slots_.fetch_sub(1, std::memory_order_relaxed);
  release(slot);  // may free the pool: nothing after this touches it
}

uint32_t FramePool::slots_in_use() const {
  return slot_count_ - uint32_t(__builtin_popcountll(free_mask_.load(std::memory_order_relaxed)));
}

void FramePool::give_back(FrameSlot* slot) {
  slot->released_at = release_clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  free_mask_.fetch_or(uint64_t(1) << slot->index, std::memory_order_release);
  drop_ref();
}

void FramePool::drop_ref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

}  // namespace syncd::media
