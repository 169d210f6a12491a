// The writer side of the shared-memory frame ring (layout: include/sync/shm_ring.h).
//
// A region is created 0600 for one stream, sized from its geometry and slot count, mapped
// MAP_SHARED and pre-faulted. It is created with O_EXCL | O_NOFOLLOW: a file already at the path
// is removed first only when it is a regular file of syncd's own user (one left by a syncd that
// died); anything else (another user's file, a symlink, a FIFO) is refused, never written. It
// becomes the memory of that stream's frame pool (a PoolBacking), so socket bytes land directly
// where readers read them. Unlinked when the pool is destroyed, if the path still names it.
//
// Thread: the loop thread (syncd's only writer).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "media/frame_pool.h"
#include "media/pixel_format.h"
#include "sync/shm_ring.h"

namespace syncd::media {

// Why a region could not be created: a stable code (docs/security.md, "Shared memory") and a
// message that names the path and the cause.
struct ShmRegionError {
  const char* code = "";  // "shm_foreign_file", "shm_exists", "shm_bad_layout", "shm_system"
  std::string message;
};

class ShmRegion final : public PoolBacking {
 public:
  // Creates (replacing a stale file of this user at path) and maps a region whose slots hold
  // frames of `layout` (its format, geometry, planes and size go into the header for readers).
  // nullptr with error set on failure, also for a layout with no planes or more than the header
  // holds.
  static std::unique_ptr<ShmRegion> create(const std::string& path, const std::string& stream,
                                           const FrameLayout& layout, uint32_t slot_count,
                                           ShmRegionError& error);
  // Marks the ring ended, unmaps, and unlinks the path if it still names this region's file
  // (a later ring at the same path, made while this one's pool was still held, stays) and
  // unlink_path() has not run. May run on a pool thread (the pool's last reference).
  ~ShmRegion() override;
  // The stream ended: removes the path now, if it still names this region's file, so that the
  // destructor, which may run on another thread, never races a new ring at the same path. Loop
  // thread (the writer's).
  void unlink_path();

  // PoolBacking: the seqlock goes odd before the socket writes a byte into the slot.
  void on_acquire(FrameSlot& slot) override;

  // The slot is complete: publish it to readers and wake them.
  void publish(const FrameSlot& slot, uint64_t publish_time_ns);
  // Readers see the stream as ended (they stop waiting).
  void mark_ended();
  // Tells readers the writer is alive (shm_ring.h, SYNC_SHM_HEARTBEAT_PERIOD_MS): one store.
  void heartbeat(uint64_t now_ns);

  uint8_t* first_slot() const { return base_ + header()->pixels_offset; }
  size_t slot_stride() const { return size_t(header()->slot_stride); }
  uint32_t slot_count() const { return header()->slot_count; }
  uint64_t frames_published() const { return published_; }
  const std::string& path() const { return path_; }
  uint64_t generation() const { return header()->generation; }
  sync_shm_header* header() const { return reinterpret_cast<sync_shm_header*>(base_); }

 private:
  ShmRegion() = default;
  sync_shm_slot* slot_meta(uint32_t index) const;

  std::string path_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t published_ = 0;
  dev_t dev_ = 0;  // the file created, to recognise it at the path later
  ino_t ino_ = 0;
  bool unlinked_ = false;
};

// The default region path for this user: /dev/shm/sync-<uid>.frames.
std::string default_region_path();

}  // namespace syncd::media
