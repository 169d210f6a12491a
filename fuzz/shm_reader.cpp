// libFuzzer target: arbitrary bytes as a shared-memory ring file, through the reader's whole
// open path (owner and mode checks, header copy and validation, mapping, liveness), then a frame
// take and check, and again after the header is rewritten under the open reader. The reader
// must return an error code for anything it does not accept and never read outside the file.
// sync_shm_check_header (the pure check) must agree with what open accepted.
#include "sync/shm_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// One file per fuzzing process, rewritten for every input: created 0600 by this process, so the
// owner and mode checks pass and the header checks are what is exercised.
const char* ring_path() {
  static char path[64];
  if (!path[0]) {
    std::snprintf(path, sizeof path, "/dev/shm/sync-fuzz-%d.frames", int(::getpid()));
    std::atexit([] { ::unlink(path); });  // leave nothing in /dev/shm
  }
  return path;
}

bool write_file(const uint8_t* data, size_t size) {
  const int fd = ::open(ring_path(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, data, size, 0) == ssize_t(size);
  ::close(fd);
  return ok;
}

// Reads every byte of a frame the reader handed out: it must lie inside the mapping.
uint8_t touch(const sync_shm_frame& f) {
  uint8_t sum = 0;
  for (uint64_t i = 0; i < f.bytes; i += 64) sum ^= f.pixels[i];
  if (f.bytes) sum ^= f.pixels[f.bytes - 1];
  return sum;
}

void take(sync_shm_reader* r) {
  sync_shm_frame f;
  const int rc = sync_shm_next(r, 0, &f);
  if (rc == SYNC_SHM_OK) {
    // A raw frame is exactly the layout's frame_bytes; an H.264 access unit is 1 up to it.
    const sync_shm_layout* layout = sync_shm_get_layout(r);
    const bool size_ok = layout->format == SYNC_SHM_FORMAT_H264
                             ? f.bytes >= 1 && f.bytes <= layout->frame_bytes
                             : f.bytes == layout->frame_bytes;
    if (!size_ok) __builtin_trap();
    volatile uint8_t sink = touch(f);
    (void)sink;
    sync_shm_check(r, &f);
  } else if (rc > 0 || rc < SYNC_SHM_EREPLACED) {
    __builtin_trap();  // not a documented code
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20) || !write_file(data, size)) return 0;
  sync_shm_header header{};
  if (size >= sizeof header) {
    std::memcpy(&header, data, sizeof header);
    sync_shm_layout layout;
    if (sync_shm_check_header(&header, size, &layout) == SYNC_SHM_OK) {
      // What the check accepted lies inside the file.
      if (header.pixels_offset + header.slot_stride * header.slot_count > size) __builtin_trap();
      if (layout.frame_bytes > header.slot_stride) __builtin_trap();
    }
  }
  sync_shm_reader* r = nullptr;
  const int rc = sync_shm_open(ring_path(), &r);
  if (rc != SYNC_SHM_OK) {
    if (r != nullptr || rc > 0 || rc < SYNC_SHM_EREPLACED) __builtin_trap();
    return 0;
  }
  sync_shm_layout checked;
  if (sync_shm_check_header(sync_shm_info(r), size, &checked) != SYNC_SHM_OK) __builtin_trap();
  take(r);
  // The header rewritten under the open reader (every byte inverted): the copy made at open
  // must keep every later read inside the mapping.
  uint8_t inverted[sizeof(sync_shm_header)];
  for (size_t i = 0; i < sizeof inverted; ++i) inverted[i] = uint8_t(~data[i]);
  const int fd = ::open(ring_path(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    if (::pwrite(fd, inverted, sizeof inverted, 0) != ssize_t(sizeof inverted)) __builtin_trap();
    ::close(fd);
  }
  take(r);
  take(r);
  sync_shm_close(r);
  return 0;
}
