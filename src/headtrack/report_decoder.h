// Decoding of head-tracker input reports: bytes in, one TrackerSample out.
//
// Pure code: no I/O, clocks or logs, no allocation and no exceptions after construction. Each
// value is read with one bounded 8-byte little-endian load, a shift and a mask (never bit by bit),
// and scaled with constants converted once when the decoder is built. A ReportDecoder is owned by
// one thread (in syncd: the HID reader thread); it is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "headtrack/head_tracker.h"

namespace syncd::headtrack {

struct TrackerSample {
  double rotation[3] = {};          // rotation vector, radians (axis * angle), head frame
  double angular_velocity[3] = {};  // rad/s, head frame; zero when absent
  bool has_angular_velocity = false;
  bool has_counter = false;
  uint32_t counter = 0;  // reference-frame discontinuity counter (raw)
  // CLOCK_MONOTONIC when the report was read (a paced replay too; an unpaced replay: the
  // file's time); set by the caller.
  int64_t t_ns = 0;
};

enum class DecodeStatus : uint8_t {
  kOk = 0,
  kOtherReport,  // a report with another ID: not for us, ignored
  kTooShort,     // shorter than the descriptor says
  kOutOfRange,   // a raw value outside [logical_min, logical_max] (e.g. 0x8000): dropped
};

const char* to_string(DecodeStatus status);

struct DecodeCounters {
  uint64_t ok = 0;
  uint64_t other_report = 0;
  uint64_t too_short = 0;
  uint64_t out_of_range = 0;
};

// Raw bits [bit_offset, bit_offset + bit_size) of a little-endian byte string, bit_size 1..32.
// Bytes past `size` read as zero. One 8-byte load when the bytes are there; never a bit loop.
uint32_t extract_bits(const uint8_t* data, size_t size, uint32_t bit_offset, uint32_t bit_size);

// The scaling of docs/headtracker.md in one place, shared by the decoder and its reference.
double scale_value(const ValueLocation& v, int64_t logical);

class ReportDecoder {
 public:
  ReportDecoder() = default;
  explicit ReportDecoder(const TrackerLayout& layout);

  // Decodes one report as read from hidraw (byte 0 = report ID when the device uses IDs).
  // On anything but kOk `out` is left untouched.
  DecodeStatus decode(std::span<const uint8_t> report, TrackerSample& out);

  const DecodeCounters& counters() const { return counters_; }
  size_t report_bytes() const { return report_bytes_; }

 private:
  // One value, precomputed: where it is and the doubles the scaling formula needs.
  struct Slot {
    uint32_t byte_offset = 0;
    uint8_t shift = 0;
    uint8_t bits = 0;
    bool is_signed = false;
    uint32_t mask = 0;
    int64_t logical_min = 0;
    int64_t logical_max = 0;
    double physical_min = 0;
    double physical_range = 0;
    double logical_range = 0;
    double pow10 = 1;
  };
  static Slot make_slot(const ValueLocation& v);
  bool read_slot(const Slot& s, const uint8_t* payload, size_t size, int64_t* logical) const;
  static double scale(const Slot& s, int64_t logical);

  bool valid_ = false;
  bool uses_report_ids_ = false;
  uint8_t report_id_ = 0;
  size_t report_bytes_ = 0;
  bool has_gyro_ = false;
  bool has_counter_ = false;
  Slot slots_[7];  // rotation x/y/z, angular velocity x/y/z, counter
  DecodeCounters counters_;
};

}  // namespace syncd::headtrack
