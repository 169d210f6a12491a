/* Reader API for syncd's shared-memory frame ring (layout: sync/shm_ring.h).
 *
 * A reader never blocks or slows the writer. It waits for new frames on a futex (no spinning),
 * takes the frame after the last one it took while the ring still holds it, else the newest
 * (counting the frames in between as skipped), and detects frames overwritten while it used
 * them (docs/protocol.md, "Shared-memory ring", reader protocol). A reader that crashes leaves nothing behind: it holds no lock or slot.
 *
 * Threads: a sync_shm_reader is used by one thread at a time. Different readers are independent.
 * Errors: functions return SYNC_SHM_OK or a negative SYNC_SHM_E* code; sync_shm_strerror()
 * names it. */
#ifndef SYNC_SHM_READER_H
#define SYNC_SHM_READER_H

#include <stdint.h>

#include "sync/shm_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SYNC_SHM_OK = 0,
  SYNC_SHM_ETIMEDOUT = -1, /* no new frame within the timeout */
  SYNC_SHM_EENDED = -2,    /* the writer ended the stream */
  SYNC_SHM_ETORN = -3,     /* the frame was overwritten while it was being used */
  SYNC_SHM_ENOENT = -4,    /* no region at that path */
  SYNC_SHM_EACCES = -5,    /* permission denied */
  SYNC_SHM_EFORMAT = -6,   /* not a version-1 ring (bad magic, version or sizes) */
  SYNC_SHM_ESYS = -7       /* other system error (errno is kept) */
};

typedef struct sync_shm_reader sync_shm_reader;

/* A frame as found in its slot. pixels points into the shared region: valid to use until
 * sync_shm_check() says otherwise. */
typedef struct sync_shm_frame {
  const uint8_t* pixels;
  uint64_t bytes;
  uint64_t sequence;
  uint64_t capture_time_us;
  uint64_t publish_time_ns;
  uint64_t content_hash;
  uint32_t flags;
  uint32_t slot;
  uint64_t publish_counter;
  uint32_t seq_snapshot; /* the slot's seqlock value when the frame was taken */
} sync_shm_frame;

/* How a frame's bytes are laid out: the ring's format and geometry and where each plane lies
 * within sync_shm_frame.pixels (plane i starts at pixels + planes[i].offset). Checked against the
 * format when the ring is opened, so a caller can rely on it; also filled for a ring written by
 * a syncd that predates the header's plane fields. */
typedef struct sync_shm_layout {
  uint32_t format; /* SYNC_SHM_FORMAT_* */
  uint32_t width;
  uint32_t height;
  uint32_t plane_count; /* 1 (rgba8, bgra8), 2 (nv12) or 3 (i420) */
  sync_shm_plane planes[SYNC_SHM_MAX_PLANES];
  uint64_t frame_bytes; /* all planes; equals sync_shm_frame.bytes */
} sync_shm_layout;

typedef struct sync_shm_counters {
  uint64_t frames;  /* frames returned by sync_shm_next */
  uint64_t skipped; /* frames published that this reader never took (it fell behind) */
  uint64_t torn;    /* frames found overwritten (at take or by sync_shm_check) */
} sync_shm_counters;

int sync_shm_open(const char* path, sync_shm_reader** out);
void sync_shm_close(sync_shm_reader* reader);
/* The region's header (geometry, format, planes, slot count, stream name). */
const sync_shm_header* sync_shm_info(const sync_shm_reader* reader);
/* The frame layout (format and planes), checked at open. Valid until sync_shm_close; it never
 * changes, so any thread may read it. */
const sync_shm_layout* sync_shm_get_layout(const sync_shm_reader* reader);
/* "rgba8", "bgra8", "nv12", "i420"; "?" for another value. Any thread. */
const char* sync_shm_format_name(uint32_t format);
/* Waits up to timeout_ms (-1: forever) for a frame newer than the last one taken, then takes the
 * next one in publish order if the ring still holds it, else the newest (the frames in between
 * count as skipped). */
int sync_shm_next(sync_shm_reader* reader, int timeout_ms, sync_shm_frame* frame);
/* After using frame->pixels: SYNC_SHM_OK if the slot was not rewritten meanwhile, else
 * SYNC_SHM_ETORN (and the torn counter grows). */
int sync_shm_check(sync_shm_reader* reader, const sync_shm_frame* frame);
sync_shm_counters sync_shm_get_counters(const sync_shm_reader* reader);
const char* sync_shm_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* SYNC_SHM_READER_H */
