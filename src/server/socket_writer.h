// The one writer of a connection's socket: every byte syncd sends (HTTP responses, control
// replies, pose events, audio packets, frames to HTTP stream receivers) goes through send_*()
// here, and this file holds syncd's only uv_write.
//
// Limits (docs/architecture.md, "Output limits"; defaults in ServerConfig):
// - per connection, the bytes syncd copied for it and has not yet written (plus a fixed charge
//   per write for its request), at most WriterLimits::max_queued_bytes;
// - across all connections, the same bytes at most OutputBudget::limit();
// - per connection, at most WriterLimits::max_pinned_slots frame slots held by writes in flight,
//   each also a pin of its pool (media::FramePool::try_pin), so consumers together never hold
//   the slot the next frame needs;
// - a write that makes no progress for write_timeout_ms marks the connection stalled; its owner
//   closes it.
// A send past a limit is refused with the reason; nothing is queued and the caller counts the
// drop (frames: consumer_slow) or closes the connection. Frames and audio go out without a copy:
// the kernel reads the pool slot or the capture ring.
//
// Thread: the loop thread. The socket must outlive the writer's writes: the owner closes the
// handle, libuv completes every pending write (UV_ECANCELED) before the close callback, and the
// writer is destroyed after that.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace syncd::media {
struct FrameSlot;
}

namespace syncd::server {

struct WriterLimits {
  size_t max_queued_bytes = 1u << 20;
  uint32_t max_pinned_slots = 2;
  uint32_t write_timeout_ms = 15'000;  // 0: never
};

// Bytes copied for all connections and not yet written. Loop thread.
class OutputBudget {
 public:
  explicit OutputBudget(size_t limit) : limit_(limit) {}
  bool try_take(size_t bytes) {
    if (used_ + bytes > limit_) return false;
    used_ += bytes;
    return true;
  }
  void give(size_t bytes) { used_ -= bytes; }
  size_t used() const { return used_; }
  size_t limit() const { return limit_; }

 private:
  size_t limit_;
  size_t used_ = 0;
};

enum class SendStatus {
  kQueued,
  kConnectionCap,  // max_queued_bytes
  kProcessBudget,  // OutputBudget
  kSlotCap,        // max_pinned_slots, or the pool's pin cap
  kClosed,         // the socket is closing or refused the write
};
const char* send_status_name(SendStatus s);

// Called on the loop thread when a write of send_frame/send_borrowed is done with its buffers:
// status 0 once written, a libuv error (UV_ECANCELED when the connection closed) otherwise.
using WriteDone = void (*)(void* context, int status);

// What the writer tells its owner (the connection). Loop thread.
class WriterListener {
 public:
  virtual ~WriterListener() = default;
  // After every completed write, once the writer's own accounting is updated.
  virtual void on_write_complete(int status) = 0;
};

class SocketWriter {
 public:
  static constexpr size_t kMaxHeadBytes = 128;  // head of a frame or audio write
  static constexpr size_t kMaxBorrowedPieces = 3;

  SocketWriter(uv_stream_t* stream, OutputBudget& budget, const WriterLimits& limits,
               WriterListener& listener);
  ~SocketWriter();
  SocketWriter(const SocketWriter&) = delete;
  SocketWriter& operator=(const SocketWriter&) = delete;

  // Copies the pieces into one buffer and queues it.
  SendStatus send_copy(std::initializer_list<std::string_view> pieces);
  // head (copied) then the first `bytes` of the slot's pixels, from the pool. The slot is
  // pinned until the write is done; then done(context, status) runs.
  SendStatus send_frame(std::string_view head, media::FrameSlot* slot, size_t bytes, WriteDone done,
                        void* context);
  // head (copied) then pieces the caller keeps valid until done(context, status) runs.
  SendStatus send_borrowed(std::string_view head, std::span<const uv_buf_t> pieces, WriteDone done,
                           void* context);

  // The owner is closing the socket: every later send is refused with kClosed.
  void close() { closed_ = true; }

  size_t queued_bytes() const { return queued_bytes_; }
  uint32_t pinned_slots() const { return pinned_slots_; }
  uint32_t pin_limit() const { return limits_.max_pinned_slots; }
  size_t writes_in_flight() const { return in_flight_; }
  // Something waits to be written and nothing was written for write_timeout_ms.
  bool stalled(uint64_t now_ns) const;

  // Per connection, for /stats.
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t refused() const { return refused_; }

 private:
  struct Request;
  Request* take_request();
  SendStatus charge(size_t bytes);
  SendStatus submit(Request* r, const uv_buf_t* bufs, unsigned nbufs);
  static void on_written(uv_write_t* req, int status);

  uv_stream_t* stream_;
  OutputBudget& budget_;
  WriterLimits limits_;
  WriterListener& listener_;
  bool closed_ = false;
  size_t queued_bytes_ = 0;  // charged: copied bytes plus a request's size per write
  uint32_t pinned_slots_ = 0;
  size_t in_flight_ = 0;
  uint64_t last_progress_ns_ = 0;
  uint64_t bytes_written_ = 0;
  uint64_t refused_ = 0;
  std::vector<Request*> spare_;  // completed requests kept for reuse: no allocation per write
};

}  // namespace syncd::server
