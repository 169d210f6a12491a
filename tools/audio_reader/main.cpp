// sync-audio-reader: reads a syncd audio source over the control protocol (audio.read ->
// NAUD packets) for a duration, checks continuity (no first_frame gaps, no dropped frames) and,
// optionally, the exact test signal; prints RTT percentiles and a JSON summary line; can write
// the first channels to a float WAV file.
//
// Verification modes (docs/audio.md):
//   synthetic: sample (frame, ch) == (frame * C + ch) mod 2^24, frame = absolute first_frame + i.
//   tone:      the same counter but with an unknown offset (sync-jack-tone's own frame count):
//              locks on the first non-silent frame, then checks every sample exactly; silence
//              (every channel 0) between tone runs is allowed and re-locks.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../producer/tool_error.h"
#include "audio/naud.h"
#include "audio/test_signal.h"
#include "naud_client.h"

namespace {

using syncd::audio::kCounterModulus;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void sleep_until(uint64_t t) {
  timespec ts{time_t(t / 1'000'000'000u), long(t % 1'000'000'000u)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

struct Verifier {
  enum Mode { kNone, kSynthetic, kTone } mode = kNone;
  uint32_t channels = 0;
  uint64_t exact_frames = 0;
  uint64_t silent_frames = 0;
  uint64_t mismatched_frames = 0;
  uint64_t locks = 0;
  bool locked = false;
  uint32_t next_value = 0;  // tone: expected value of channel 0 of the next frame
  std::string first_mismatch;

  void frame_mismatch(uint64_t frame, uint32_t ch, float got, float want) {
    if (mismatched_frames++ == 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "frame %llu channel %u: got %.1f, expected %.1f",
                    static_cast<unsigned long long>(frame), ch, double(got), double(want));
      first_mismatch = buf;
    }
  }

  // A discontinuity in first_frame: the tone's offset may have changed.
  void reset() { locked = false; }

  void check(const float* s, uint64_t first_frame, uint32_t frames) {
    if (mode == kNone) return;
    const uint32_t C = channels;
    for (uint32_t f = 0; f < frames; ++f, s += C) {
      const uint64_t frame = first_frame + f;
      if (mode == kSynthetic) {
        uint32_t v = uint32_t((frame * C) % kCounterModulus);
        bool ok = true;
        for (uint32_t c = 0; c < C && ok; ++c) {
          const float want = float((v + c) % kCounterModulus);
          if (std::memcmp(&s[c], &want, 4) != 0) {
            frame_mismatch(frame, c, s[c], want);
            ok = false;
          }
        }
        exact_frames += ok;
        continue;
      }
      bool silent = true;
      for (uint32_t c = 0; c < C; ++c) silent = silent && s[c] == 0.0f;
      if (silent) {
        ++silent_frames;
        locked = false;
        continue;
      }
      if (!locked) {
        locked = true;
        ++locks;
        next_value = uint32_t(s[0]);
      }
      bool ok = true;
      for (uint32_t c = 0; c < C && ok; ++c) {
        const float want = float((next_value + c) % kCounterModulus);
        if (std::memcmp(&s[c], &want, 4) != 0) {
          frame_mismatch(frame, c, s[c], want);
          ok = false;
        }
      }
      if (ok) {
        ++exact_frames;
      } else {
        locked = false;  // re-lock on the next frame so one bad frame is one mismatch
      }
      next_value = uint32_t((uint64_t(next_value) + C) % kCounterModulus);
    }
  }
};

// 32-bit float WAV (WAVE_FORMAT_IEEE_FLOAT); sizes patched on close.
class WavWriter {
 public:
  bool open(const std::string& path, uint32_t channels, uint32_t rate) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) return false;
    channels_ = channels;
    rate_ = rate;
    write_header(0);
    return true;
  }
  void write(const float* interleaved, uint32_t frames, uint32_t source_channels) {
    if (!f_) return;
    if (channels_ == source_channels) {
      std::fwrite(interleaved, sizeof(float), size_t(frames) * channels_, f_);
    } else {
      scratch_.resize(size_t(frames) * channels_);  // grows to the largest packet, then stays
      for (uint32_t i = 0; i < frames; ++i)
        std::memcpy(&scratch_[size_t(i) * channels_], interleaved + size_t(i) * source_channels,
                    channels_ * sizeof(float));
      std::fwrite(scratch_.data(), sizeof(float), scratch_.size(), f_);
    }
    frames_ += frames;
  }
  void close() {
    if (!f_) return;
    std::fseek(f_, 0, SEEK_SET);
    write_header(frames_);
    std::fclose(f_);
    f_ = nullptr;
  }

 private:
  void write_header(uint64_t frames) {
    const uint32_t data = uint32_t(std::min<uint64_t>(frames * channels_ * 4, 0xFFFFFFF0u));
    auto u32 = [&](uint32_t v) { std::fwrite(&v, 4, 1, f_); };
    auto u16 = [&](uint16_t v) { std::fwrite(&v, 2, 1, f_); };
    std::fwrite("RIFF", 1, 4, f_);
    u32(36 + data);
    std::fwrite("WAVEfmt ", 1, 8, f_);
    u32(16);
    u16(3);  // IEEE float
    u16(uint16_t(channels_));
    u32(rate_);
    u32(rate_ * channels_ * 4);
    u16(uint16_t(channels_ * 4));
    u16(32);
    std::fwrite("data", 1, 4, f_);
    u32(data);
  }
  std::FILE* f_ = nullptr;
  uint32_t channels_ = 0, rate_ = 0;
  uint64_t frames_ = 0;
  std::vector<float> scratch_;
};

double percentile(std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(std::ceil(p / 100.0 * double(v.size()))) - 1);
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return double(v[k]) / 1000.0;  // us -> ms
}

}  // namespace

int main(int argc, char** argv) {
  using namespace syncd;
  CLI::App app{"sync-audio-reader: read and check a syncd audio source"};
  std::string url = "ws://127.0.0.1:54997/ws";
  double seconds = 10;
  uint32_t interval_ms = 5;
  uint32_t max_frames = 0;
  uint32_t min_frames = 0;
  std::string verify = "none";
  std::string wav_path;
  uint32_t wav_channels = 2;
  bool check = false;
  bool quiet = false;
  bool realtime = false;
  app.add_option("--url", url, "syncd WebSocket URL")->capture_default_str();
  app.add_option("--seconds", seconds, "How long to read")->capture_default_str();
  app.add_option("--interval-ms", interval_ms, "Read period (absolute schedule)")
      ->capture_default_str();
  app.add_option("--max-frames", max_frames, "Frames per read at most (0: all available)");
  app.add_option("--min-frames", min_frames, "Ask syncd to hold a read until this many frames");
  app.add_option("--verify", verify, "Check samples: none|synthetic|tone")
      ->check(CLI::IsMember({"none", "synthetic", "tone"}))
      ->capture_default_str();
  app.add_option("--wav", wav_path, "Write the first channels to this float WAV file");
  app.add_option("--wav-channels", wav_channels, "Channels written to --wav")
      ->capture_default_str();
  app.add_flag("--check", check, "Exit 4 unless continuous, drop-free and (with --verify) exact");
  app.add_flag("--quiet", quiet, "Only the JSON summary line");
  app.add_flag("--realtime", realtime,
               "Run at SCHED_FIFO when permitted, so the RTT measures syncd, not our wake-ups");
  CLI11_PARSE(app, argc, argv);
  bool got_realtime = false;
  if (realtime) {
    sched_param param{};
    param.sched_priority = 50;  // below the capture thread (70)
    got_realtime = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
  }

  try {
    // ws://HOST:PORT/PATH
    std::string rest = url.substr(url.rfind("ws://", 0) == 0 ? 5 : 0);
    const size_t slash = rest.find('/');
    const std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
    const std::string authority = rest.substr(0, slash);
    const size_t colon = authority.rfind(':');
    const std::string host = authority.substr(0, colon);
    const uint16_t port =
        colon == std::string::npos ? 80 : uint16_t(std::stoi(authority.substr(colon + 1)));
    audio_reader::NaudClient client(host, port, path, (8u << 20), 5000);

    ws::Opcode op;
    const uint8_t* payload = nullptr;
    size_t size = 0;
    auto expect_text = [&](const char* what) {
      if (!client.next_message(5000, op, payload, size) || op != ws::Opcode::kText)
        throw producer::ToolError(producer::kExitIo,
                                  std::string("no reply to ") + what + ": " + client.failure());
      return nlohmann::json::parse(payload, payload + size);
    };
    client.send_text(R"({"type":"hello","protocol":1,"client":"sync-audio-reader"})");
    expect_text("hello");
    client.send_text(R"({"type":"audio.info"})");
    const nlohmann::json info = expect_text("audio.info");
    if (info.value("type", "") != "audio.info")
      throw producer::ToolError(producer::kExitRefused, "audio.info refused: " + info.dump());
    const uint32_t channels = info["channels"].get<uint32_t>();
    uint32_t rate = info["rate"].get<uint32_t>();

    Verifier verifier;
    verifier.channels = channels;
    if (verify == "synthetic") verifier.mode = Verifier::kSynthetic;
    if (verify == "tone") verifier.mode = Verifier::kTone;
    WavWriter wav;
    if (!wav_path.empty() && !wav.open(wav_path, std::min(wav_channels, channels), rate))
      throw producer::ToolError(producer::kExitUsage, "cannot write " + wav_path);

    const std::string request = nlohmann::json({{"type", "audio.read"},
                                                {"max_frames", max_frames},
                                                {"min_frames", min_frames},
                                                {"timeout_ms", 1000}})
                                    .dump();
    std::vector<float> aligned;
    std::vector<uint32_t> rtt_us;
    rtt_us.reserve(size_t(seconds * 1000.0 / std::max(1u, interval_ms)) + 1024);
    // Index of the first read of each 10-second window, so a tail can be placed in time (a
    // burst of slow seconds reads differently from latency spread evenly over the run).
    constexpr uint64_t kWindowNs = 10'000'000'000ull;
    std::vector<size_t> window_starts;
    window_starts.reserve(size_t(seconds / 10.0) + 2);
    uint64_t packets = 0, frames = 0, gaps = 0, missing = 0, flagged = 0, busy = 0;
    uint64_t dropped = 0, gap_frames = 0, xruns = 0, next_frame = 0;
    bool started = false;
    const uint64_t t_start = now_ns();
    const uint64_t t_end = t_start + uint64_t(seconds * 1e9);
    uint64_t t_last = t_start, next_tick = t_start;
    uint64_t last_print = t_start;
    for (;;) {
      const uint64_t t0 = now_ns();
      const bool final_read = t0 >= t_end;
      if (t0 - t_start >= window_starts.size() * kWindowNs) window_starts.push_back(rtt_us.size());
      client.send_text(request);
      if (!client.next_message(5000, op, payload, size))
        throw producer::ToolError(producer::kExitIo, "audio.read: " + client.failure());
      const uint64_t t1 = now_ns();
      rtt_us.push_back(uint32_t(std::min<uint64_t>((t1 - t0) / 1000, UINT32_MAX)));
      if (op == ws::Opcode::kText) {
        const auto j = nlohmann::json::parse(payload, payload + size, nullptr, false);
        if (j.is_object() && j.value("code", "") == "audio_busy") {
          ++busy;
        } else {
          throw producer::ToolError(
              producer::kExitRefused,
              "audio.read refused: " + std::string(reinterpret_cast<const char*>(payload), size));
        }
      } else {
        audio::NaudHeader h;
        const audio::NaudError err = audio::parse_naud_packet({payload, size}, h);
        if (err != audio::NaudError::kNone)
          throw producer::ToolError(producer::kExitIo,
                                    std::string("bad NAUD packet: ") + audio::naud_error_name(err));
        ++packets;
        t_last = t1;
        rate = h.rate;
        dropped = h.dropped_frames;
        gap_frames = h.gap_frames;
        xruns = h.xruns;
        if (h.flags & audio::kNaudFlagDiscontinuity) ++flagged;
        if (h.frames > 0) {
          if (started && h.first_frame != next_frame) {
            ++gaps;
            missing += h.first_frame > next_frame ? h.first_frame - next_frame : 0;
            verifier.reset();
          }
          started = true;
          next_frame = h.first_frame + h.frames;
          frames += h.frames;
          // The payload follows a 2-10 byte WebSocket header, so it is not float-aligned: copy
          // it into an aligned buffer (grown once to the largest packet) before reading floats.
          aligned.resize(std::max(aligned.size(), size_t(h.frames) * h.channels));
          std::memcpy(aligned.data(), payload + audio::kNaudHeaderBytes, h.payload_bytes());
          const float* samples = aligned.data();
          verifier.check(samples, h.first_frame, h.frames);
          wav.write(samples, h.frames, channels);
        }
      }
      if (!quiet && t1 - last_print >= 1'000'000'000u) {
        last_print = t1;
        std::fprintf(stderr, "\r%.0f s: %llu frames, gaps %llu, dropped %llu, mismatches %llu   ",
                     double(t1 - t_start) / 1e9, static_cast<unsigned long long>(frames),
                     static_cast<unsigned long long>(gaps),
                     static_cast<unsigned long long>(dropped),
                     static_cast<unsigned long long>(verifier.mismatched_frames));
      }
      if (final_read) break;
      next_tick += uint64_t(interval_ms) * 1'000'000u;
      if (next_tick < t1) next_tick = t1;  // behind: read at once, do not burst to catch up
      sleep_until(std::min(next_tick, t_end));
    }
    wav.close();
    client.close();
    if (!quiet) std::fputc('\n', stderr);

    const double elapsed = double(t_last - t_start) / 1e9;
    const double expected = elapsed * rate;
    const double continuity = expected > 0 ? double(frames) / expected : 0;
    std::vector<uint32_t> sorted = rtt_us;
    nlohmann::json rtt = {
        {"count", rtt_us.size()},
        {"p50", percentile(sorted, 50)},
        {"p95", percentile(sorted, 95)},
        {"p99", percentile(sorted, 99)},
        {"max",
         sorted.empty() ? 0.0 : double(*std::max_element(sorted.begin(), sorted.end())) / 1000.0}};
    nlohmann::json windows = nlohmann::json::array();
    for (size_t w = 0; w < window_starts.size(); ++w) {
      const size_t end = w + 1 < window_starts.size() ? window_starts[w + 1] : rtt_us.size();
      std::vector<uint32_t> part(rtt_us.begin() + long(window_starts[w]),
                                 rtt_us.begin() + long(end));
      if (part.empty()) continue;
      windows.push_back({{"start_s", double(w * kWindowNs) / 1e9},
                         {"count", part.size()},
                         {"p50", percentile(part, 50)},
                         {"p99", percentile(part, 99)},
                         {"max", double(*std::max_element(part.begin(), part.end())) / 1000.0}});
    }
    rtt["windows_10s"] = std::move(windows);
    const bool verify_ok = verifier.mode == Verifier::kNone ||
                           (verifier.mismatched_frames == 0 && verifier.exact_frames > 0);
    const bool ok = gaps == 0 && dropped == 0 && verify_ok && std::abs(continuity - 1.0) <= 0.001;
    nlohmann::json summary = {
        {"channels", channels},
        {"rate", rate},
        {"seconds", elapsed},
        {"packets", packets},
        {"frames", frames},
        {"expected_frames", expected},
        {"continuity", continuity},
        {"first_frame_gaps", gaps},
        {"missing_frames", missing},
        {"discontinuity_flags", flagged},
        {"dropped_frames", dropped},
        {"gap_frames", gap_frames},
        {"xruns", xruns},
        {"busy_replies", busy},
        {"rtt_ms", rtt},
        {"verify",
         {{"mode", verify},
          {"exact_frames", verifier.exact_frames},
          {"silent_frames", verifier.silent_frames},
          {"mismatched_frames", verifier.mismatched_frames},
          {"locks", verifier.locks},
          {"first_mismatch", verifier.first_mismatch}}},
        {"realtime", got_realtime},
        {"ok", ok},
    };
    if (!quiet) {
      std::printf(
          "frames %llu / expected %.0f: continuity %.5f; gaps %llu, dropped %llu, "
          "gap_frames %llu; verify %s: %llu exact, %llu mismatched\n",
          static_cast<unsigned long long>(frames), expected, continuity,
          static_cast<unsigned long long>(gaps), static_cast<unsigned long long>(dropped),
          static_cast<unsigned long long>(gap_frames), verify.c_str(),
          static_cast<unsigned long long>(verifier.exact_frames),
          static_cast<unsigned long long>(verifier.mismatched_frames));
      std::printf("read RTT ms: p50 %.3f  p95 %.3f  p99 %.3f  max %.3f (%zu reads)\n",
                  rtt["p50"].get<double>(), rtt["p95"].get<double>(), rtt["p99"].get<double>(),
                  rtt["max"].get<double>(), rtt_us.size());
    }
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
    return check && !ok ? 4 : 0;
  } catch (const producer::ToolError& e) {
    std::fprintf(stderr, "sync-audio-reader: %s\n", e.what());
    return e.code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync-audio-reader: %s\n", e.what());
    return 3;
  }
}
