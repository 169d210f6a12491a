// The frame content hash of control protocol v1: XXH3-64 with seed 0 over every pixel byte.
//
// On x86-64 this calls libxxhash's run-time dispatched entry point: Debian's plain XXH3_64bits
// is its portable SSE2 build (~8 GB/s here, ~1 ms a 1080p frame), while the dispatcher picks the
// AVX2 kernel (~0.16 ms a frame). Same values either way. Pure; thread-safe.
#pragma once

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's definition, so a hasher embeds its state
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

namespace syncd::core {

inline uint64_t content_hash(const void* data, size_t size) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, size);
#else
  return XXH3_64bits(data, size);
#endif
}

// The same hash over bytes that arrive in pieces: feeding every piece in order gives exactly
// content_hash() of the whole. syncd hashes a frame window by window as it lands in its slot,
// while the window is still in L2, instead of walking 8 MB of cold memory in one go at publish
// time: that single 0.2-0.4 ms step was the longest the loop was away from other sockets (an
// audio read) in each frame (docs/decisions.md). Pure; one thread per instance. No allocation:
// the state lives in the object (576 bytes, 64-byte aligned).
class ContentHasher {
 public:
  ContentHasher() { reset(); }
  void reset() { XXH3_64bits_reset(&state_); }
  void update(const void* data, size_t size) {
#if defined(__x86_64__)
    XXH3_64bits_update_dispatch(&state_, data, size);
#else
    XXH3_64bits_update(&state_, data, size);
#endif
  }
  uint64_t digest() const {
    return XXH3_64bits_digest(&state_);
  }

 private:
  XXH3_state_t state_;
};

}  // namespace syncd::core
