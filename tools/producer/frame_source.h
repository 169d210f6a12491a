// Produces the wire bytes of sync-producer's video frames without touching the pixels per frame
// beyond what the protocol requires.
//
// kPatternCount test-pattern buffers are drawn once at start-up and used in rotation. Per frame
// only the 16-byte sequence marker is stamped (so every frame is unique), the pixels are hashed
// with XXH3-64 for the header's content_hash, and the 56-byte header is written. For WebSocket
// framing each buffer also has a twin that was masked once at start-up with the connection's data
// key; per frame only its marker bytes and the header are masked, so no 8 MB masking pass runs per
// frame. Not thread-safe; owned by the producer's single thread.
//
// An encoded stream (format h264) sends access units from an Annex B file instead, in rotation:
// each is a buffer of its own size, masked once, and carries no marker (its bytes are the
// encoder's; the frame header's sequence and hash identify it).
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "media/frame_header.h"
#include "net/ws/frame_encoder.h"

namespace syncd::producer {

enum class Framing {
  kRawTcp,     // header + pixels, nothing else (the baseline sink)
  kWebSocket,  // one masked binary message per frame
};

struct FrameGeometry {
  uint32_t width = 1920;
  uint32_t height = 1080;
  media::PixelFormat format = media::PixelFormat::kRgba8;
  // Bytes of one frame in this format (all planes, packed); 0 when the size does not suit it.
  size_t pixel_bytes() const {
    media::FrameLayout layout;
    return media::frame_layout(format, width, height, layout) ? layout.bytes : 0;
  }
};

class FrameSource {
 public:
  // Three buffers, so consecutive frames differ in more than the marker and the pattern visibly
  // moves; more would only cost memory.
  static constexpr size_t kPatternCount = 3;

  // The bytes of one frame, ready for sendmsg. They point into the FrameSource and stay valid
  // until the next prepare().
  struct WireFrame {
    std::array<iovec, 3> iov{};
    int iov_count = 0;
    size_t bytes = 0;  // total of the iovecs: what goes on the wire for this frame
  };

  // The system camera's test marker (tests/integration/camera_marker.py): the sequence's low
  // kCameraMarkerBits bits as columns kCameraMarkerColumn pixels wide down the whole frame, bit i
  // in column i, white for 1 and black for 0, then one black guard column. It survives the
  // camera's conversions and a consumer's conversion to RGB, where the 16-byte sequence marker
  // does not. Row 0 still starts with the sequence marker, over the first 16 bytes.
  static constexpr uint32_t kCameraMarkerBits = 16;
  static constexpr uint32_t kCameraMarkerColumn = 8;
  static constexpr uint32_t kCameraMarkerWidth = (kCameraMarkerBits + 1) * kCameraMarkerColumn;

  // Allocates and draws the pattern buffers (and their masked twins for kWebSocket, masked with
  // mask_key as loaded by net/ws/unmask.h). pixel_bytes() must be at least
  // media::kSequenceMarkerBytes. With camera_marker, width must be at least kCameraMarkerWidth:
  // each frame then also carries the camera marker, drawn per frame (about 150 KB of a 1080p
  // I420 frame, 600 KB of RGBA) and its chroma made neutral under it once.
  FrameSource(const FrameGeometry& geometry, uint32_t stream_id, Framing framing, uint32_t mask_key,
              bool camera_marker = false);
  // Access units to send in rotation (format h264): from split_access_units().
  FrameSource(const FrameGeometry& geometry, uint32_t stream_id, Framing framing, uint32_t mask_key,
              std::vector<std::vector<uint8_t>> access_units);

  // Fills `out` with frame `sequence`. Allocation-free.
  void prepare(uint64_t sequence, uint64_t capture_time_us, WireFrame& out);

  const FrameGeometry& geometry() const { return geometry_; }

 private:
  // One frame's bytes: plain (hashed per frame), and for WebSocket a copy masked once, with
  // the WebSocket header for its length.
  struct Buffer {
    std::vector<uint8_t> plain;
    std::vector<uint8_t> masked;
    std::array<uint8_t, ws::kMaxClientHeaderBytes> ws_header{};
    size_t ws_header_bytes = 0;
  };
  void mask_buffer(Buffer& b) const;

  FrameGeometry geometry_;
  uint32_t stream_id_;
  Framing framing_;
  uint32_t mask_key_;
  bool camera_marker_ = false;
  bool stamp_marker_ = true;  // raw patterns: a marker makes every frame unique
  std::vector<Buffer> buffers_;
  std::array<uint8_t, media::kFrameHeaderBytes> header_{};
};

// Splits an Annex B byte stream into access units at its access unit delimiters (NAL type 9,
// which x264 writes with --aud): each access unit is its delimiter and the NAL units up to the
// next one. Empty with a sentence in error when the stream has no delimiter.
std::vector<std::vector<uint8_t>> split_access_units(const std::vector<uint8_t>& annex_b,
                                                     std::string& error);

}  // namespace syncd::producer
