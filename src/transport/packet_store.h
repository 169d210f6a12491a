// A fixed pool of packet buffers for a transport thread, handed out by index: every RTP, FEC and
// RTCP packet a session holds (a send stream's history for retransmission, the pacer's queue,
// the receiver's jitter buffer and FEC blocks) lives in one of these, so steady state never
// allocates and a handle is a plain integer other modules can carry.
//
// A buffer one holder keeps (a history, a queue) is the taker's to give_back(); a buffer several
// may keep at once is counted instead: each holder hold()s it and release()s it, and the last
// release gives it back (a taken buffer nobody held yet is given back by its first release).
//
// Pure; the transport thread only (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace syncd::transport {

class PacketStore {
 public:
  // Room for any datagram the relay sends or accepts: an Ethernet MTU's worth.
  static constexpr size_t kPacketBytes = 1500;
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit PacketStore(uint32_t capacity)
      : capacity_(capacity),
        bytes_(std::make_unique<uint8_t[]>(size_t(capacity) * kPacketBytes)),
        sizes_(std::make_unique<uint16_t[]>(capacity)),
        free_(std::make_unique<uint32_t[]>(capacity)),
        used_(std::make_unique<bool[]>(capacity)),
        holders_(std::make_unique<uint16_t[]>(capacity)) {
    for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
    free_count_ = capacity;
  }

  // A free buffer's handle, or kNone when every one is in use (the caller drops and counts).
  uint32_t take() {
    if (free_count_ == 0) return kNone;
    const uint32_t handle = free_[--free_count_];
    used_[handle] = true;
    return handle;
  }
  // False (nothing done) for a handle that is not taken: a second give-back cannot put one
  // buffer in the free list twice.
  bool give_back(uint32_t handle) {
    if (handle >= capacity_ || !used_[handle]) return false;
    used_[handle] = false;
    sizes_[handle] = 0;
    holders_[handle] = 0;
    free_[free_count_++] = handle;
    return true;
  }

  // One more holder of a taken buffer.
  void hold(uint32_t handle) { ++holders_[handle]; }
  // One holder less; the last one (or a release of a buffer nobody held) gives it back.
  void release(uint32_t handle) {
    if (holders_[handle] > 1) {
      --holders_[handle];
      return;
    }
    give_back(handle);
  }
  uint16_t holders(uint32_t handle) const { return holders_[handle]; }

  // The whole buffer, to write a packet into; then set_size().
  std::span<uint8_t> room(uint32_t handle) {
    return {bytes_.get() + size_t(handle) * kPacketBytes, kPacketBytes};
  }
  void set_size(uint32_t handle, size_t size) { sizes_[handle] = uint16_t(size); }
  // The packet held.
  std::span<uint8_t> packet(uint32_t handle) {
    return {bytes_.get() + size_t(handle) * kPacketBytes, sizes_[handle]};
  }

  uint32_t capacity() const { return capacity_; }
  uint32_t in_use() const { return capacity_ - free_count_; }

 private:
  uint32_t capacity_;
  std::unique_ptr<uint8_t[]> bytes_;
  std::unique_ptr<uint16_t[]> sizes_;
  std::unique_ptr<uint32_t[]> free_;
  std::unique_ptr<bool[]> used_;
  std::unique_ptr<uint16_t[]> holders_;
  uint32_t free_count_ = 0;
};

}  // namespace syncd::transport
