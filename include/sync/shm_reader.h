/* Reader API for syncd's shared-memory frame ring (layout: sync/shm_ring.h; protocol:
 * docs/protocol.md, "Shared-memory ring").
 *
 * A reader never blocks or slows the writer. It waits for new frames on a futex (no spinning),
 * takes the frame after the last one it took while the ring still holds it, else the newest,
 * counts the frames it skipped, and detects frames overwritten while it used them. A reader
 * that crashes leaves nothing behind: it holds no lock or slot.
 *
 * Trust: a ring is opened only when the file is a regular file (not a symlink) owned by the
 * expected writer's uid and writable by nobody else, and its header describes a region that lies
 * inside the file. The geometry is copied at open and never read from the shared header again, so
 * a header rewritten later cannot move a read outside the mapping. Every wait ends by its
 * timeout; while waiting, the reader checks that the writer is alive and that the path still
 * names the ring it opened (docs/protocol.md, "Writer liveness").
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
  SYNC_SHM_EFORMAT = -6,   /* not a version-1 ring (bad magic, version, sizes or offsets) */
  SYNC_SHM_ESYS = -7,      /* other system error (errno is kept) */
  SYNC_SHM_EOWNER = -8,    /* not a regular file owned by the writer's uid (or a symlink) */
  SYNC_SHM_EMODE = -9,     /* the file is writable by group or others: anyone could forge it */
  SYNC_SHM_EDEAD = -10,    /* the writer died without ending the stream (see shm_ring.h) */
  SYNC_SHM_EREPLACED = -11 /* the path now names another ring: the writer restarted */
};

typedef struct sync_shm_reader sync_shm_reader;

/* A frame as found in its slot. pixels points into the shared region: valid to use until
 * sync_shm_check() says otherwise. */
typedef struct sync_shm_frame {
  const uint8_t* pixels;
  uint64_t bytes; /* the layout's frame_bytes; for SYNC_SHM_FORMAT_H264 the access unit's size */
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
  uint64_t frame_bytes; /* all planes; sync_shm_frame.bytes (H.264: at most this) */
} sync_shm_layout;

typedef struct sync_shm_counters {
  uint64_t frames;  /* frames returned by sync_shm_next */
  uint64_t skipped; /* frames published that this reader never took (it fell behind) */
  uint64_t torn;    /* frames found overwritten (at take or by sync_shm_check) */
  uint64_t reopens; /* successful sync_shm_reopen calls */
} sync_shm_counters;

/* Opens the ring at path, which must be owned by this process's effective uid. Fails with
 * SYNC_SHM_ENOENT, EACCES, EOWNER, EMODE, EFORMAT, EDEAD (a live-state ring whose writer is
 * dead: its last frame is not served) or ESYS; *out is then NULL. */
int sync_shm_open(const char* path, sync_shm_reader** out);
/* The same, for a reader running as another user than syncd: the file must be owned by
 * writer_uid instead (and still be writable by nobody else). */
int sync_shm_open_as(const char* path, uint32_t writer_uid, sync_shm_reader** out);
/* Reattaches to whatever ring the path now names (after SYNC_SHM_EDEAD or SYNC_SHM_EREPLACED),
 * with the same checks as at open. On SYNC_SHM_OK the reader reads the new ring from its newest
 * frame (counters are kept; frames taken before are no longer valid); on an error the reader is
 * unchanged and still reports the old ring. */
int sync_shm_reopen(sync_shm_reader* reader);
void sync_shm_close(sync_shm_reader* reader);
/* The region's header as it was when the ring was opened and checked (geometry, format, planes,
 * slot count, stream name, writer_pid, generation). A private copy: later changes to the shared
 * header (state, counters) are not reflected. */
const sync_shm_header* sync_shm_info(const sync_shm_reader* reader);
/* Checks a header as sync_shm_open does, for a file of file_bytes (a pure function: no I/O, no
 * clock). SYNC_SHM_OK and the frame layout in *layout, or SYNC_SHM_EFORMAT. Any thread. */
int sync_shm_check_header(const sync_shm_header* header, uint64_t file_bytes,
                          sync_shm_layout* layout);
/* The frame layout (format and planes), checked at open. Valid until sync_shm_close; it never
 * changes, so any thread may read it. */
const sync_shm_layout* sync_shm_get_layout(const sync_shm_reader* reader);
/* "rgba8", "bgra8", "nv12", "i420"; "?" for another value. Any thread. */
const char* sync_shm_format_name(uint32_t format);
/* Waits up to timeout_ms (-1: forever) for a frame newer than the last one taken, then takes the
 * next one while the ring still holds it, else the newest (counting the frames in between as
 * skipped). SYNC_SHM_ETIMEDOUT when none came in time (the timeout always holds, whatever the
 * shared header says); SYNC_SHM_EENDED, EDEAD or EREPLACED when no frame will come. */
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
