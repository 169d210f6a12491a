// Shared by the C++ peer sinks of the peer benchmark (bench/peers/run.py): the control replies
// sync-producer needs (hello -> welcome, stream.open -> stream.opened), frame verification exactly
// as syncd's test publisher does it (XXH3-64 over every pixel byte via syncd::core::content_hash,
// sequence gaps), CPU accounting and the JSON summary the runner reads.
//
// Each peer owns the transport; this file only sees complete messages. Single-threaded.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/content_hash.h"
#include "media/frame_header.h"

namespace syncd::peers {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Same receive buffer request as syncd and sync-tcp-sink (clamped by net.core.rmem_max).
inline constexpr int kReceiveBufferBytes = 4 << 20;

class PeerSession {
 public:
  explicit PeerSession(std::string server) : server_(std::move(server)) {}

  // steady_cpu_ms_per_frame counts CPU from the end of this frame on (the runner's
  // --warmup-frames), so that connection and buffer set-up stay out of it, as for syncd.
  void set_warmup_frames(uint64_t frames) { warmup_frames_ = frames; }

  // Answers one control (text) message; returns the reply, or "" when none is due.
  std::string on_text(const std::string& text) {
    const auto message = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!message.is_object() || !message.contains("type") || !message["type"].is_string()) {
      return error("bad_message");
    }
    const std::string type = message["type"];
    if (type == "hello") {
      return nlohmann::ordered_json{{"type", "welcome"},
                                    {"protocol", 1},
                                    {"server", server_},
                                    {"frame_header_bytes", media::kFrameHeaderBytes}}
          .dump();
    }
    if (type == "stream.open") {
      width_ = message.value("width", 0u);
      height_ = message.value("height", 0u);
      frame_bytes_ = uint64_t{width_} * height_ * 4;
      return nlohmann::ordered_json{{"type", "stream.opened"},
                                    {"stream", 1},
                                    {"name", message.value("name", std::string("main"))},
                                    {"width", width_},
                                    {"height", height_},
                                    {"format", message.value("format", std::string("rgba8"))},
                                    {"frame_bytes", frame_bytes_},
                                    {"header_bytes", media::kFrameHeaderBytes}}
          .dump();
    }
    if (type == "stream.close") {
      return nlohmann::ordered_json{{"type", "stream.closed"}, {"stream", 1}}.dump();
    }
    return "";  // stats, ping: not part of the benchmark
  }

  // Verifies one complete binary message (56-byte header + pixels).
  void on_frame(const uint8_t* data, size_t size) {
    if (first_byte_ns_ == 0) first_byte_ns_ = now_ns();
    media::FrameHeader header;
    if (size < media::kFrameHeaderBytes ||
        media::parse_frame_header(data, header) != media::FrameHeaderError::kNone ||
        size - media::kFrameHeaderBytes != frame_bytes_) {
      ++bad_frames_;
      return;
    }
    const uint8_t* pixels = data + media::kFrameHeaderBytes;
    if (header.flags & media::frame_flag::kHasContentHash) {
      if (core::content_hash(pixels, frame_bytes_) != header.content_hash) ++hash_failures_;
    } else {
      ++unhashed_frames_;
    }
    if (frames_ > 0 && header.sequence > expected_sequence_) {
      seq_gaps_ += header.sequence - expected_sequence_;
    } else if (frames_ > 0 && header.sequence < expected_sequence_) {
      ++seq_gaps_;
    }
    expected_sequence_ = header.sequence + 1;
    ++frames_;
    last_frame_ns_ = now_ns();
    if (frames_ == warmup_frames_) {
      cpu_after_warmup_ = cpu_seconds();
      warmup_end_ns_ = last_frame_ns_;
    }
  }

  // Call when the connection is accepted, so CPU is counted from there.
  void start_cpu() { cpu_at_accept_ = cpu_after_warmup_ = cpu_seconds(); }
  void note_first_byte() {
    if (first_byte_ns_ == 0) first_byte_ns_ = now_ns();
  }

  uint64_t frame_bytes() const { return frame_bytes_; }
  uint64_t frames() const { return frames_; }

  void print_summary(const std::string& extra_key = "", const std::string& extra_value = "") const {
    const double cpu_end = cpu_seconds();
    const double cpu = cpu_end - cpu_at_accept_;
    const uint64_t steady_frames = frames_ > warmup_frames_ ? frames_ - warmup_frames_ : 0;
    const double seconds = frames_ > 0 ? (last_frame_ns_ - first_byte_ns_) / 1e9 : 0.0;
    nlohmann::ordered_json summary = {
        {"server", server_},
        {"frames", frames_},
        {"hash_failures", hash_failures_},
        {"seq_gaps", seq_gaps_},
        {"bad_frames", bad_frames_},
        {"unhashed_frames", unhashed_frames_},
        {"seconds", seconds},
        {"fps", seconds > 0 ? frames_ / seconds : 0.0},
        {"cpu_seconds", cpu},
        {"cpu_ms_per_frame", frames_ > 0 ? cpu * 1e3 / frames_ : 0.0},
        {"warmup_frames", warmup_frames_},
        {"steady_cpu_ms_per_frame",
         steady_frames > 0 ? (cpu_end - cpu_after_warmup_) * 1e3 / steady_frames : 0.0},
        {"steady_fps", steady_frames > 0 && warmup_end_ns_ > 0
                           ? steady_frames / ((last_frame_ns_ - warmup_end_ns_) / 1e9)
                           : 0.0},
        {"first_byte_monotonic_ns", first_byte_ns_},
        {"last_frame_monotonic_ns", last_frame_ns_},
    };
    if (!extra_key.empty()) summary[extra_key] = extra_value;
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }

 private:
  static std::string error(const char* code) {
    return nlohmann::ordered_json{{"type", "error"}, {"code", code}, {"message", code}}.dump();
  }

  std::string server_;
  uint32_t width_ = 0;
  uint32_t height_ = 0;
  uint64_t frame_bytes_ = 0;
  uint64_t frames_ = 0;
  uint64_t hash_failures_ = 0;
  uint64_t seq_gaps_ = 0;
  uint64_t bad_frames_ = 0;
  uint64_t unhashed_frames_ = 0;
  uint64_t expected_sequence_ = 0;
  int64_t first_byte_ns_ = 0;
  int64_t last_frame_ns_ = 0;
  double cpu_at_accept_ = 0;
  double cpu_after_warmup_ = 0;
  uint64_t warmup_frames_ = 0;
  int64_t warmup_end_ns_ = 0;
};

}  // namespace syncd::peers
