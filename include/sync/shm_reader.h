/* Reader API for syncd's shared-memory frame ring (layout: sync/shm_ring.h).
 *
 * A reader never blocks or slows the writer. It waits for new frames on a futex (no spinning),
 * always takes the newest frame, counts the frames it skipped, and detects frames overwritten
 * while it used them. A reader that crashes leaves nothing behind: it holds no lock or slot.
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

typedef struct sync_shm_counters {
  uint64_t frames;  /* frames returned by sync_shm_next */
  uint64_t skipped; /* frames published that this reader never took (it fell behind) */
  uint64_t torn;    /* frames found overwritten (at take or by sync_shm_check) */
} sync_shm_counters;

int sync_shm_open(const char* path, sync_shm_reader** out);
void sync_shm_close(sync_shm_reader* reader);
/* The region's header (geometry, slot count, stream name). */
const sync_shm_header* sync_shm_info(const sync_shm_reader* reader);
/* Waits up to timeout_ms (-1: forever) for a frame newer than the last one taken, then takes the
 * newest. */
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
