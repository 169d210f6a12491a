#include "media/stream.h"

#include <algorithm>
#include <cmath>

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
    : id_(id),
      config_(std::move(config)),
      owner_(owner),
      layout_(layout),
      pool_(pool),
      rate_(low_rate_threshold_for(config_.fps)) {}

uint32_t low_rate_threshold_for(double fps) {
  if (!(fps > 0)) fps = 60.0;
  return uint32_t(std::ceil(std::min(fps, 1000.0) * 5.0 / 6.0 - 1e-9));
}

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
