// Binary WebSocket messages of a producer, turned into frames through the media ingest API
// (media::StreamRegistry::begin -> SlotLease -> commit / abort).
//
// A message is a 56-byte frame header and the frame's bytes (docs/protocol.md, "Binary video
// frames"). Once the header is in, begin() leases a slot; the payload then lands straight in
// the slot (Connection::on_alloc asks direct_window()), is unmasked there (and hashed in the
// same pass when a publisher verifies content), and is committed at the message's end. A refused
// frame's bytes are read into a discard buffer. This class decides nothing about admission or
// accounting: the registry does; it maps the registry's refusals to protocol errors.
//
// Thread: the loop thread. No allocation per frame (an error reply allocates).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/unmasking_hasher.h"
#include "media/frame_header.h"
#include "media/stream_registry.h"

namespace syncd::server {

struct ServerCounters;

// A refusal to report to the producer as an `error` control message.
struct FrameError {
  const char* code;
  std::string message;
  uint32_t stream = 0;
  uint64_t sequence = 0;
};

class FrameIngest {
 public:
  FrameIngest(media::StreamRegistry& registry, ServerCounters& counters, uint64_t owner)
      : registry_(registry), counters_(counters), owner_(owner) {}

  // A binary message begins. first_frame_bytes is the whole message's size when single_frame.
  void begin_message(uint64_t first_frame_bytes, bool single_frame, uint64_t start_ns);
  // Payload bytes in order, still masked (mask_key and phase as the WebSocket decoder gives
  // them); they may already sit in the slot (a direct read). Unmasked in the slot; bytes of a
  // refused frame are not unmasked at all.
  std::optional<FrameError> data(uint8_t* bytes, size_t size, uint32_t mask_key, uint64_t phase);
  std::optional<FrameError> end_message(uint64_t now_ns);
  // The connection is going away mid-message: the lease is aborted (kDisconnected).
  void abandon();

  // Where the next `want` payload bytes should be read: into the slot (the rest of the frame),
  // into a discard buffer (a refused frame), or nowhere special (nullptr: the caller's buffer).
  // discard: the buffer to use for refused bytes.
  uint8_t* direct_window(uint64_t want, std::span<uint8_t> discard, size_t& size);
  // A payload is being received into a slot (SO_RCVLOWAT applies).
  bool receiving_payload() const { return active_ && header_have_ == media::kFrameHeaderBytes; }
  // Time the decoder spent on bytes already in the slot (framing; unmasking when not hashing),
  // for the decode stage.
  void add_decode_ns(uint64_t ns) { decode_ns_ += ns; }
  uint64_t hash_ns() const { return hash_ns_; }

 private:
  std::optional<FrameError> begin_frame();
  FrameError refuse(const char* code, std::string message);

  media::StreamRegistry& registry_;
  ServerCounters& counters_;
  uint64_t owner_;

  bool active_ = false;
  bool discarding_ = false;  // refused: the rest of the payload is read and thrown away
  bool single_frame_ = false;
  uint64_t message_bytes_ = 0;  // from the WebSocket header when single_frame
  uint64_t start_ns_ = 0;
  uint8_t header_[media::kFrameHeaderBytes] = {};
  size_t header_have_ = 0;
  media::FrameHeader parsed_;
  media::SlotLease lease_;
  size_t filled_ = 0;  // bytes written into the slot
  bool hashing_ = false;
  uint64_t decode_ns_ = 0;
  uint64_t hash_ns_ = 0;
  // Unmasks and hashes the frame window by window as it lands (see core::UnmaskingHasher).
  core::UnmaskingHasher hasher_;
};

}  // namespace syncd::server
