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
  uint64_t last_counter;  // write_counter of the last frame taken (0: none)
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

bool plausible(const sync_shm_header* h, size_t file_bytes) {
  if (h->version != SYNC_SHM_VERSION || h->header_bytes != sizeof(sync_shm_header)) return false;
  if (h->slot_count == 0 || h->slot_count > 4096) return false;
  if (h->frame_bytes != uint64_t(h->width) * h->height * 4 || h->slot_stride < h->frame_bytes)
    return false;
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
  if (__atomic_load_n(&header->magic, __ATOMIC_ACQUIRE) != SYNC_SHM_MAGIC ||
      !plausible(header, size_t(st.st_size))) {
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
