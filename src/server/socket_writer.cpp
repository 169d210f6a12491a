#include "server/socket_writer.h"

#include <cstring>
#include <memory>

#include "core/clock.h"
#include "media/frame_pool.h"

namespace syncd::server {

namespace {
constexpr size_t kSpareRequests = 8;
constexpr size_t kSpareCopyCapacity = 64 * 1024;  // larger copy buffers are not kept
}  // namespace

struct SocketWriter::Request {
  uv_write_t req;
  SocketWriter* writer = nullptr;
  std::string copy;  // send_copy's bytes
  uint8_t head[kMaxHeadBytes];
  media::FrameSlot* slot = nullptr;  // pinned while the write is in flight
  WriteDone done = nullptr;
  void* context = nullptr;
  size_t charged = 0;
  size_t bytes = 0;
};

const char* send_status_name(SendStatus s) {
  switch (s) {
    case SendStatus::kQueued:
      return "queued";
    case SendStatus::kConnectionCap:
      return "connection_cap";
    case SendStatus::kProcessBudget:
      return "process_budget";
    case SendStatus::kSlotCap:
      return "slot_cap";
    case SendStatus::kClosed:
      return "closed";
  }
  return "?";
}

SocketWriter::SocketWriter(uv_stream_t* stream, OutputBudget& budget, const WriterLimits& limits,
                           WriterListener& listener)
    : stream_(stream), budget_(budget), limits_(limits), listener_(listener) {
  spare_.reserve(kSpareRequests);
}

SocketWriter::~SocketWriter() {
  for (Request* r : spare_) delete r;
}

bool SocketWriter::stalled(uint64_t now_ns) const {
  return limits_.write_timeout_ms != 0 && in_flight_ > 0 &&
         now_ns - last_progress_ns_ > uint64_t(limits_.write_timeout_ms) * 1'000'000;
}

SocketWriter::Request* SocketWriter::take_request() {
  if (spare_.empty()) {
    auto* r = new Request();
    r->writer = this;
    r->req.data = r;
    return r;
  }
  Request* r = spare_.back();
  spare_.pop_back();
  return r;
}

SendStatus SocketWriter::charge(size_t bytes) {
  if (closed_) return SendStatus::kClosed;
  if (queued_bytes_ + bytes > limits_.max_queued_bytes) return SendStatus::kConnectionCap;
  if (!budget_.try_take(bytes)) return SendStatus::kProcessBudget;
  queued_bytes_ += bytes;
  return SendStatus::kQueued;
}

SendStatus SocketWriter::send_copy(std::initializer_list<std::string_view> pieces) {
  size_t bytes = 0;
  for (std::string_view p : pieces) bytes += p.size();
  const size_t charged = bytes + sizeof(Request);
  if (const SendStatus s = charge(charged); s != SendStatus::kQueued) {
    ++refused_;
    return s;
  }
  Request* r = take_request();
  r->copy.clear();
  r->copy.reserve(bytes);
  for (std::string_view p : pieces) r->copy.append(p);
  r->charged = charged;
  r->bytes = bytes;
  uv_buf_t buf = uv_buf_init(r->copy.data(), unsigned(bytes));
  return submit(r, &buf, 1);
}

SendStatus SocketWriter::send_frame(std::string_view head, media::FrameSlot* slot, size_t bytes,
                                    WriteDone done, void* context) {
  if (closed_) return SendStatus::kClosed;
  if (head.size() > kMaxHeadBytes) return SendStatus::kConnectionCap;
  if (pinned_slots_ >= limits_.max_pinned_slots) {
    ++refused_;
    return SendStatus::kSlotCap;
  }
  if (const SendStatus s = charge(sizeof(Request)); s != SendStatus::kQueued) {
    ++refused_;
    return s;
  }
  if (!media::FramePool::try_pin(slot)) {
    queued_bytes_ -= sizeof(Request);
    budget_.give(sizeof(Request));
    ++refused_;
    return SendStatus::kSlotCap;
  }
  ++pinned_slots_;
  Request* r = take_request();
  std::memcpy(r->head, head.data(), head.size());
  r->slot = slot;
  r->done = done;
  r->context = context;
  r->charged = sizeof(Request);
  r->bytes = head.size() + bytes;
  uv_buf_t bufs[2] = {uv_buf_init(reinterpret_cast<char*>(r->head), unsigned(head.size())),
                      uv_buf_init(reinterpret_cast<char*>(slot->pixels), unsigned(bytes))};
  return submit(r, bufs, 2);
}

SendStatus SocketWriter::send_borrowed(std::string_view head, std::span<const uv_buf_t> pieces,
                                       WriteDone done, void* context) {
  if (closed_) return SendStatus::kClosed;
  if (head.size() > kMaxHeadBytes || pieces.size() > kMaxBorrowedPieces)
    return SendStatus::kConnectionCap;
  if (const SendStatus s = charge(sizeof(Request)); s != SendStatus::kQueued) {
    ++refused_;
    return s;
  }
  Request* r = take_request();
  std::memcpy(r->head, head.data(), head.size());
  r->done = done;
  r->context = context;
  r->charged = sizeof(Request);
  uv_buf_t bufs[1 + kMaxBorrowedPieces];
  unsigned n = 0;
  bufs[n++] = uv_buf_init(reinterpret_cast<char*>(r->head), unsigned(head.size()));
  r->bytes = head.size();
  for (const uv_buf_t& p : pieces) {
    bufs[n++] = p;
    r->bytes += p.len;
  }
  return submit(r, bufs, n);
}

SendStatus SocketWriter::submit(Request* r, const uv_buf_t* bufs, unsigned nbufs) {
  if (in_flight_ == 0) last_progress_ns_ = core::monotonic_ns();
  ++in_flight_;
  // The only socket write in syncd (see the header).
  if (uv_write(&r->req, stream_, bufs, nbufs, &SocketWriter::on_written) < 0) {
    // Nothing was queued: undo, and tell the caller, who still owns its buffers.
    --in_flight_;
    queued_bytes_ -= r->charged;
    budget_.give(r->charged);
    if (r->slot) {
      media::FramePool::unpin(r->slot);
      --pinned_slots_;
    }
    r->slot = nullptr;
    r->done = nullptr;
    spare_.push_back(r);
    closed_ = true;
    return SendStatus::kClosed;
  }
  return SendStatus::kQueued;
}

void SocketWriter::on_written(uv_write_t* req, int status) {
  auto* r = static_cast<Request*>(req->data);
  SocketWriter& w = *r->writer;
  --w.in_flight_;
  w.queued_bytes_ -= r->charged;
  w.budget_.give(r->charged);
  w.last_progress_ns_ = core::monotonic_ns();
  if (status == 0) w.bytes_written_ += r->bytes;
  if (r->slot) {
    media::FramePool::unpin(r->slot);
    --w.pinned_slots_;
    r->slot = nullptr;
  }
  const WriteDone done = r->done;
  void* context = r->context;
  r->done = nullptr;
  if (w.spare_.size() < kSpareRequests && r->copy.capacity() <= kSpareCopyCapacity) {
    w.spare_.push_back(r);
  } else {
    delete r;
  }
  if (done) done(context, status);
  w.listener_.on_write_complete(status);
}

}  // namespace syncd::server
