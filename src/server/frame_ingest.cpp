#include "server/frame_ingest.h"

#include <algorithm>
#include <cstring>

#include "control/control_message.h"
#include "core/clock.h"
#include "net/ws/unmask.h"
#include "server/server_config.h"

namespace syncd::server {

namespace {
// Every frame_size_mismatch says the same thing: which stream and frame (sequence), how many
// bytes its message has (qualifier "over " when refused before its end), and how many the
// stream's frames take, header included.
std::string size_mismatch_message(const media::FrameHeader& frame, const char* qualifier,
                                  uint64_t message_bytes, uint64_t frame_bytes) {
  return "stream " + std::to_string(frame.stream_id) + " frame " + std::to_string(frame.sequence) +
         ": message is " + qualifier + std::to_string(message_bytes) + " bytes, stream needs " +
         std::to_string(media::kFrameHeaderBytes + frame_bytes);
}
}  // namespace

void FrameIngest::begin_message(uint64_t first_frame_bytes, bool single_frame, uint64_t start_ns) {
  abandon();  // cannot hold a lease here: the previous message ended or was abandoned
  active_ = true;
  discarding_ = false;
  single_frame_ = single_frame;
  message_bytes_ = first_frame_bytes;
  start_ns_ = start_ns;
  header_have_ = 0;
  filled_ = 0;
  hashing_ = false;
  decode_ns_ = 0;
  hash_ns_ = 0;
}

void FrameIngest::abandon() {
  if (lease_) lease_.abort(media::DropReason::kDisconnected);
  active_ = false;
}

FrameError FrameIngest::refuse(const char* code, std::string message) {
  if (lease_) lease_.abort(media::DropReason::kSizeMismatch);
  discarding_ = true;
  return FrameError{code, std::move(message), parsed_.stream_id, parsed_.sequence};
}

std::optional<FrameError> FrameIngest::begin_frame() {
  const media::FrameHeaderError err = media::parse_frame_header(header_, parsed_);
  if (err != media::FrameHeaderError::kNone) {
    ++counters_.frames_rejected_bad_header;
    return refuse(control::error_code::kBadFrameHeader, media::frame_header_error_name(err));
  }
  media::IngestRequest r;
  r.stream_id = parsed_.stream_id;
  r.owner = owner_;
  // syncd's own to set.
  r.flags = parsed_.flags & ~(media::frame_flag::kDecoded | media::frame_flag::kDiscontinuity);
  r.sequence = parsed_.sequence;
  r.capture_time_us = parsed_.capture_time_us;
  r.content_hash = parsed_.content_hash;
  r.width = parsed_.width;
  r.height = parsed_.height;
  r.format = media::PixelFormat(parsed_.format);
  // Decided from the WebSocket header, before any pixel is read.
  r.payload_bytes = single_frame_ ? message_bytes_ - media::kFrameHeaderBytes : 0;
  r.start_ns = start_ns_;
  media::IngestRefusal refusal;
  lease_ = registry_.begin(r, refusal);
  const std::string stream = std::to_string(parsed_.stream_id);
  switch (refusal) {
    case media::IngestRefusal::kNone:
      break;
    case media::IngestRefusal::kUnknownStream:
      ++counters_.frames_rejected_unknown_stream;
      return refuse(control::error_code::kUnknownStream, "no open stream " + stream);
    case media::IngestRefusal::kNotOwner:
      ++counters_.frames_rejected_unknown_stream;
      return refuse(control::error_code::kNotStreamOwner,
                    "stream " + stream + " belongs to another connection");
    case media::IngestRefusal::kGeometryMismatch:
      return refuse(control::error_code::kGeometryMismatch,
                    "frame geometry differs from the stream's");
    case media::IngestRefusal::kSizeMismatch: {
      const media::Stream* s = registry_.find(parsed_.stream_id);
      return refuse(control::error_code::kFrameSizeMismatch,
                    size_mismatch_message(parsed_, "", message_bytes_, s ? s->frame_bytes() : 0));
    }
    case media::IngestRefusal::kPoolFull:
      // The newest frame is refused at admission; counted, no reply (the stats carry it).
      discarding_ = true;
      return std::nullopt;
  }
  hashing_ = (parsed_.flags & media::frame_flag::kHasContentHash) && registry_.verifies_content();
  if (hashing_) hasher_.begin(lease_.pixels());
  return std::nullopt;
}

std::optional<FrameError> FrameIngest::data(uint8_t* bytes, size_t size, uint32_t mask_key,
                                            uint64_t phase) {
  if (header_have_ < media::kFrameHeaderBytes) {
    const size_t take = std::min(size, media::kFrameHeaderBytes - header_have_);
    std::memcpy(header_ + header_have_, bytes, take);
    ws::unmask(header_ + header_have_, take, mask_key, phase);
    header_have_ += take;
    bytes += take;
    size -= take;
    phase += take;
    if (header_have_ == media::kFrameHeaderBytes) {
      if (auto error = begin_frame()) return error;
    }
  }
  if (size == 0 || discarding_ || !lease_) return std::nullopt;
  if (filled_ + size > lease_.frame_bytes()) {
    // More bytes than the stream's frame holds (only possible for fragmented messages, whose
    // total is not known from the first header).
    return refuse(control::error_code::kFrameSizeMismatch,
                  size_mismatch_message(parsed_, "over ", media::kFrameHeaderBytes + filled_ + size,
                                        lease_.frame_bytes()));
  }
  uint8_t* dst = lease_.pixels() + filled_;
  // Payload that arrived in the read buffer (the first bytes after the header) is copied;
  // payload read straight into the slot is already in place. Either way it is unmasked in the
  // slot.
  if (bytes != dst) std::memcpy(dst, bytes, size);
  if (hashing_) {
    // Unmasked and hashed in one pass, in the slot, while the window is still in cache: the
    // digest covers what the slot holds, so a window placed at the wrong offset fails to verify.
    const uint64_t t0 = core::monotonic_ns();
    hasher_.update(dst, size, mask_key, phase);
    hash_ns_ += core::monotonic_ns() - t0;
  } else {
    ws::unmask(dst, size, mask_key, phase);
  }
  filled_ += size;
  return std::nullopt;
}

std::optional<FrameError> FrameIngest::end_message(uint64_t now_ns) {
  active_ = false;
  if (header_have_ < media::kFrameHeaderBytes) {
    ++counters_.frames_rejected_bad_header;
    parsed_ = media::FrameHeader{};
    return refuse(control::error_code::kBadFrameHeader,
                  "binary message shorter than a frame header");
  }
  if (!lease_) return std::nullopt;  // refused earlier and already counted
  const uint32_t stream_id = lease_.stream_id();
  if (media::Stream* s = registry_.find(stream_id)) {
    s->stages().decode.record(decode_ns_);
    if (hashing_) s->stages().hash.record(hash_ns_);
  }
  if (hashing_) {
    lease_.info().received_hash = hasher_.digest();
    lease_.info().received_hash_valid = true;
  }
  const uint64_t frame_bytes = lease_.frame_bytes();
  const bool complete = media::is_encoded(lease_.info().format)
                            ? filled_ > 0 && filled_ <= frame_bytes
                            : filled_ == frame_bytes;
  if (!lease_.commit(filled_, now_ns) && !complete) {
    // A fragmented message whose fragments ended early: worded like the single-message case.
    return FrameError{
        control::error_code::kFrameSizeMismatch,
        size_mismatch_message(parsed_, "", media::kFrameHeaderBytes + filled_, frame_bytes),
        parsed_.stream_id, parsed_.sequence};
  }
  return std::nullopt;
}

uint8_t* FrameIngest::direct_window(uint64_t want, std::span<uint8_t> discard, size_t& size) {
  if (!receiving_payload() || want == 0) return nullptr;
  if (lease_) {
    const size_t room = lease_.frame_bytes() - filled_;
    // A frame that carries more bytes than its slot holds is refused when they arrive; the
    // excess is read into the discard buffer so it never lands past the slot.
    if (room > 0) {
      size = size_t(std::min<uint64_t>(want, room));
      return lease_.pixels() + filled_;
    }
  }
  if (discarding_ || lease_) {
    size = size_t(std::min<uint64_t>(want, discard.size()));
    return discard.data();
  }
  return nullptr;
}

}  // namespace syncd::server
