#include "headtrack/replay.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/text.h"
#include "headtrack/hid_descriptor.h"

namespace syncd::headtrack {
namespace {

// A line without its spaces, tabs and CR (a file saved on Windows) at either end.
std::string_view trim(std::string_view s) {
  return core::trim(s, " \t\r");
}

}  // namespace

bool parse_replay(std::string_view text, ReplayFile& out, std::string* error) {
  out = ReplayFile{};
  bool have_descriptor = false;
  size_t line_no = 0;
  auto fail = [&](const std::string& what) {
    if (error) *error = "line " + std::to_string(line_no) + ": " + what;
    return false;
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (!have_descriptor) {
      if (line.substr(0, 11) == "descriptor ") line.remove_prefix(11);
      if (!parse_hex(line, out.descriptor) || out.descriptor.empty()) {
        return fail("expected the report descriptor as hex");
      }
      have_descriptor = true;
      continue;
    }
    if (line.substr(0, 8) == "feature ") {
      std::vector<uint8_t> bytes;
      if (!parse_hex(line.substr(8), bytes) || bytes.empty()) return fail("bad feature hex");
      out.features.push_back(std::move(bytes));
      continue;
    }
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) return fail("expected 't_ms report_hex'");
    ReplayReport r;
    const auto [ptr, ec] = std::from_chars(line.data(), line.data() + space, r.t_ms);
    if (ec != std::errc() || ptr != line.data() + space || !(r.t_ms >= 0)) {
      return fail("bad timestamp");
    }
    if (!out.reports.empty() && r.t_ms < out.reports.back().t_ms) {
      return fail("timestamp goes backwards");
    }
    if (!parse_hex(line.substr(space + 1), r.bytes) || r.bytes.empty()) {
      return fail("bad report hex");
    }
    out.reports.push_back(std::move(r));
  }
  if (!have_descriptor) {
    if (error) *error = "no report descriptor";
    return false;
  }
  return true;
}

bool load_replay(const std::string& path, ReplayFile& out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string e;
  if (!parse_replay(ss.str(), out, &e)) {
    if (error) *error = path + ": " + e;
    return false;
  }
  return true;
}

ReplayRecorder::~ReplayRecorder() {
  close();
}

bool ReplayRecorder::open(const std::string& path, std::span<const uint8_t> descriptor,
                          std::span<const std::vector<uint8_t>> features,
                          const std::string& comment, std::string* error) {
  close();
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) {
    if (error) *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::fprintf(file_,
               "# sync-headtrack replay v1: descriptor hex, optional feature lines, "
               "then 't_ms report_hex' lines\n");
  if (!comment.empty()) std::fprintf(file_, "# %s\n", comment.c_str());
  std::fprintf(file_, "%s\n", to_hex(descriptor).c_str());
  for (const auto& f : features) std::fprintf(file_, "feature %s\n", to_hex(f).c_str());
  std::fflush(file_);
  return true;
}

void ReplayRecorder::write(double t_ms, std::span<const uint8_t> report) {
  if (!file_) return;
  static constexpr char kDigits[] = "0123456789abcdef";
  char line[32 + 3 * 256];
  auto r = std::to_chars(line, line + 32, t_ms, std::chars_format::fixed, 3);
  char* p = r.ptr;
  const size_t n = std::min<size_t>(report.size(), 256);
  for (size_t i = 0; i < n; ++i) {
    *p++ = ' ';
    *p++ = kDigits[report[i] >> 4];
    *p++ = kDigits[report[i] & 15];
  }
  *p++ = '\n';
  std::fwrite(line, 1, size_t(p - line), file_);
}

void ReplayRecorder::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace syncd::headtrack
