#include "frame_source.h"

#include <cstring>

#include "core/content_hash.h"
#include "net/ws/unmask.h"

namespace syncd::producer {
namespace {

// Colour bars scrolled by a third of the width per pattern, a diagonal gradient, and a white bar
// that jumps across: distinct buffers that look like motion when the stream is viewed.
// The 4:2:0 formats: a luma gradient with the same jumping bar, and chroma that varies across
// both planes, so a wrong plane offset or stride shows.
void draw_yuv_pattern(uint8_t* out, const FrameGeometry& g, size_t pattern) {
  media::FrameLayout layout;
  media::frame_layout(g.format, g.width, g.height, layout);
  const uint32_t shift = static_cast<uint32_t>(pattern * g.width / FrameSource::kPatternCount);
  const uint32_t bar_width = g.width / 32 + 1;
  const media::PlaneLayout& luma = layout.planes[0];
  for (uint32_t y = 0; y < luma.rows; ++y) {
    uint8_t* row = out + luma.offset + size_t{y} * luma.stride;
    for (uint32_t x = 0; x < g.width; ++x)
      row[x] = x - shift < bar_width ? 235 : static_cast<uint8_t>(16 + (x + shift + y) % 220);
  }
  for (uint32_t p = 1; p < layout.plane_count; ++p) {
    const media::PlaneLayout& chroma = layout.planes[p];
    for (uint32_t y = 0; y < chroma.rows; ++y) {
      uint8_t* row = out + chroma.offset + size_t{y} * chroma.stride;
      for (uint32_t x = 0; x < chroma.stride; ++x)
        row[x] = static_cast<uint8_t>(64 + (x * 3 + y * p + pattern * 40) % 128);
    }
  }
}

void draw_pattern(uint8_t* out, const FrameGeometry& g, size_t pattern) {
  if (g.format == media::PixelFormat::kNv12 || g.format == media::PixelFormat::kI420) {
    draw_yuv_pattern(out, g, pattern);
    return;
  }
  const bool bgra = g.format == media::PixelFormat::kBgra8;
  const uint32_t shift = static_cast<uint32_t>(pattern * g.width / FrameSource::kPatternCount);
  const uint32_t bar_width = g.width / 32 + 1;
  for (uint32_t y = 0; y < g.height; ++y) {
    uint8_t* row = out + size_t{y} * g.width * 4;
    for (uint32_t x = 0; x < g.width; ++x) {
      const uint32_t sx = (x + shift) % g.width;
      const uint32_t bar = sx * 8 / g.width;  // eight vertical colour bars
      uint8_t r = (bar & 1) ? 0xC0 : static_cast<uint8_t>(sx);
      uint8_t g_ = (bar & 2) ? 0xC0 : static_cast<uint8_t>(y);
      uint8_t b = (bar & 4) ? 0xC0 : static_cast<uint8_t>(sx + y);
      if (x - shift < bar_width) r = g_ = b = 0xFF;  // unsigned wrap: only x in [shift, shift+w)
      uint8_t* px = row + size_t{x} * 4;
      px[0] = bgra ? b : r;
      px[1] = g_;
      px[2] = bgra ? r : b;
      px[3] = 0xFF;
    }
  }
}

// Grey chroma (U = V = 128) under the camera marker's columns, in either 4:2:0 layout, so its
// black and white stay black and white through a conversion to RGB.
void neutral_marker_chroma(uint8_t* out, const FrameGeometry& g) {
  media::FrameLayout layout;
  media::frame_layout(g.format, g.width, g.height, layout);
  // I420: a U and a V plane of half width; NV12: one plane of interleaved U, V (full width).
  const uint32_t chroma_bytes = g.format == media::PixelFormat::kNv12
                                    ? FrameSource::kCameraMarkerWidth
                                    : FrameSource::kCameraMarkerWidth / 2;
  for (uint32_t p = 1; p < layout.plane_count; ++p)
    for (uint32_t y = 0; y < layout.planes[p].rows; ++y)
      std::memset(out + layout.planes[p].offset + size_t{y} * layout.planes[p].stride, 128,
                  chroma_bytes);
}

// One row of the camera marker: kCameraMarkerWidth pixels of the first plane's format.
// 4:2:0 luma is BT.601 limited range (black 16, white 235), as camera_marker.py expects.
size_t draw_marker_row(uint8_t* row, media::PixelFormat format, uint64_t sequence) {
  const bool yuv = format == media::PixelFormat::kNv12 || format == media::PixelFormat::kI420;
  const size_t pixel = yuv ? 1 : 4;
  for (uint32_t x = 0; x < FrameSource::kCameraMarkerWidth; ++x) {
    const uint32_t bit = x / FrameSource::kCameraMarkerColumn;
    const bool white = bit < FrameSource::kCameraMarkerBits && ((sequence >> bit) & 1) != 0;
    uint8_t* px = row + x * pixel;
    if (yuv) {
      *px = white ? 235 : 16;
    } else {
      px[0] = px[1] = px[2] = white ? 0xFF : 0x00;
      px[3] = 0xFF;
    }
  }
  return FrameSource::kCameraMarkerWidth * pixel;
}

}  // namespace

FrameSource::FrameSource(const FrameGeometry& geometry, uint32_t stream_id, Framing framing,
                         uint32_t mask_key, bool camera_marker)
    : geometry_(geometry),
      stream_id_(stream_id),
      framing_(framing),
      mask_key_(mask_key),
      camera_marker_(camera_marker && geometry.width >= kCameraMarkerWidth) {
  const size_t pixel_bytes = geometry_.pixel_bytes();
  buffers_.resize(kPatternCount);
  for (size_t i = 0; i < kPatternCount; ++i) {
    buffers_[i].plain.resize(pixel_bytes);
    draw_pattern(buffers_[i].plain.data(), geometry_, i);
    if (camera_marker_) neutral_marker_chroma(buffers_[i].plain.data(), geometry_);
    mask_buffer(buffers_[i]);
  }
}

FrameSource::FrameSource(const FrameGeometry& geometry, uint32_t stream_id, Framing framing,
                         uint32_t mask_key, std::vector<std::vector<uint8_t>> access_units)
    : geometry_(geometry),
      stream_id_(stream_id),
      framing_(framing),
      mask_key_(mask_key),
      stamp_marker_(false) {
  buffers_.resize(access_units.size());
  for (size_t i = 0; i < access_units.size(); ++i) {
    buffers_[i].plain = std::move(access_units[i]);
    mask_buffer(buffers_[i]);
  }
}

void FrameSource::mask_buffer(Buffer& b) const {
  if (framing_ != Framing::kWebSocket) return;
  b.masked = b.plain;
  // Byte i sits at payload offset kFrameHeaderBytes + i; the phase argument keeps the key
  // aligned whatever the header size.
  ws::unmask(b.masked.data(), b.masked.size(), mask_key_, media::kFrameHeaderBytes);
  // Every frame from this buffer has the same length and key: a constant WebSocket header.
  b.ws_header_bytes =
      ws::encode_client_header(b.ws_header.data(), ws::Opcode::kBinary,
                               media::kFrameHeaderBytes + b.plain.size(), mask_key_);
}

void FrameSource::prepare(uint64_t sequence, uint64_t capture_time_us, WireFrame& out) {
  Buffer& b = buffers_[sequence % buffers_.size()];
  const size_t pixel_bytes = b.plain.size();
  uint8_t* pixels = b.plain.data();
  media::FrameLayout layout;
  if (camera_marker_) {
    media::frame_layout(geometry_.format, geometry_.width, geometry_.height, layout);
    for (uint32_t y = 0; y < layout.planes[0].rows; ++y)
      draw_marker_row(pixels + layout.planes[0].offset + size_t{y} * layout.planes[0].stride,
                      geometry_.format, sequence);
  }
  if (stamp_marker_) media::stamp_sequence_marker(pixels, sequence);

  media::FrameHeader header;
  header.stream_id = stream_id_;
  header.flags =
      media::frame_flag::kHasContentHash | (camera_marker_ ? media::frame_flag::kColumnMarker : 0u);
  header.sequence = sequence;
  header.capture_time_us = capture_time_us;
  header.width = geometry_.width;
  header.height = geometry_.height;
  header.format = static_cast<uint32_t>(geometry_.format);
  header.content_hash = syncd::core::content_hash(pixels, pixel_bytes);
  media::write_frame_header(header, header_.data());

  if (framing_ == Framing::kRawTcp) {
    out.iov[0] = {header_.data(), header_.size()};
    out.iov[1] = {pixels, pixel_bytes};
    out.iov_count = 2;
    out.bytes = header_.size() + pixel_bytes;
    return;
  }

  // Bring the masked twin up to date: only the marker differs from the buffer it was made from.
  uint8_t* wire_pixels = b.masked.data();
  if (camera_marker_) {
    // Every row's marker changed too; mask each at its offset in the payload.
    const size_t row_bytes = geometry_.format == media::PixelFormat::kNv12 ||
                                     geometry_.format == media::PixelFormat::kI420
                                 ? kCameraMarkerWidth
                                 : size_t{kCameraMarkerWidth} * 4;
    for (uint32_t y = 0; y < layout.planes[0].rows; ++y) {
      const size_t offset = layout.planes[0].offset + size_t{y} * layout.planes[0].stride;
      std::memcpy(wire_pixels + offset, pixels + offset, row_bytes);
      ws::unmask(wire_pixels + offset, row_bytes, mask_key_, media::kFrameHeaderBytes + offset);
    }
  } else if (stamp_marker_) {
    std::memcpy(wire_pixels, pixels, media::kSequenceMarkerBytes);
    ws::unmask(wire_pixels, media::kSequenceMarkerBytes, mask_key_, media::kFrameHeaderBytes);
  }
  ws::unmask(header_.data(), header_.size(), mask_key_, 0);
  out.iov[0] = {b.ws_header.data(), b.ws_header_bytes};
  out.iov[1] = {header_.data(), header_.size()};
  out.iov[2] = {wire_pixels, pixel_bytes};
  out.iov_count = 3;
  out.bytes = b.ws_header_bytes + header_.size() + pixel_bytes;
}

std::vector<std::vector<uint8_t>> split_access_units(const std::vector<uint8_t>& s,
                                                     std::string& error) {
  // Start of every NAL unit's start code (00 00 01, with the 4-byte form's leading zero).
  std::vector<size_t> aud_starts;
  for (size_t i = 0; i + 3 < s.size(); ++i) {
    if (s[i] != 0 || s[i + 1] != 0 || s[i + 2] != 1) continue;
    const size_t code = i > 0 && s[i - 1] == 0 ? i - 1 : i;
    if ((s[i + 3] & 0x1F) == 9) aud_starts.push_back(code);
    i += 2;
  }
  std::vector<std::vector<uint8_t>> units;
  if (aud_starts.empty()) {
    error = "no access unit delimiter (NAL type 9) in the stream: encode with x264 --aud";
    return units;
  }
  for (size_t a = 0; a < aud_starts.size(); ++a) {
    const size_t end = a + 1 < aud_starts.size() ? aud_starts[a + 1] : s.size();
    units.emplace_back(s.begin() + aud_starts[a], s.begin() + end);
  }
  return units;
}

}  // namespace syncd::producer
