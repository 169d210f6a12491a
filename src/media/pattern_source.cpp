#include "media/pattern_source.h"

#include <charconv>
#include <cstring>

#include "core/content_hash.h"

namespace syncd::media {

bool parse_pattern_spec(std::string_view spec, PatternConfig& out, std::string& error) {
  if (spec == "pattern") return true;
  constexpr std::string_view kPrefix = "pattern:";
  if (spec.substr(0, kPrefix.size()) != kPrefix) {
    error = "unknown source '" + std::string(spec) + "' (expected pattern[:WxH@FPS])";
    return false;
  }
  const std::string_view rest = spec.substr(kPrefix.size());
  const char* end = rest.data() + rest.size();
  uint32_t w = 0, h = 0;
  double fps = 0;
  auto r = std::from_chars(rest.data(), end, w);
  const bool width_ok = r.ec == std::errc{} && r.ptr != end && *r.ptr == 'x';
  if (width_ok) r = std::from_chars(r.ptr + 1, end, h);
  const bool height_ok = width_ok && r.ec == std::errc{} && r.ptr != end && *r.ptr == '@';
  if (height_ok) r = std::from_chars(r.ptr + 1, end, fps);
  if (!height_ok || r.ec != std::errc{} || r.ptr != end || w == 0 || h == 0 || w > 8192 ||
      h > 8192 || fps <= 0 || fps > 1000) {
    error = "bad source spec '" + std::string(spec) + "' (expected pattern:WIDTHxHEIGHT@FPS)";
    return false;
  }
  out.width = w;
  out.height = h;
  out.fps = fps;
  return true;
}

PatternSource::PatternSource(StreamRegistry& registry, PatternConfig config)
    : registry_(registry), config_(std::move(config)) {
  // Two rows' worth of diagonal colour bars: a row of the frame is a window into this buffer at
  // an offset that moves with the row and the frame, so rendering is one memcpy per row.
  const uint32_t w = config_.width;
  row_source_.resize(size_t(w) * 2 * 4);
  for (uint32_t x = 0; x < w * 2; ++x) {
    const uint32_t bar = (x * 8 / w) % 8;
    uint8_t* px = &row_source_[size_t(x) * 4];
    px[0] = (bar & 1) ? 235 : uint8_t(x * 255 / (w * 2));
    px[1] = (bar & 2) ? 235 : 16;
    px[2] = (bar & 4) ? 235 : uint8_t(255 - x * 255 / (w * 2));
    px[3] = 255;
  }
  period_ns_ = uint64_t(1e9 / config_.fps);
}

bool PatternSource::start(std::string& error) {
  StreamConfig sc;
  sc.name = config_.stream_name;
  sc.width = config_.width;
  sc.height = config_.height;
  sc.format = PixelFormat::kRgba8;
  sc.fps = config_.fps;
  sc.slots = 4;
  OpenError e;
  stream_ = registry_.open(sc, kOwner, e);
  if (!stream_) {
    error = open_error_code(e);
    return false;
  }
  return true;
}

void PatternSource::stop() {
  if (stream_) registry_.close(stream_);
  stream_ = nullptr;
}

void PatternSource::render(uint8_t* pixels, uint64_t sequence) {
  const uint32_t w = config_.width;
  const size_t row_bytes = size_t(w) * 4;
  for (uint32_t y = 0; y < config_.height; ++y) {
    const size_t shift = (size_t(y) + sequence * 4) % w;
    std::memcpy(pixels + size_t(y) * row_bytes, &row_source_[shift * 4], row_bytes);
  }
  stamp_sequence_marker(pixels, sequence);
}

uint64_t PatternSource::due_ns(uint64_t tick) const {
  return origin_ns_ + uint64_t(double(tick) * 1e9 / config_.fps);
}

uint64_t PatternSource::produce_due(uint64_t now_ns) {
  if (!stream_) return period_ns_;
  if (origin_ns_ == 0) {
    // Ticks sit half a period away from whole seconds of the monotonic clock, so the frames of
    // one second never straddle a one-second bin boundary (docs/protocol.md, "Unique-frame
    // seconds"), and due times are computed from the tick count, so they never drift.
    origin_ns_ = (now_ns / 1'000'000'000 + 1) * 1'000'000'000 + period_ns_ / 2;
  }
  if (now_ns >= due_ns(tick_ + 2)) {
    // The loop was held up for more than two periods: skip the missed ticks rather than burst.
    const uint64_t behind = uint64_t(double(now_ns - origin_ns_) * config_.fps / 1e9);
    skipped_ += behind - tick_;
    tick_ = behind;
  }
  while (now_ns >= due_ns(tick_)) {
    ++tick_;
    const uint64_t sequence = sequence_++;
    IngestRequest request;
    request.stream_id = stream_->id();
    request.owner = kOwner;
    request.flags = frame_flag::kHasContentHash;
    request.sequence = sequence;
    request.capture_time_us = now_ns / 1000;
    request.start_ns = now_ns;
    IngestRefusal refusal;
    SlotLease lease = registry_.begin(request, refusal);
    if (!lease) continue;  // pool full: counted by the registry
    render(lease.pixels(), sequence);
    lease.info().content_hash = core::content_hash(lease.pixels(), lease.frame_bytes());
    lease.commit(lease.frame_bytes(), now_ns);
  }
  return due_ns(tick_) - now_ns;
}

}  // namespace syncd::media
