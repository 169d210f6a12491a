#include "media/frame_pool.h"

#include <sys/mman.h>
#include <unistd.h>

namespace syncd::media {

namespace {
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
  const size_t total = stride * slot_count;
  // MAP_POPULATE faults every page in now, not on the first frames: resident memory is flat from
  // setup on and the first frames do not pay for page faults.
  void* memory = ::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  ::madvise(memory, total, MADV_HUGEPAGE);  // fewer TLB misses on 8 MB sweeps; advisory only
  FramePool* pool = create_in(static_cast<uint8_t*>(memory), stride, slot_count, slot_bytes,
                              std::make_unique<AnonymousMapping>(memory, total));
  pool->mapped_bytes_ = total;
  return pool;
}

FramePool* FramePool::create_in(uint8_t* first_slot, size_t slot_stride, uint32_t slot_count,
                                size_t slot_bytes, std::unique_ptr<PoolBacking> backing) {
  auto* pool = new FramePool();
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
  FrameSlot* slot = &slots_[free_[free_head_]];
  free_head_ = (free_head_ + 1) % free_.size();
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
