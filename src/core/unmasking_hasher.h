// A frame's content hash (core::content_hash: XXH3-64, seed 0) computed while the frame's bytes
// are unmasked, in the same pass over each window as it lands in the frame's buffer.
//
// Written by hand because it is the ingest's hot path: every byte of a verified 1080p frame
// (8.3 MB, up to 500 times a second at max rate) is unmasked (a WebSocket client masks its
// payload, RFC 6455 section 5.3) and then hashed. As two passes over a 256-KiB window the XOR
// costs ~140 us a frame on top of libxxhash's ~190 us, and it was the whole of the ingest's CPU
// over a raw TCP sink's (docs/benchmarks.md). Fused, each 64-byte stripe is loaded once, XORed,
// stored and accumulated while in registers: ~225 us for both. libxxhash has no entry point
// that takes a transform of its input, so the XXH3 long-input loop is written here, following
// the XXH3 specification (xxhash's doc/xxhash_spec.md), with libxxhash's own default secret. The
// digest equals content_hash() of the whole for every length, window split, key and phase (unit
// tests against libxxhash, for every kernel).
//
// Pure; one thread per instance (the caller's: the loop thread in syncd). No allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncd::core {

class UnmaskingHasher {
 public:
  // Which stripe loop runs; kBest is the widest the CPU has (resolved once). Tests pin the others.
  enum class Kernel { kBest, kPortable, kAvx2, kAvx512 };
  // True when `kernel` is compiled in and the CPU has it.
  static bool supported(Kernel kernel);
  static const char* best_kernel_name();

  explicit UnmaskingHasher(Kernel kernel = Kernel::kBest);

  // A new frame whose first byte is `frame`; its bytes follow contiguously, in order.
  void begin(uint8_t* frame);
  // The next `size` bytes of the frame, at frame + bytes_so_far(), still masked: each byte i is
  // XORed in place with key byte (phase + i) % 4, where key byte j == (mask_key >> 8*j) & 0xff
  // (the key as a WebSocket decoder loads it), and hashed. mask_key 0 leaves the bytes as they
  // are, for bytes that arrive unmasked.
  void update(uint8_t* data, size_t size, uint32_t mask_key, uint64_t phase);
  // content_hash() of the bytes so far.
  uint64_t digest() const;
  uint64_t bytes_so_far() const { return filled_; }

 private:
  using StripeFn = void (*)(uint64_t* acc, uint8_t* data, size_t stripes, size_t stripe_in_block,
                            uint64_t mask8, const uint8_t* secret);
  void accumulate_plain(size_t stripe);

  alignas(64) uint64_t acc_[8];
  StripeFn stripes_;  // unmasks and accumulates whole stripes
  uint8_t* frame_ = nullptr;
  uint64_t filled_ = 0;        // bytes of the frame received (and unmasked)
  uint64_t stripes_done_ = 0;  // 64-byte stripes accumulated, from the frame's start
};

}  // namespace syncd::core
