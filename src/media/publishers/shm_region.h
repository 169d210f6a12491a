// The writer side of the shared-memory frame ring (layout: include/sync/shm_ring.h).
//
// A region is created 0600 for one stream, sized from its geometry and slot count, mapped
// MAP_SHARED and pre-faulted. It becomes the memory of that stream's frame pool (a PoolBacking),
// so socket bytes land directly where readers read them. Unlinked when the pool is destroyed.
//
// Thread: the loop thread (syncd's only writer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "media/frame_pool.h"
#include "media/pixel_format.h"
#include "sync/shm_ring.h"

namespace syncd::media {

class ShmRegion final : public PoolBacking {
 public:
  // Creates (replacing a stale file at path) and maps a region whose slots hold frames of
  // `layout` (its format, geometry, planes and size go into the header for readers). nullptr
  // with error set on failure, also for a layout with no planes or more than the header holds.
  static std::unique_ptr<ShmRegion> create(const std::string& path, const std::string& stream,
                                           const FrameLayout& layout, uint32_t slot_count,
                                           std::string& error);
  ~ShmRegion() override;  // marks the ring ended, unmaps and unlinks

  // PoolBacking: the seqlock goes odd before the socket writes a byte into the slot.
  void on_acquire(FrameSlot& slot) override;

  // The slot is complete: publish it to readers and wake them.
  void publish(const FrameSlot& slot, uint64_t publish_time_ns);
  // Readers see the stream as ended (they stop waiting).
  void mark_ended();

  uint8_t* first_slot() const { return base_ + header()->pixels_offset; }
  size_t slot_stride() const { return size_t(header()->slot_stride); }
  uint32_t slot_count() const { return header()->slot_count; }
  uint64_t frames_published() const { return published_; }
  const std::string& path() const { return path_; }
  sync_shm_header* header() const { return reinterpret_cast<sync_shm_header*>(base_); }

 private:
  ShmRegion() = default;
  sync_shm_slot* slot_meta(uint32_t index) const;

  std::string path_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t published_ = 0;
};

// The default region path for this user: /dev/shm/sync-<uid>.frames.
std::string default_region_path();

}  // namespace syncd::media
