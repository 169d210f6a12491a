// H.264 decoder for the relay's receiver (docs/codec.md), on FFmpeg's libavcodec: one Annex B
// access unit in, its picture out at once (AV_CODEC_FLAG_LOW_DELAY, no frame threads), copied
// into the caller's buffer (a frame lease) as I420 or NV12.
//
// Why a copy and not a decoder writing straight into the lease (get_buffer2): H.264 keeps up to
// 16 decoded pictures as references for later frames, so a lease handed to the decoder could not
// be published and released when its frame is done. The copy costs about 0.06 ms at 1080p, as
// much as a memcpy of the frame (docs/benchmarks.md).
//
// After a loss (note_loss(), a decode error, or a corrupt picture) and at the start, the decoder
// refuses access units until an IDR arrives and says so (needs_keyframe(), status
// kAwaitingKeyframe), so the relay can send a PLI and no concealed garbage reaches a consumer.
// Corrupt or truncated input is refused with a reason and counted (libavcodec runs with
// AV_EF_EXPLODE, so a damaged slice is an error, not a concealed picture).
//
// Pure: no sockets, clocks, threads or logs (libavcodec's log is silenced at open: it is
// process-wide, and syncd has no other libav user). open() allocates; decode() copies the access
// unit into a padded buffer allocated at open. libavcodec makes about 34 small allocations a frame
// inside avcodec_send_packet/receive_frame (reference structs for its pooled pictures and tables,
// a copy of the packet; measured in video_codec_bench) and recycles its picture buffers.
//
// Thread: any one thread at a time; one instance per stream. Never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "video_codec/picture.h"

namespace syncd::video_codec {

struct DecoderConfig {
  // libavcodec threads, slice threading only (frame threading adds a frame of delay per thread).
  // 1: x264 ultrafast with one thread writes one slice per frame, which slice threads cannot
  // split, and the receiver's other core runs syncd (docs/benchmarks.md).
  uint32_t threads = 1;
  // Largest access unit accepted; the padded input buffer is allocated for it at open.
  size_t max_access_unit_bytes = 4 << 20;
};

enum class DecodeStatus : uint8_t {
  kPicture,            // a picture was decoded and written into the output
  kNoPicture,          // accepted, no picture (e.g. parameter sets alone)
  kSizeChanged,        // a picture of another size than the output (a new SPS): it is held; the
                       // caller reopens its stream and calls copy_picture()
  kAwaitingKeyframe,   // refused: not an IDR while needs_keyframe()
  kRefusedEmpty,       // refused: no bytes
  kRefusedTooLarge,    // refused: larger than max_access_unit_bytes
  kRefusedNotAnnexB,   // refused: does not start with a start code, or no NAL unit in it
  kDecodeError,        // libavcodec found an error in the bitstream; now needs a keyframe
  kCorruptPicture,     // the picture came out marked corrupt; dropped; now needs a keyframe
  kUnsupportedFormat,  // not 8-bit 4:2:0 (the relay's encoder never sends that)
  kBadOutput,          // the output picture has null planes or too small strides
  kNotOpen,
};

struct DecodeResult {
  DecodeStatus status = DecodeStatus::kNotOpen;
  uint32_t width = 0;  // the decoded picture's size, when there is one
  uint32_t height = 0;
  bool keyframe = false;            // the access unit held an IDR
  bool resolution_changed = false;  // the picture's size differs from the previous one's
};

struct DecoderCounters {
  uint64_t access_units_in = 0;
  uint64_t pictures_out = 0;
  uint64_t keyframes_in = 0;
  uint64_t resolution_changes = 0;
  uint64_t losses_noted = 0;
  uint64_t awaiting_keyframe = 0;  // access units refused while waiting for an IDR
  uint64_t refused_empty = 0;
  uint64_t refused_too_large = 0;
  uint64_t refused_not_annexb = 0;
  uint64_t decode_errors = 0;
  uint64_t corrupt_pictures = 0;
  uint64_t unsupported_format = 0;
  uint64_t bad_output = 0;
  uint64_t size_changed_held = 0;
  // Pictures of a full-range stream (JPEG range: a WebCodecs encoder's, from a canvas) brought
  // to the limited range that syncd's I420 and NV12 mean (BT.601, 16-235).
  uint64_t full_range_pictures = 0;
};

class H264Decoder {
 public:
  H264Decoder();
  ~H264Decoder();
  H264Decoder(const H264Decoder&) = delete;
  H264Decoder& operator=(const H264Decoder&) = delete;

  // Opens (or re-opens) libavcodec's H.264 decoder. Returns false when libavcodec refuses.
  bool open(const DecoderConfig& config = {});
  void close();
  bool is_open() const;

  // Decodes one Annex B access unit (the caller's bytes, not kept) and writes its picture into
  // output when the sizes match.
  DecodeResult decode(std::span<const uint8_t> access_unit, const OutputPicture& output);

  // Writes the last decoded picture into output (after kSizeChanged and a reopen of the
  // caller's stream at the new size). kPicture, kSizeChanged (still another size), kBadOutput or
  // kNoPicture (none held).
  DecodeStatus copy_picture(const OutputPicture& output);

  // The caller saw a loss (a gap the jitter buffer gave up on): refuse until the next IDR.
  void note_loss();
  bool needs_keyframe() const;

  const DecoderCounters& counters() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace syncd::video_codec
