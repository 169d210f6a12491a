// Replay files: a recorded head-tracker session as text, so the whole bridge runs without
// hardware (docs/headtracker.md, "Replay format").
//
//   # comment lines start with '#'
//   05 20 09 e1 a1 01 ...          first data line: the report descriptor, hex
//   feature 02 23 41 6e ...        optional: a feature report as read (e.g. the description)
//   0 01 00 00 00 00 55 15 ...     then one input report per line: t_ms, hex bytes
//   40.5 01 ...
//
// parse_replay() is pure; load_replay() reads a file. ReplayRecorder writes the same format; it is
// used by one thread (the HID reader thread when recording a live device).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace syncd::headtrack {

struct ReplayReport {
  double t_ms = 0;
  std::vector<uint8_t> bytes;
};

struct ReplayFile {
  std::vector<uint8_t> descriptor;
  std::vector<std::vector<uint8_t>> features;
  std::vector<ReplayReport> reports;
};

// False with *error = "line N: ..." on malformed input. Timestamps must not go backwards.
bool parse_replay(std::string_view text, ReplayFile& out, std::string* error);
bool load_replay(const std::string& path, ReplayFile& out, std::string* error);

class ReplayRecorder {
 public:
  ReplayRecorder() = default;
  ~ReplayRecorder();
  ReplayRecorder(const ReplayRecorder&) = delete;
  ReplayRecorder& operator=(const ReplayRecorder&) = delete;

  // Creates/truncates path and writes the header, descriptor and feature lines.
  bool open(const std::string& path, std::span<const uint8_t> descriptor,
            std::span<const std::vector<uint8_t>> features, const std::string& comment,
            std::string* error);
  // One report line; formats into a stack buffer (no allocation). t_ms relative to the first.
  void write(double t_ms, std::span<const uint8_t> report);
  void close();
  bool is_open() const { return file_ != nullptr; }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace syncd::headtrack
