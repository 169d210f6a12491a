// The C reader API of the shared-memory frame ring. See include/sync/shm_reader.h.
#include "sync/shm_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/futex.h"

// One mapped ring. Everything that locates bytes (offsets, stride, slot count) is the copy made
// and checked at open: the shared header is read afterwards only for the fields the writer
// changes (state, futex_word, latest_slot, write_counter, heartbeat_ns) and every value read
// from those is bounds-checked before use.
struct sync_shm_reader {
  uint8_t* base;
  size_t bytes;
  const sync_shm_header* shared;  // the live header in the mapping
  sync_shm_header info;           // the header as checked at open (sync_shm_info)
  sync_shm_layout layout;         // checked against the format at open
  uint64_t last_counter;          // write_counter of the last frame taken (0: none)
  sync_shm_counters counters;
  // What the path named at open, to notice a writer that restarted and replaced the file.
  dev_t dev;
  ino_t ino;
  uint32_t writer_uid;
  int64_t last_liveness_ms;  // when the writer was last checked (see check_writer)
  char* path;
};

namespace {

// How often a waiting reader checks the writer's liveness and the path (a kill(pid, 0) and an
// lstat), and the longest futex wait between two checks.
constexpr int64_t kLivenessCheckMs = 100;
// When the newest slot does not hold the newest frame (the writer is rewriting it, or the header
// is inconsistent), the reader waits for the next publish this long at most before it looks
// again, instead of spinning.
constexpr int kInconsistentWaitMs = 10;

const sync_shm_slot* slot_meta(const sync_shm_reader* r, uint32_t index) {
  return reinterpret_cast<const sync_shm_slot*>(r->base + r->info.slots_offset) + index;
}

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// The layout a frame of this format and size must have (docs/protocol.md, "Pixel formats"):
// planes packed back to back, no row padding. Computed here rather than taken from syncd's media
// library because this library depends on nothing of syncd; tests/unit/shm/shm_ring_test.cpp checks
// that the two agree. False for an unknown format or a size that does not suit it.
bool expected_layout(uint32_t format, uint32_t width, uint32_t height, sync_shm_layout& out) {
  out = sync_shm_layout{};
  out.format = format;
  out.width = width;
  out.height = height;
  // Under 2^30 each (syncd allows 16384), so width * 4 fits 32 bits and no product overflows.
  if (width == 0 || height == 0 || width >= (1u << 30) || height >= (1u << 30)) return false;
  const uint64_t luma = uint64_t(width) * height;
  switch (format) {
    case SYNC_SHM_FORMAT_RGBA8:
    case SYNC_SHM_FORMAT_BGRA8:
      out.plane_count = 1;
      out.planes[0] = {0, width * 4, height};
      out.frame_bytes = luma * 4;
      return true;
    case SYNC_SHM_FORMAT_NV12:
    case SYNC_SHM_FORMAT_I420:
      if (width % 2 || height % 2) return false;  // chroma covers 2x2 pixels
      out.planes[0] = {0, width, height};
      if (format == SYNC_SHM_FORMAT_NV12) {
        out.plane_count = 2;
        out.planes[1] = {luma, width, height / 2};
      } else {
        out.plane_count = 3;
        out.planes[1] = {luma, width / 2, height / 2};
        out.planes[2] = {luma + luma / 4, width / 2, height / 2};
      }
      out.frame_bytes = luma + luma / 2;
      return true;
    case SYNC_SHM_FORMAT_H264:
      // The slot holds an access unit of up to an I420 frame's bytes (odd sizes rounded up).
      out.plane_count = 1;
      out.frame_bytes = luma + 2 * (uint64_t((width + 1) / 2) * ((height + 1) / 2));
      out.planes[0] = {0, uint32_t(out.frame_bytes), 1};
      return out.frame_bytes < (uint64_t(1) << 32);
  }
  return false;
}

bool same_plane(const sync_shm_plane& a, const sync_shm_plane& b) {
  return a.offset == b.offset && a.stride == b.stride && a.rows == b.rows;
}

// Every size and offset of the header against a file of file_bytes, with checked arithmetic: a
// forged header must not make a product or sum wrap around to something small.
bool plausible(const sync_shm_header& h, uint64_t file_bytes, sync_shm_layout& layout) {
  if (h.magic != SYNC_SHM_MAGIC || h.version != SYNC_SHM_VERSION ||
      h.header_bytes != sizeof(sync_shm_header) || file_bytes < sizeof(sync_shm_header))
    return false;
  if (h.slot_count == 0 || h.slot_count > 4096) return false;
  // kill(pid, 0) must name one process: 0 and values that are negative as a pid_t name groups.
  if (h.writer_pid == 0 || h.writer_pid > uint32_t(INT_MAX)) return false;
  if (!expected_layout(h.format, h.width, h.height, layout)) return false;
  if (h.frame_bytes != layout.frame_bytes || h.slot_stride < h.frame_bytes) return false;
  // The header's planes must be the format's. A ring from a syncd that predates them has none
  // (the bytes were reserved zeros) and only ever held the one-plane formats.
  if (h.plane_count == 0) {
    if (layout.plane_count != 1) return false;
  } else {
    if (h.plane_count != layout.plane_count) return false;
    for (uint32_t i = 0; i < layout.plane_count; ++i)
      if (!same_plane(h.planes[i], layout.planes[i])) return false;
  }
  // Slot records follow the header, 8-byte aligned (their fields are read atomically), and end
  // before the pixels; the pixels of every slot end inside the file.
  if (h.slots_offset < sizeof(sync_shm_header) || h.slots_offset % 8 != 0) return false;
  uint64_t meta_bytes = 0, meta_end = 0, pixel_bytes = 0, pixels_end = 0;
  if (__builtin_mul_overflow(uint64_t(h.slot_count), uint64_t(sizeof(sync_shm_slot)),
                             &meta_bytes) ||
      __builtin_add_overflow(h.slots_offset, meta_bytes, &meta_end) ||
      __builtin_mul_overflow(h.slot_stride, uint64_t(h.slot_count), &pixel_bytes) ||
      __builtin_add_overflow(h.pixels_offset, pixel_bytes, &pixels_end))
    return false;
  return meta_end <= h.pixels_offset && pixels_end <= file_bytes && h.region_bytes <= file_bytes;
}

}  // namespace

namespace {

int errno_code(int e) {
  switch (e) {
    case ENOENT:
      return SYNC_SHM_ENOENT;
    case EACCES:
    case EPERM:
      return SYNC_SHM_EACCES;
    case ELOOP:  // O_NOFOLLOW met a symlink: not a file the writer made
      return SYNC_SHM_EOWNER;
  }
  return SYNC_SHM_ESYS;
}

// SYNC_SHM_EDEAD when the writer of a ring is dead by the rules of shm_ring.h.
int check_alive(const sync_shm_reader* r) {
  const bool pid_gone = ::kill(pid_t(r->info.writer_pid), 0) != 0 && errno == ESRCH;
  const uint64_t beat = __atomic_load_n(&r->shared->heartbeat_ns, __ATOMIC_ACQUIRE);
  if (beat == 0) return pid_gone ? SYNC_SHM_EDEAD : SYNC_SHM_OK;  // a writer without heartbeat
  const uint64_t now = now_ns();
  const uint64_t age_ms = now > beat ? (now - beat) / 1'000'000u : 0;
  if (age_ms > SYNC_SHM_HEARTBEAT_STALE_MS) return SYNC_SHM_EDEAD;
  if (pid_gone && age_ms > SYNC_SHM_PID_GONE_STALE_MS) return SYNC_SHM_EDEAD;
  return SYNC_SHM_OK;
}

// SYNC_SHM_EREPLACED when the path names another file than the one mapped; else as check_alive.
// A path that names nothing is not a replacement: the writer unlinks it only after ending the
// stream, and a dead writer is caught by check_alive.
int check_writer(const sync_shm_reader* r) {
  struct stat st;
  if (::lstat(r->path, &st) == 0 && (st.st_dev != r->dev || st.st_ino != r->ino))
    return SYNC_SHM_EREPLACED;
  return check_alive(r);
}

// Opens, checks and maps the ring at path into r (whose path and writer_uid are set).
int map_ring(const char* path, uint32_t writer_uid, sync_shm_reader& r) {
  // O_NOFOLLOW: a symlink planted at the path is refused, not followed. O_NONBLOCK: a FIFO
  // planted there must not block the open (it is refused below as not a regular file).
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno_code(errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return errno_code(e);
  }
  int rc = SYNC_SHM_OK;
  if (!S_ISREG(st.st_mode) || st.st_uid != writer_uid) {
    rc = SYNC_SHM_EOWNER;
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    rc = SYNC_SHM_EMODE;
  } else if (uint64_t(st.st_size) < sizeof(sync_shm_header)) {
    rc = SYNC_SHM_EFORMAT;
  }
  if (rc != SYNC_SHM_OK) {
    ::close(fd);
    return rc;
  }
  // Read-only mapping: a reader cannot corrupt what the writer or other readers see. The futex
  // wait only reads the word, which a read-only mapping allows.
  const size_t bytes = size_t(st.st_size);
  void* memory = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (memory == MAP_FAILED) return SYNC_SHM_ESYS;
  const auto* shared = static_cast<const sync_shm_header*>(memory);
  // The magic is stored last at creation: once it is seen, the rest of the header is complete.
  // The header is then copied once and only the copy is checked and used.
  if (__atomic_load_n(&shared->magic, __ATOMIC_ACQUIRE) != SYNC_SHM_MAGIC) {
    ::munmap(memory, bytes);
    return SYNC_SHM_EFORMAT;
  }
  sync_shm_header info;
  std::memcpy(&info, shared, sizeof info);
  info.stream_name[sizeof info.stream_name - 1] = '\0';
  sync_shm_layout layout;
  if (sync_shm_check_header(&info, bytes, &layout) != SYNC_SHM_OK) {
    ::munmap(memory, bytes);
    return SYNC_SHM_EFORMAT;
  }
  r.base = static_cast<uint8_t*>(memory);
  r.bytes = bytes;
  r.shared = shared;
  r.info = info;
  r.layout = layout;
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  r.last_counter = 0;
  r.last_liveness_ms = now_ms();
  // A ring left by a writer that died is not served: its last frame would look current.
  if (__atomic_load_n(&shared->state, __ATOMIC_ACQUIRE) != SYNC_SHM_STATE_ENDED &&
      check_alive(&r) != SYNC_SHM_OK) {
    ::munmap(memory, bytes);
    r.base = nullptr;
    return SYNC_SHM_EDEAD;
  }
  return SYNC_SHM_OK;
}

}  // namespace

extern "C" int sync_shm_check_header(const sync_shm_header* header, uint64_t file_bytes,
                                     sync_shm_layout* layout) {
  sync_shm_layout checked;
  if (!plausible(*header, file_bytes, checked)) return SYNC_SHM_EFORMAT;
  *layout = checked;
  return SYNC_SHM_OK;
}

extern "C" int sync_shm_open_as(const char* path, uint32_t writer_uid, sync_shm_reader** out) {
  *out = nullptr;
  auto* r = static_cast<sync_shm_reader*>(std::calloc(1, sizeof(sync_shm_reader)));
  if (!r) return SYNC_SHM_ESYS;
  r->path = ::strdup(path);
  r->writer_uid = writer_uid;
  const int rc = r->path ? map_ring(path, writer_uid, *r) : SYNC_SHM_ESYS;
  if (rc != SYNC_SHM_OK) {
    std::free(r->path);
    std::free(r);
    return rc;
  }
  *out = r;
  return SYNC_SHM_OK;
}

extern "C" int sync_shm_open(const char* path, sync_shm_reader** out) {
  return sync_shm_open_as(path, uint32_t(::geteuid()), out);
}

extern "C" int sync_shm_reopen(sync_shm_reader* r) {
  sync_shm_reader next = *r;
  const int rc = map_ring(r->path, r->writer_uid, next);
  if (rc != SYNC_SHM_OK) return rc;
  ::munmap(r->base, r->bytes);
  *r = next;
  ++r->counters.reopens;
  return SYNC_SHM_OK;
}

extern "C" void sync_shm_close(sync_shm_reader* r) {
  if (!r) return;
  ::munmap(r->base, r->bytes);
  std::free(r->path);
  std::free(r);
}

extern "C" const sync_shm_header* sync_shm_info(const sync_shm_reader* r) {
  return &r->info;
}

extern "C" const sync_shm_layout* sync_shm_get_layout(const sync_shm_reader* r) {
  return &r->layout;
}

extern "C" const char* sync_shm_format_name(uint32_t format) {
  switch (format) {
    case SYNC_SHM_FORMAT_RGBA8:
      return "rgba8";
    case SYNC_SHM_FORMAT_BGRA8:
      return "bgra8";
    case SYNC_SHM_FORMAT_NV12:
      return "nv12";
    case SYNC_SHM_FORMAT_I420:
      return "i420";
    case SYNC_SHM_FORMAT_H264:
      return "h264";
  }
  return "?";
}

namespace {

// Reads a slot's metadata under its seqlock. False when the slot is being written or was
// rewritten during the read.
bool read_slot(const sync_shm_reader* r, uint32_t index, sync_shm_frame& f) {
  const sync_shm_slot* meta = slot_meta(r, index);
  const uint32_t seq = __atomic_load_n(&meta->seq, __ATOMIC_ACQUIRE);
  if (seq & 1u) return false;
  f.flags = meta->flags;
  f.sequence = meta->frame_sequence;
  f.capture_time_us = meta->capture_time_us;
  f.publish_time_ns = meta->publish_time_ns;
  f.content_hash = meta->content_hash;
  f.publish_counter = meta->publish_counter;
  const uint64_t payload_bytes = meta->payload_bytes;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&meta->seq, __ATOMIC_RELAXED) != seq) return false;
  f.pixels = r->base + r->info.pixels_offset + uint64_t(index) * r->info.slot_stride;
  // An access unit's size comes from the slot and is held to the slot's room; a raw frame is
  // always the whole layout.
  f.bytes = r->info.frame_bytes;
  if (r->info.format == SYNC_SHM_FORMAT_H264) {
    if (payload_bytes == 0 || payload_bytes > r->info.frame_bytes) return false;
    f.bytes = payload_bytes;
  }
  f.slot = index;
  f.seq_snapshot = seq;
  return true;
}

}  // namespace

extern "C" int sync_shm_next(sync_shm_reader* r, int timeout_ms, sync_shm_frame* frame) {
  const sync_shm_header* h = r->shared;
  const uint32_t slot_count = r->info.slot_count;
  const int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
  // Every pass through this loop either returns or waits on the futex for a bounded time, and
  // every wait is bounded by the deadline: the timeout holds whatever the shared header says.
  for (;;) {
    // Load the futex word before the counter: a publish between the two changes the word, so
    // the wait below returns at once instead of missing the wake-up.
    const uint32_t word = __atomic_load_n(&h->futex_word, __ATOMIC_ACQUIRE);
    const uint64_t counter = __atomic_load_n(&h->write_counter, __ATOMIC_ACQUIRE);
    int wait_cap_ms = int(kLivenessCheckMs);
    if (counter != r->last_counter && counter != 0) {
      sync_shm_frame f;
      // A reader a frame or two late takes the next frame while the ring still holds it (the
      // ring's depth is its slack); only a reader further behind skips to the newest.
      if (r->last_counter != 0 && r->last_counter + 1 < counter) {
        for (uint32_t i = 0; i < slot_count; ++i) {
          if (read_slot(r, i, f) && f.publish_counter == r->last_counter + 1) {
            r->last_counter = f.publish_counter;
            *frame = f;
            ++r->counters.frames;
            return SYNC_SHM_OK;
          }
        }
      }
      const uint32_t index = __atomic_load_n(&h->latest_slot, __ATOMIC_ACQUIRE);
      if (index >= slot_count) return SYNC_SHM_EFORMAT;
      if (read_slot(r, index, f) && f.publish_counter >= counter) {
        if (r->last_counter != 0 && f.publish_counter > r->last_counter + 1)
          r->counters.skipped += f.publish_counter - r->last_counter - 1;
        r->last_counter = f.publish_counter;
        *frame = f;
        ++r->counters.frames;
        return SYNC_SHM_OK;
      }
      // The newest slot is being rewritten (we are far behind), or it never held the counted
      // frame (a broken header): count it, and look again after the next publish, not at once.
      ++r->counters.torn;
      wait_cap_ms = kInconsistentWaitMs;
    } else if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == SYNC_SHM_STATE_ENDED) {
      return SYNC_SHM_EENDED;
    }
    const int64_t now = now_ms();
    if (now - r->last_liveness_ms >= kLivenessCheckMs) {
      r->last_liveness_ms = now;
      const int rc = check_writer(r);
      if (rc != SYNC_SHM_OK) return rc;
    }
    const int64_t left = deadline - now;
    if (left <= 0) return SYNC_SHM_ETIMEDOUT;
    // The wait only reads the word (the mapping is read-only); the wrapper's signature is not
    // const because FUTEX_WAIT's is not.
    syncd::core::futex_wait(const_cast<uint32_t*>(&h->futex_word), word,
                            left > wait_cap_ms ? wait_cap_ms : int(left));
  }
}

extern "C" int sync_shm_check(sync_shm_reader* r, const sync_shm_frame* frame) {
  if (frame->slot >= r->info.slot_count) return SYNC_SHM_ETORN;  // not a frame of this ring
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  // every pixel read happens before the re-check
  const uint32_t seq = __atomic_load_n(&slot_meta(r, frame->slot)->seq, __ATOMIC_RELAXED);
  if (seq == frame->seq_snapshot) return SYNC_SHM_OK;
  ++r->counters.torn;
  return SYNC_SHM_ETORN;
}

extern "C" sync_shm_counters sync_shm_get_counters(const sync_shm_reader* r) {
  return r->counters;
}

extern "C" const char* sync_shm_strerror(int code) {
  switch (code) {
    case SYNC_SHM_OK:
      return "ok";
    case SYNC_SHM_ETIMEDOUT:
      return "timed out waiting for a frame";
    case SYNC_SHM_EENDED:
      return "the stream ended";
    case SYNC_SHM_ETORN:
      return "frame overwritten while in use";
    case SYNC_SHM_ENOENT:
      return "no shared-memory ring at that path";
    case SYNC_SHM_EACCES:
      return "permission denied";
    case SYNC_SHM_EFORMAT:
      return "not a version-1 frame ring (bad magic, version, size or offset)";
    case SYNC_SHM_ESYS:
      return "system error";
    case SYNC_SHM_EOWNER:
      return "not a regular file owned by the writer's user";
    case SYNC_SHM_EMODE:
      return "writable by group or others";
    case SYNC_SHM_EDEAD:
      return "the writer is dead";
    case SYNC_SHM_EREPLACED:
      return "the ring was replaced: the writer restarted";
  }
  return "unknown error";
}
