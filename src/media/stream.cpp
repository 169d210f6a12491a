#include "media/stream.h"

namespace syncd::media {

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kPoolFull:
      return "pool_full";
    case DropReason::kSizeMismatch:
      return "size_mismatch";
    case DropReason::kGeometryMismatch:
      return "geometry_mismatch";
    case DropReason::kDisconnected:
      return "disconnected";
    case DropReason::kUndecodable:
      return "undecodable";
    case DropReason::kCount:
      break;
  }
  return "?";
}

const char* keyframe_reason_name(KeyframeReason reason) {
  switch (reason) {
    case KeyframeReason::kDecoder:
      return "decoder";
    case KeyframeReason::kRelay:
      return "relay";
    case KeyframeReason::kWhep:
      return "whep";
    case KeyframeReason::kConsumer:
      return "consumer";
    case KeyframeReason::kCount:
      break;
  }
  return "?";
}

Stream::Stream(uint32_t id, StreamConfig config, const FrameLayout& layout, uint64_t owner,
               FramePool* pool)
    : id_(id), config_(std::move(config)), owner_(owner), layout_(layout), pool_(pool) {}

Stream::~Stream() {
  close();
}

void Stream::close() {
  if (pool_) pool_->drop_ref();
  pool_ = nullptr;
}

bool Stream::count_accepted(uint64_t sequence, uint64_t now_ns) {
  ++counters_.accepted;
  if (any_accepted_ && sequence <= highest_sequence_) return false;
  any_accepted_ = true;
  highest_sequence_ = sequence;
  ++counters_.unique;
  rate_.record(now_ns / 1'000'000);
  return true;
}

}  // namespace syncd::media
