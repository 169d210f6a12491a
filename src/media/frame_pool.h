// A fixed pool of frame slots for one stream, allocated once at stream setup.
//
// Slots are reference-counted: the writer holds one reference while it fills the slot, and every
// consumer that keeps the frame past on_frame() takes another. When the last reference goes the
// slot returns to the free set. A pool with no free slot refuses at acquire(), which is how the
// newest frame is dropped at admission instead of queueing.
//
// Consumers that keep frames (a socket write in flight, a worker converting or verifying) pin
// them with try_pin(). The slots that carry pins are capped per pool at slot_count - 1, so
// whatever consumers do, the next frame always finds a free slot and ingest goes on at full
// rate; a consumer refused a pin drops the frame and counts it (docs/architecture.md, "Who may
// hold a frame"). The cap counts distinct slots: any number of consumers may pin the frame that
// is already pinned (a frame sent to ten receivers takes one slot, not ten).
//
// The pool's memory is one mapping, touched at setup (prefault()) so that resident memory is flat
// from the first frame on. Faulting in a big pool takes long (1 GiB: ~1-2 s), so its creator may
// defer that to a worker thread rather than hold syncd's loop. A pool charges its mapped bytes to
// an account (the registry's budget) until its memory is really unmapped, however long a
// consumer keeps it after its stream closed. The pool itself is reference-counted too (one
// reference per slot in use plus the owning stream's), so a stream may close while a consumer still
// holds one of its frames.
//
// Threads: acquire() and pin accounting's cap belong to one thread, the pool's writer (syncd's
// loop thread). retain(), release(), unpin() and drop_ref() are safe on any thread that holds a
// reference: a worker may drop the last one, and the slot (or the pool) is freed there. Reference
// counts and the free set are atomics; nothing here locks or allocates after create().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "media/frame_header.h"

namespace syncd::media {

// Per-frame facts recorded at ingest; the publishers read them.
struct FrameInfo {
  uint32_t stream_id = 0;
  uint32_t flags = 0;
  uint64_t sequence = 0;
  uint64_t capture_time_us = 0;  // producer's clock, as sent
  uint64_t content_hash = 0;     // as sent, valid when flags has kHasContentHash
  // XXH3-64 of the slot's pixels, computed by the ingest as each window landed in the slot in
  // order (core::ContentHasher); valid when received_hash_valid. A verifying publisher compares
  // it with content_hash rather than hashing the frame again.
  uint64_t received_hash = 0;
  bool received_hash_valid = false;
  uint64_t receive_start_ns = 0;  // first byte of the message (CLOCK_MONOTONIC)
  uint64_t accept_ns = 0;         // last byte received, frame admitted to publishers
  uint32_t width = 0;
  uint32_t height = 0;
  PixelFormat format = PixelFormat::kRgba8;
  size_t bytes = 0;  // the frame's bytes: all planes (the stream's layout), or an access unit's
};

class FramePool;
struct FrameSlot;

// Where a pool's memory comes from, and what happens to a slot when a writer takes it. The
// default is an anonymous mapping; the shared-memory publisher supplies a region that readers in
// other processes map, with a seqlock per slot (publishers/shm_publisher.h).
class PoolBacking {
 public:
  virtual ~PoolBacking() = default;  // releases the memory; runs when the pool is destroyed
  // A writer is about to fill the slot (loop thread).
  virtual void on_acquire(FrameSlot& slot) { (void)slot; }
};

// Which free slot acquire() hands out.
enum class SlotReuse : uint8_t {
  // The slot released most recently. It is the one most likely still in the CPU's caches, so the
  // kernel's copy into it and the publisher's pass over it hit L2/L3 rather than DRAM: with a
  // test publisher at max rate this took the kernel copy from ~0.99 to ~0.74 ms a 1080p frame
  // (docs/benchmarks.md). For pools only this process reads.
  kMostRecent,
  // The slot released longest ago, so the newest frame, the one a shared-memory reader in
  // another process is most likely still reading, is the last to be overwritten.
  kLeastRecent,
};

struct FrameSlot {
  uint8_t* pixels = nullptr;
  FrameInfo info;
  uint32_t index = 0;
  std::atomic<uint32_t> refs{0};
  std::atomic<uint32_t> pins{0};  // consumers' pins (each also holds a reference)
  // Order of the last release (the pool's release clock), written before the slot's free bit is
  // published: acquire() picks the most or least recent by it.
  uint64_t released_at = 0;
  FramePool* pool = nullptr;
};

class FramePool {
 public:
  // Slots a pool may have: the free set is one 64-bit word.
  static constexpr uint32_t kMaxSlots = 64;

  // Creates a pool of slot_count slots of slot_bytes each (rounded up to whole pages) in an
  // anonymous mapping backed by transparent huge pages where the kernel allows them, reusing
  // the most recently released slot first. Returns nullptr if the memory cannot be had. The
  // caller owns one pool reference. Control plane. With Prefault::kNow it faults every page in
  // (milliseconds to seconds); with kDeferred the caller calls prefault() later, on any thread.
  enum class Prefault { kNow, kDeferred };
  static FramePool* create(size_t slot_bytes, uint32_t slot_count,
                           Prefault prefault = Prefault::kNow);
  // A pool over memory the backing owns: slot i starts at first_slot + i * slot_stride.
  static FramePool* create_in(uint8_t* first_slot, size_t slot_stride, uint32_t slot_count,
                              size_t slot_bytes, std::unique_ptr<PoolBacking> backing,
                              SlotReuse reuse);

  // A free slot with one reference (the caller's), or nullptr when every slot is in use.
  // The writer's thread only.
  FrameSlot* acquire();
  // Any thread holding a reference.
  static void retain(FrameSlot* slot) { slot->refs.fetch_add(1, std::memory_order_relaxed); }
  // Drops a reference; the slot is free again at zero. Any thread holding a reference.
  static void release(FrameSlot* slot);

  // A consumer keeps the frame past on_frame(): takes a reference if the pool's pin cap allows
  // it (false: the consumer drops the frame). Any thread holding a reference.
  static bool try_pin(FrameSlot* slot);
  // Gives a pin back (and its reference). Any thread.
  static void unpin(FrameSlot* slot);

  void add_ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void drop_ref();

  // Faults every page of the slots in, without changing their bytes. Blocking (about 1-2 ms a
  // MiB without huge pages); any thread holding a reference, once per pool.
  void prefault();
  // Adds mapped_bytes() to *account now and takes them off when the memory is unmapped (on
  // whichever thread drops the last reference). Control plane, once per pool.
  void charge_to(std::shared_ptr<std::atomic<size_t>> account);

  size_t slot_bytes() const { return slot_bytes_; }
  uint32_t slot_count() const { return slot_count_; }
  uint32_t slots_in_use() const;
  // Slots that carry at least one pin.
  uint32_t pinned_slots() const { return pinned_slots_.load(std::memory_order_relaxed); }
  uint32_t pin_cap() const { return slot_count_ > 1 ? slot_count_ - 1 : 1; }
  uint64_t pins_refused() const { return pins_refused_.load(std::memory_order_relaxed); }
  size_t mapped_bytes() const { return mapped_bytes_; }

 private:
  FramePool() = default;
  ~FramePool();
  void give_back(FrameSlot* slot);

  std::unique_ptr<PoolBacking> backing_;
  std::shared_ptr<std::atomic<size_t>> account_;  // charged mapped_bytes_, if any
  uint8_t* first_slot_ = nullptr;
  size_t slot_stride_ = 0;
  size_t mapped_bytes_ = 0;
  size_t slot_bytes_ = 0;
  uint32_t slot_count_ = 0;
  std::unique_ptr<FrameSlot[]> slots_;
  SlotReuse reuse_ = SlotReuse::kLeastRecent;
  std::atomic<uint64_t> free_mask_{0};      // bit i set: slot i is free
  std::atomic<uint64_t> release_clock_{0};  // orders releases for SlotReuse
  std::atomic<uint32_t> pinned_slots_{0};
  std::atomic<uint64_t> pins_refused_{0};
  std::atomic<uint32_t> refs_{1};
};

}  // namespace syncd::media
