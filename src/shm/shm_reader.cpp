// The C reader API of the shared-memory frame ring. See include/sync/shm_reader.h.
#include "sync/shm_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "core/futex.h"

struct sync_shm_reader {
  uint8_t* base;
  size_t bytes;
  sync_shm_header* header;
  sync_shm_layout layout;  // checked against the format at open
  uint64_t last_counter;   // write_counter of the last frame taken (0: none)
  sync_shm_counters counters;
};

namespace {

const sync_shm_slot* slot_meta(const sync_shm_reader* r, uint32_t index) {
  return reinterpret_cast<const sync_shm_slot*>(r->base + r->header->slots_offset) + index;
}

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The layout a frame of this format and size must have (docs/protocol.md, "Pixel formats"):
// planes packed back to back, no row padding. Computed here rather than taken from syncd's media
// library because this library depends on nothing of syncd; tests/unit/shm_ring_test.cpp checks
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
  }
  return false;
}

bool same_plane(const sync_shm_plane& a, const sync_shm_plane& b) {
  return a.offset == b.offset && a.stride == b.stride && a.rows == b.rows;
}

bool plausible(const sync_shm_header* h, size_t file_bytes, sync_shm_layout& layout) {
  if (h->version != SYNC_SHM_VERSION || h->header_bytes != sizeof(sync_shm_header)) return false;
  if (h->slot_count == 0 || h->slot_count > 4096) return false;
  if (!expected_layout(h->format, h->width, h->height, layout)) return false;
  if (h->frame_bytes != layout.frame_bytes || h->slot_stride < h->frame_bytes ||
      h->slot_stride > file_bytes)
    return false;
  // The header's planes must be the format's. A ring from a syncd that predates them has none
  // (the bytes were reserved zeros) and only ever held the one-plane formats.
  if (h->plane_count == 0) {
    if (layout.plane_count != 1) return false;
  } else {
    if (h->plane_count != layout.plane_count) return false;
    for (uint32_t i = 0; i < layout.plane_count; ++i)
      if (!same_plane(h->planes[i], layout.planes[i])) return false;
  }
  // Each term is bounded by the file's size first, so the sums below cannot wrap around.
  if (h->slots_offset > file_bytes || h->pixels_offset > file_bytes) return false;
  const uint64_t meta_end = h->slots_offset + uint64_t(h->slot_count) * sizeof(sync_shm_slot);
  return meta_end <= h->pixels_offset &&
         h->pixels_offset + h->slot_stride * h->slot_count <= file_bytes &&
         h->region_bytes <= file_bytes;
}

}  // namespace

extern "C" int sync_shm_open(const char* path, sync_shm_reader** out) {
  *out = nullptr;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? SYNC_SHM_ENOENT : errno == EACCES ? SYNC_SHM_EACCES : SYNC_SHM_ESYS;
  struct stat st;
  if (::fstat(fd, &st) != 0 || size_t(st.st_size) < sizeof(sync_shm_header)) {
    ::close(fd);
    return SYNC_SHM_EFORMAT;
  }
  // Read-only mapping: a reader cannot corrupt what the writer or other readers see. The futex
  // wait only reads the word, which a read-only mapping allows.
  void* memory = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (memory == MAP_FAILED) return SYNC_SHM_ESYS;
  auto* header = static_cast<sync_shm_header*>(memory);
  sync_shm_layout layout;
  if (__atomic_load_n(&header->magic, __ATOMIC_ACQUIRE) != SYNC_SHM_MAGIC ||
      !plausible(header, size_t(st.st_size), layout)) {
    ::munmap(memory, size_t(st.st_size));
    return SYNC_SHM_EFORMAT;
  }
  auto* r = static_cast<sync_shm_reader*>(std::calloc(1, sizeof(sync_shm_reader)));
  if (!r) {
    ::munmap(memory, size_t(st.st_size));
    return SYNC_SHM_ESYS;
  }
  r->base = static_cast<uint8_t*>(memory);
  r->bytes = size_t(st.st_size);
  r->header = header;
  r->layout = layout;
  *out = r;
  return SYNC_SHM_OK;
}

extern "C" void sync_shm_close(sync_shm_reader* r) {
  if (!r) return;
  ::munmap(r->base, r->bytes);
  std::free(r);
}

extern "C" const sync_shm_header* sync_shm_info(const sync_shm_reader* r) {
  return r->header;
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
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&meta->seq, __ATOMIC_RELAXED) != seq) return false;
  const sync_shm_header* h = r->header;
  f.pixels = r->base + h->pixels_offset + uint64_t(index) * h->slot_stride;
  f.bytes = h->frame_bytes;
  f.slot = index;
  f.seq_snapshot = seq;
  return true;
}

}  // namespace

extern "C" int sync_shm_next(sync_shm_reader* r, int timeout_ms, sync_shm_frame* frame) {
  sync_shm_header* h = r->header;
  const int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
  for (;;) {
    // Load the futex word before the counter: a publish between the two changes the word, so
    // the wait below returns at once instead of missing the wake-up.
    const uint32_t word = __atomic_load_n(&h->futex_word, __ATOMIC_ACQUIRE);
    const uint64_t counter = __atomic_load_n(&h->write_counter, __ATOMIC_ACQUIRE);
    if (counter != r->last_counter && counter != 0) {
      sync_shm_frame f;
      // A reader a frame or two late takes the next frame while the ring still holds it (the
      // ring's depth is its slack); only a reader further behind skips to the newest.
      if (r->last_counter != 0 && r->last_counter + 1 < counter) {
        for (uint32_t i = 0; i < h->slot_count; ++i) {
          if (read_slot(r, i, f) && f.publish_counter == r->last_counter + 1) {
            r->last_counter = f.publish_counter;
            *frame = f;
            ++r->counters.frames;
            return SYNC_SHM_OK;
          }
        }
      }
      const uint32_t index = __atomic_load_n(&h->latest_slot, __ATOMIC_ACQUIRE);
      if (index >= h->slot_count) return SYNC_SHM_EFORMAT;
      if (!read_slot(r, index, f) || f.publish_counter < counter) {
        // Rewritten between our loads (we are far behind): count it and look again.
        ++r->counters.torn;
        continue;
      }
      if (r->last_counter != 0 && f.publish_counter > r->last_counter + 1)
        r->counters.skipped += f.publish_counter - r->last_counter - 1;
      r->last_counter = f.publish_counter;
      *frame = f;
      ++r->counters.frames;
      return SYNC_SHM_OK;
    }
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == SYNC_SHM_STATE_ENDED)
      return SYNC_SHM_EENDED;
    const int64_t left = deadline - now_ms();
    if (left <= 0) return SYNC_SHM_ETIMEDOUT;
    syncd::core::futex_wait(&h->futex_word, word, left > 1000 ? 1000 : int(left));
  }
}

extern "C" int sync_shm_check(sync_shm_reader* r, const sync_shm_frame* frame) {
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
      return "not a version-1 frame ring";
    case SYNC_SHM_ESYS:
      return "system error";
  }
  return "unknown error";
}
