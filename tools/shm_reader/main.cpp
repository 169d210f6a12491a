// sync-shm-reader: reads syncd's shared-memory frame ring like any local consumer would, and
// checks every frame: its XXH3 content hash over all pixels, read in place (no copy), then the
// slot's seqlock (was it overwritten meanwhile?), and the order of sequence numbers.
//
// Any pixel format the ring carries is read the same way: the hash covers the whole frame, all
// planes. Prints a live line on a terminal and one JSON summary on stdout at the end, with the
// ring's format and plane layout as the reader API reports them.
//
// When the writer dies (SYNC_SHM_EDEAD) or restarts (SYNC_SHM_EREPLACED), the reader stops and
// says so ("end" in the summary), or with --reattach waits for the new ring and reads on.
// Exit codes: 0 done, 1 usage, 3 the ring could not be opened, 4 verification failures or torn
// frames, 5 the writer died or was replaced (without --reattach, or no new ring came in time).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/content_hash.h"
#include "sync/shm_reader.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

const char* end_name(int code) {
  switch (code) {
    case SYNC_SHM_OK:
      return "";
    case SYNC_SHM_EENDED:
      return "ended";
    case SYNC_SHM_EDEAD:
      return "writer_dead";
    case SYNC_SHM_EREPLACED:
      return "writer_replaced";
  }
  return sync_shm_strerror(code);
}

struct ReadEvent {
  uint64_t sequence;
  uint64_t publish_ns;
  uint64_t read_ns;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reads and verifies frames from syncd's shared-memory ring"};
  std::string path = "/dev/shm/sync-" + std::to_string(::getuid()) + ".frames";
  double seconds = 0;
  uint64_t max_frames = 0;
  std::string events_path;
  bool quiet = false;
  bool reattach = false;
  int open_wait_s = 10;
  uint32_t writer_uid = uint32_t(::geteuid());
  app.add_option("--path", path, "Ring file")->capture_default_str();
  app.add_option("--seconds", seconds, "Read for this long");
  app.add_option("--frames", max_frames, "Read this many frames");
  app.add_option("--events", events_path, "CSV of sequence,publish_ns,read_ns per frame");
  app.add_option("--open-wait", open_wait_s, "Seconds to wait for the ring to appear")
      ->capture_default_str();
  app.add_flag("--quiet", quiet, "No live line");
  app.add_option("--writer-uid", writer_uid,
                 "The uid that must own the ring (syncd's user; default: this process's)")
      ->capture_default_str();
  app.add_flag("--reattach", reattach,
               "When the writer dies or restarts, wait for its new ring and read on");
  CLI11_PARSE(app, argc, argv);
  if (seconds <= 0 && max_frames == 0) {
    std::fprintf(stderr, "sync-shm-reader: give --seconds or --frames\n");
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  sync_shm_reader* reader = nullptr;
  int rc = SYNC_SHM_ENOENT;
  const uint64_t open_deadline = monotonic_ns() + uint64_t(open_wait_s) * 1'000'000'000u;
  // A missing ring, one still being created, or one whose writer died (its successor may be on
  // its way) are waited for; a ring that is not trusted is refused at once.
  while ((rc = sync_shm_open_as(path.c_str(), writer_uid, &reader)) != SYNC_SHM_OK && !g_stop) {
    if (monotonic_ns() > open_deadline ||
        (rc != SYNC_SHM_ENOENT && rc != SYNC_SHM_EFORMAT && rc != SYNC_SHM_EDEAD)) {
      std::fprintf(stderr, "sync-shm-reader: %s: %s\n", path.c_str(), sync_shm_strerror(rc));
      return 3;
    }
    usleep(20'000);
  }
  if (!reader) return 3;
  const sync_shm_header* info = sync_shm_info(reader);
  const sync_shm_layout* layout = sync_shm_get_layout(reader);

  // Preallocated: at most 1000 frames a second of events, so the loop never allocates.
  std::vector<ReadEvent> events;
  if (!events_path.empty()) events.reserve(max_frames ? max_frames : size_t(seconds * 1000) + 1000);
  std::vector<uint32_t> per_second;  // complete seconds' unique frames
  per_second.reserve(size_t(seconds) + 16);

  uint64_t verified = 0, verify_failures = 0, unhashed = 0, duplicates = 0, reordered = 0;
  uint64_t last_sequence = 0, frame_bytes_read = 0;
  bool any = false;
  uint64_t first_bin = 0, bin = 0, bin_count = 0;
  bool binning = false;
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = seconds > 0 ? start + uint64_t(seconds * 1e9) : UINT64_MAX;
  uint64_t last_status = start;
  const bool live = !quiet && ::isatty(STDERR_FILENO);
  int end_reason = SYNC_SHM_OK;
  uint64_t writer_changes = 0;  // dead or replaced writers seen (with --reattach: reattached)
  std::vector<uint64_t> generations{info->generation};

  while (!g_stop) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) break;
    if (max_frames && verified + verify_failures + unhashed >= max_frames) break;
    const int wait_ms = int(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 500));
    sync_shm_frame frame;
    rc = sync_shm_next(reader, wait_ms, &frame);
    const uint64_t read_ns = monotonic_ns();
    if (rc == SYNC_SHM_ETIMEDOUT) continue;
    if ((rc == SYNC_SHM_EDEAD || rc == SYNC_SHM_EREPLACED) && reattach) {
      ++writer_changes;
      std::fprintf(stderr, "sync-shm-reader: %s: %s; waiting for the new ring\n", path.c_str(),
                   sync_shm_strerror(rc));
      int reopened = sync_shm_reopen(reader);
      while (reopened != SYNC_SHM_OK && !g_stop && monotonic_ns() < deadline) {
        usleep(20'000);
        reopened = sync_shm_reopen(reader);
      }
      if (reopened != SYNC_SHM_OK) {
        end_reason = rc;
        break;
      }
      generations.push_back(info->generation);
      any = false;  // the new writer's producer numbers its frames afresh
      continue;
    }
    if (rc != SYNC_SHM_OK) {
      end_reason = rc;
      if (rc == SYNC_SHM_EDEAD || rc == SYNC_SHM_EREPLACED) {
        ++writer_changes;
        std::fprintf(stderr, "sync-shm-reader: %s: %s\n", path.c_str(), sync_shm_strerror(rc));
      }
      break;
    }
    bool hash_ok = true;
    const bool hashed = frame.flags & 1u;
    if (hashed)
      hash_ok = syncd::core::content_hash(frame.pixels, frame.bytes) == frame.content_hash;
    if (sync_shm_check(reader, &frame) != SYNC_SHM_OK) continue;  // overwritten: counted as torn
    frame_bytes_read = frame.bytes;
    if (!hashed) {
      ++unhashed;
    } else if (hash_ok) {
      ++verified;
    } else {
      ++verify_failures;
    }
    if (any && frame.sequence == last_sequence) ++duplicates;
    if (any && frame.sequence < last_sequence) ++reordered;
    const bool unique = !any || frame.sequence > last_sequence;
    if (unique) last_sequence = frame.sequence;
    any = true;
    if (!events_path.empty() && events.size() < events.capacity())
      events.push_back({frame.sequence, frame.publish_time_ns, read_ns});
    // Unique frames per whole second of CLOCK_MONOTONIC, the rule syncd uses (docs/protocol.md).
    const uint64_t this_bin = read_ns / 1'000'000'000u;
    if (!binning) {
      binning = true;
      first_bin = bin = this_bin;
    }
    while (bin < this_bin) {
      if (bin != first_bin) per_second.push_back(uint32_t(bin_count));
      bin_count = 0;
      ++bin;
    }
    if (unique) ++bin_count;
    if (live && read_ns - last_status > 1'000'000'000u) {
      last_status = read_ns;
      const sync_shm_counters c = sync_shm_get_counters(reader);
      std::fprintf(
          stderr,
          "\r\x1b[2Ksync-shm-reader %s %ux%u %s | fps %u | read %llu skipped %llu torn %llu "
          "failed %llu",
          info->stream_name, layout->width, layout->height, sync_shm_format_name(layout->format),
          per_second.empty() ? 0u : per_second.back(), static_cast<unsigned long long>(c.frames),
          static_cast<unsigned long long>(c.skipped), static_cast<unsigned long long>(c.torn),
          static_cast<unsigned long long>(verify_failures));
    }
  }
  if (live) std::fputs("\n", stderr);
  const sync_shm_counters c = sync_shm_get_counters(reader);
  const double elapsed = double(monotonic_ns() - start) / 1e9;

  if (!events_path.empty()) {
    if (FILE* f = std::fopen(events_path.c_str(), "w")) {
      std::fprintf(f, "sequence,publish_ns,read_ns\n");
      for (const ReadEvent& e : events)
        std::fprintf(f, "%llu,%llu,%llu\n", static_cast<unsigned long long>(e.sequence),
                     static_cast<unsigned long long>(e.publish_ns),
                     static_cast<unsigned long long>(e.read_ns));
      std::fclose(f);
    }
  }
  nlohmann::json planes = nlohmann::json::array();
  for (uint32_t i = 0; i < layout->plane_count; ++i)
    planes.push_back({{"offset", layout->planes[i].offset},
                      {"stride", layout->planes[i].stride},
                      {"rows", layout->planes[i].rows}});
  nlohmann::json summary = {
      {"path", path},
      {"stream", info->stream_name},
      {"width", info->width},
      {"height", info->height},
      {"format", sync_shm_format_name(layout->format)},
      {"planes", std::move(planes)},
      {"frame_bytes", layout->frame_bytes},
      // The size of the frames actually read, as the reader API handed them out (0: none read).
      {"frame_bytes_read", frame_bytes_read},
      {"slots", info->slot_count},
      {"frames_read", verified + verify_failures + unhashed},
      {"verified", verified},
      {"unhashed", unhashed},
      {"verify_failures", verify_failures},
      {"skipped", c.skipped},
      {"torn", c.torn},
      {"sequence_duplicates", duplicates},
      {"sequence_reordered", reordered},
      {"unique_fps_per_second", per_second},
      {"seconds", elapsed},
      {"ended", end_reason == SYNC_SHM_EENDED},
      // Why reading stopped before the deadline: "ended", "writer_dead", "writer_replaced",
      // another error's name, or "" (deadline, frame count or signal).
      {"end", end_name(end_reason)},
      {"writer_changes", writer_changes},
      {"reattached", c.reopens},
      {"generations", generations},
      {"writer_pid", info->writer_pid},
  };
  std::printf("%s\n", summary.dump().c_str());
  sync_shm_close(reader);
  if (end_reason == SYNC_SHM_EDEAD || end_reason == SYNC_SHM_EREPLACED) return 5;
  return (verify_failures || c.torn) ? 4 : 0;
}
