#include "media/publishers/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/clock.h"
#include "core/futex.h"

namespace syncd::media {

namespace {
size_t page_round(size_t n) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// shm_open wants "/name"; a path under /dev/shm maps to that name. Other paths (tmpfs or any
// file system) are opened as files, which also works with mmap MAP_SHARED.
int open_region(const std::string& path, int flags, mode_t mode) {
  return ::open(path.c_str(), flags | O_CLOEXEC, mode);
}

// A new ring's generation: random, so a reader can tell two rings at the same path apart even
// when the file system reuses the inode. Never 0 (0 means "a writer without the field").
uint64_t new_generation() {
  uint64_t g = 0;
  if (::getrandom(&g, sizeof g, GRND_NONBLOCK) != ssize_t(sizeof g))
    g = core::monotonic_ns() ^ (uint64_t(::getpid()) << 40);
  return g ? g : 1;
}

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISLNK(mode)) return "symlink";
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISDIR(mode)) return "directory";
  return "special file";
}

// Removes a file at path that a syncd of this user left behind. False, with error set, when
// something else is there: it is not ours to remove, and syncd must not write into it.
bool remove_stale(const std::string& path, ShmRegionError& error) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    error = {"shm_system", "cannot inspect " + path + ": " + std::strerror(errno)};
    return false;
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    char detail[160];
    std::snprintf(detail, sizeof detail, "%s owned by uid %u, mode %04o", file_kind(st.st_mode),
                  unsigned(st.st_uid), unsigned(st.st_mode & 07777));
    error = {"shm_foreign_file", path + " exists and is not a ring of syncd's user (" + detail +
                                     "); not replacing it: remove it or choose another --shm-path"};
    return false;
  }
  // A file left by a syncd that crashed is replaced; readers still mapping it keep their view
  // and learn from its dead writer (or the new inode at the path) that it is over.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    error = {"shm_system", "cannot remove stale " + path + ": " + std::strerror(errno)};
    return false;
  }
  return true;
}
}  // namespace

std::string default_region_path() {
  return "/dev/shm/sync-" + std::to_string(::getuid()) + ".frames";
}

std::unique_ptr<ShmRegion> ShmRegion::create(const std::string& path, const std::string& stream,
                                             const FrameLayout& layout, uint32_t slot_count,
                                             ShmRegionError& error) {
  if (layout.plane_count == 0 || layout.plane_count > SYNC_SHM_MAX_PLANES || layout.bytes == 0) {
    error = {"shm_bad_layout", "frame layout does not fit the ring header"};
    return nullptr;
  }
  const uint64_t frame_bytes = layout.bytes;
  const size_t meta_bytes = sizeof(sync_shm_header) + sizeof(sync_shm_slot) * slot_count;
  const size_t pixels_offset = page_round(meta_bytes);
  const size_t stride = page_round(frame_bytes);
  const size_t total = pixels_offset + stride * slot_count;

  if (!remove_stale(path, error)) return nullptr;
  // O_EXCL: the file is new and ours. If another process planted one since the check above,
  // the open fails rather than writing into (or through a symlink to) that file.
  const int fd = open_region(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      error = {"shm_exists", path + " was created by another process while syncd was " +
                                 "creating it; not using it"};
    } else {
      error = {"shm_system", "cannot create " + path + ": " + std::strerror(errno)};
    }
    return nullptr;
  }
  ::fchmod(fd, 0600);  // whatever the umask
  struct stat created;
  if (::fstat(fd, &created) != 0) created = {};
  if (::ftruncate(fd, off_t(total)) != 0) {
    error = {"shm_system", "cannot size " + path + ": " + std::strerror(errno)};
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  // Not populated here: the registry faults the slots in (FramePool::prefault), off the loop
  // for a stream opened by a client.
  void* memory = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (memory == MAP_FAILED) {
    error = {"shm_system", "cannot map " + path + ": " + std::strerror(errno)};
    ::unlink(path.c_str());
    return nullptr;
  }
  std::unique_ptr<ShmRegion> region(new ShmRegion());
  region->path_ = path;
  region->base_ = static_cast<uint8_t*>(memory);
  region->bytes_ = total;
  region->dev_ = created.st_dev;
  region->ino_ = created.st_ino;

  sync_shm_header* h = region->header();
  std::memset(h, 0, meta_bytes);
  h->version = SYNC_SHM_VERSION;
  h->header_bytes = sizeof(sync_shm_header);
  h->width = layout.width;
  h->height = layout.height;
  h->format = uint32_t(layout.format);
  h->slot_count = slot_count;
  h->slot_stride = stride;
  h->frame_bytes = frame_bytes;
  h->slots_offset = sizeof(sync_shm_header);
  h->pixels_offset = pixels_offset;
  h->region_bytes = total;
  h->writer_pid = uint32_t(::getpid());
  h->generation = new_generation();
  h->heartbeat_ns = core::monotonic_ns();
  h->plane_count = layout.plane_count;
  for (uint32_t i = 0; i < layout.plane_count; ++i)
    h->planes[i] = {layout.planes[i].offset, layout.planes[i].stride, layout.planes[i].rows};
  std::strncpy(h->stream_name, stream.c_str(), sizeof h->stream_name - 1);
  for (uint32_t i = 0; i < slot_count; ++i) region->slot_meta(i)->seq = 1;  // nothing valid yet
  __atomic_store_n(&h->state, SYNC_SHM_STATE_LIVE, __ATOMIC_RELEASE);
  // The magic goes last: a reader that sees it sees a complete header.
  __atomic_store_n(&h->magic, SYNC_SHM_MAGIC, __ATOMIC_RELEASE);
  return region;
}

ShmRegion::~ShmRegion() {
  mark_ended();
  ::munmap(base_, bytes_);
  unlink_path();
}

void ShmRegion::unlink_path() {
  if (unlinked_) return;
  unlinked_ = true;
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_)
    ::unlink(path_.c_str());
}

sync_shm_slot* ShmRegion::slot_meta(uint32_t index) const {
  return reinterpret_cast<sync_shm_slot*>(base_ + header()->slots_offset) + index;
}

void ShmRegion::on_acquire(FrameSlot& slot) {
  sync_shm_slot* meta = slot_meta(slot.index);
  const uint32_t seq = __atomic_load_n(&meta->seq, __ATOMIC_RELAXED);
  // A slot released without being published (a refused frame) is still odd: leave it so.
  if ((seq & 1u) == 0) __atomic_store_n(&meta->seq, seq + 1, __ATOMIC_RELAXED);
  // Readers that loaded the even value before this store must see the change once any pixel
  // write lands: order the seqlock store before every later store. (TSan does not model fences
  // and says so; the readers are other processes, outside its view anyway.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  __atomic_thread_fence(__ATOMIC_RELEASE);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

void ShmRegion::publish(const FrameSlot& slot, uint64_t publish_time_ns) {
  sync_shm_header* h = header();
  sync_shm_slot* meta = slot_meta(slot.index);
  const FrameInfo& info = slot.info;
  meta->flags = info.flags;
  meta->frame_sequence = info.sequence;
  meta->capture_time_us = info.capture_time_us;
  meta->publish_time_ns = publish_time_ns;
  meta->content_hash = info.content_hash;
  meta->payload_bytes = info.bytes;
  const uint64_t counter = ++published_;
  meta->publish_counter = counter;
  const uint32_t seq = __atomic_load_n(&meta->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&meta->seq, (seq | 1u) + 1, __ATOMIC_RELEASE);  // even: complete
  __atomic_store_n(&h->latest_slot, slot.index, __ATOMIC_RELEASE);
  __atomic_store_n(&h->write_counter, counter, __ATOMIC_RELEASE);
  __atomic_add_fetch(&h->futex_word, 1u, __ATOMIC_RELEASE);
  core::futex_wake_all(&h->futex_word);
}

void ShmRegion::heartbeat(uint64_t now_ns) {
  __atomic_store_n(&header()->heartbeat_ns, now_ns, __ATOMIC_RELEASE);
}

void ShmRegion::mark_ended() {
  sync_shm_header* h = header();
  if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == SYNC_SHM_STATE_ENDED) return;
  __atomic_store_n(&h->state, SYNC_SHM_STATE_ENDED, __ATOMIC_RELEASE);
  __atomic_add_fetch(&h->futex_word, 1u, __ATOMIC_RELEASE);
  core::futex_wake_all(&h->futex_word);
}

}  // namespace syncd::media
