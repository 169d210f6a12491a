#include "media/frame_pool.h"

#include <sys/mman.h>
#include <unistd.h>

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

FramePool* FramePool::create(size_t slot_bytes, uint32_t slot_count) {
  if (slot_count == 0 || slot_bytes == 0) return nullptr;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t stride = (slot_bytes + page - 1) / page * page;
  // A 1080p frame spans 2025 small pages; the kernel's copy into a slot and every pass over it
  // walk them all. Huge pages cut the TLB misses (kernel copy ~0.74 -> ~0.59 ms a frame,
  // docs/benchmarks.md), and the kernel only gives them to 2 MiB-aligned ranges, so the mapping
  // is aligned by hand: map 2 MiB extra, unmap what lies outside the aligned range.
  const size_t total =
      (stride * slot_count + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
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
  // Fault every page in now, not on the first frames: resident memory is flat from setup on and
  // the first frames do not pay for page faults. MADV_POPULATE_WRITE (Linux 5.14) does it in one
  // call; older kernels get a write to every page.
  if (::madvise(aligned, total, MADV_POPULATE_WRITE) != 0) {
    for (size_t off = 0; off < total; off += page) aligned[off] = 0;
  }
  FramePool* pool = create_in(aligned, stride, slot_count, slot_bytes,
                              std::make_unique<AnonymousMapping>(aligned, total),
                              SlotReuse::kMostRecent);
  pool->mapped_bytes_ = total;
  return pool;
}

FramePool* FramePool::create_in(uint8_t* first_slot, size_t slot_stride, uint32_t slot_count,
                                size_t slot_bytes, std::unique_ptr<PoolBacking> backing,
                                SlotReuse reuse) {
  auto* pool = new FramePool();
  pool->reuse_ = reuse;
  pool->backing_ = std::move(backing);
  pool->mapped_bytes_ = slot_stride * slot_count;
  pool->slot_bytes_ = slot_bytes;
  pool->slots_.resize(slot_count);
  pool->free_.resize(slot_count);
  for (uint32_t i = 0; i < slot_count; ++i) {
    FrameSlot& s = pool->slots_[i];
    s.pixels = first_slot + size_t(i) * slot_stride;
    s.index = i;
    s.pool = pool;
    pool->free_[i] = i;
  }
  pool->free_count_ = slot_count;
  return pool;
}

FramePool::~FramePool() = default;  // the backing releases the memory

FrameSlot* FramePool::acquire() {
  if (free_count_ == 0) return nullptr;
  FrameSlot* slot;
  if (reuse_ == SlotReuse::kMostRecent) {
    slot = &slots_[free_[(free_head_ + free_count_ - 1) % free_.size()]];
  } else {
    slot = &slots_[free_[free_head_]];
    free_head_ = (free_head_ + 1) % free_.size();
  }
  --free_count_;
  slot->refs = 1;
  slot->info = FrameInfo{};
  ++refs_;
  if (backing_) backing_->on_acquire(*slot);
  return slot;
}

void FramePool::release(FrameSlot* slot) {
  if (--slot->refs == 0) slot->pool->give_back(slot);
}

void FramePool::give_back(FrameSlot* slot) {
  free_[(free_head_ + free_count_) % free_.size()] = slot->index;
  ++free_count_;
  drop_ref();
}

void FramePool::drop_ref() {
  if (--refs_ == 0) delete this;
}

}  // namespace syncd::media
