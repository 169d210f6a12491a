#include "media/frame_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace syncd::media {

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

  auto* pool = new FramePool();
  pool->memory_ = static_cast<uint8_t*>(memory);
  pool->mapped_bytes_ = total;
  pool->slot_bytes_ = slot_bytes;
  pool->slots_.resize(slot_count);
  pool->free_.reserve(slot_count);
  for (uint32_t i = 0; i < slot_count; ++i) {
    FrameSlot& s = pool->slots_[i];
    s.pixels = pool->memory_ + size_t(i) * stride;
    s.index = i;
    s.pool = pool;
    pool->free_.push_back(slot_count - 1 - i);  // slot 0 is handed out first
  }
  return pool;
}

FramePool::~FramePool() {
  if (memory_) ::munmap(memory_, mapped_bytes_);
}

FrameSlot* FramePool::acquire() {
  if (free_.empty()) return nullptr;
  FrameSlot* slot = &slots_[free_.back()];
  free_.pop_back();
  slot->refs = 1;
  slot->info = FrameInfo{};
  ++refs_;
  return slot;
}

void FramePool::release(FrameSlot* slot) {
  if (--slot->refs == 0) slot->pool->give_back(slot);
}

void FramePool::give_back(FrameSlot* slot) {
  free_.push_back(slot->index);  // never reallocates: capacity == slot count
  drop_ref();
}

void FramePool::drop_ref() {
  if (--refs_ == 0) delete this;
}

}  // namespace syncd::media
