/* Shared-memory frame ring, layout version 1 (docs/protocol.md, "Shared-memory ring").
 *
 * syncd (the only writer) creates the region 0600 (O_EXCL, never through a symlink, and never
 * over a file another user owns) and publishes frames into it; any number of readers in other
 * processes map it read-only. The frame slots *are* syncd's frame pool for the
 * stream, so a frame reaches readers without a copy. Readers hold nothing: each slot carries a
 * seqlock word, odd while syncd writes the slot, and a reader re-checks it after using the
 * pixels to learn whether they were overwritten meanwhile (a "torn" read).
 *
 * Shared fields that change are accessed with __atomic builtins (GCC and Clang, C and C++).
 * All integers are host-endian (the writer and readers share one machine). */
#ifndef SYNC_SHM_RING_H
#define SYNC_SHM_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYNC_SHM_MAGIC 0x524E5953u /* "SYNR" */
#define SYNC_SHM_VERSION 1u
#define SYNC_SHM_STATE_LIVE 1u
#define SYNC_SHM_STATE_ENDED 2u /* the stream closed; the writer will not publish again */

/* Writer liveness (docs/protocol.md, "Writer liveness"). A live writer stores CLOCK_MONOTONIC in
 * heartbeat_ns at every publish and at least every SYNC_SHM_HEARTBEAT_PERIOD_MS when no frame
 * flows. A reader calls the writer dead when the heartbeat is older than
 * SYNC_SHM_HEARTBEAT_STALE_MS, or when writer_pid no longer exists and the heartbeat is older
 * than SYNC_SHM_PID_GONE_STALE_MS (the second rule is fast after a crash; the first also holds
 * for a reader in another pid namespace, or after the pid was reused). */
#define SYNC_SHM_HEARTBEAT_PERIOD_MS 50u
#define SYNC_SHM_HEARTBEAT_STALE_MS 3000u
#define SYNC_SHM_PID_GONE_STALE_MS 250u

/* Pixel formats (docs/protocol.md, "Pixel formats"): the same values as the frame header's. */
#define SYNC_SHM_FORMAT_RGBA8 1u /* one plane, 4 bytes a pixel */
#define SYNC_SHM_FORMAT_BGRA8 2u /* one plane, 4 bytes a pixel */
#define SYNC_SHM_FORMAT_NV12 3u  /* Y, then interleaved U V at half width and height */
#define SYNC_SHM_FORMAT_I420 4u  /* Y, then U, then V, each at half width and height */
/* One H.264 access unit (Annex B) a slot, of sync_shm_slot.payload_bytes: 1 up to frame_bytes,
 * which is an I420 frame's size at the ring's width and height. One plane of one row. */
#define SYNC_SHM_FORMAT_H264 5u
#define SYNC_SHM_MAX_PLANES 3u

/* Where one plane of a frame lies within the frame's bytes (a slot's pixels). Planes are packed
 * back to back in the format's order, with no row padding. */
typedef struct sync_shm_plane {
  uint64_t offset; /* 0   from the start of the frame */
  uint32_t stride; /* 8   bytes from one row to the next */
  uint32_t rows;   /* 12 */
} sync_shm_plane;

/* At offset 0 of the region. */
typedef struct sync_shm_header {
  uint32_t magic;         /* 0   SYNC_SHM_MAGIC */
  uint16_t version;       /* 4   SYNC_SHM_VERSION */
  uint16_t header_bytes;  /* 6   sizeof(sync_shm_header) */
  uint32_t width;         /* 8 */
  uint32_t height;        /* 12 */
  uint32_t format;        /* 16  SYNC_SHM_FORMAT_* */
  uint32_t slot_count;    /* 20 */
  uint64_t slot_stride;   /* 24  bytes from one slot's pixels to the next (page multiple) */
  uint64_t frame_bytes;   /* 32  the whole frame, all planes (see planes) */
  uint64_t slots_offset;  /* 40  offset of sync_shm_slot[slot_count] */
  uint64_t pixels_offset; /* 48  offset of slot 0's pixels (page aligned) */
  uint64_t region_bytes;  /* 56  size of the whole region */
  uint32_t writer_pid;    /* 64 */
  uint32_t state;         /* 68  SYNC_SHM_STATE_*, atomic */
  uint32_t futex_word;    /* 72  incremented on every publish; readers FUTEX_WAIT on it */
  uint32_t latest_slot;   /* 76  slot of the newest frame, atomic */
  uint64_t write_counter; /* 80  frames published so far (0: none yet), atomic, release */
  uint64_t reserved0;     /* 88 */
  char stream_name[64];   /* 96  NUL-terminated */
  /* The frame's planes, in the format's order; entries past plane_count are zero. These were
   * reserved (zero) bytes before, so the layout version did not change: a plane_count of 0 means
   * a writer that predates them (always rgba8 or bgra8, one plane of width * 4 bytes a row). */
  uint32_t plane_count;                       /* 160 */
  uint32_t reserved1;                         /* 164 */
  sync_shm_plane planes[SYNC_SHM_MAX_PLANES]; /* 168 */
  /* Liveness fields, also in once-reserved zero bytes: 0 in both means a writer that predates
   * them (a reader then judges liveness by writer_pid alone). */
  uint64_t generation;   /* 216 random, new for every ring the writer creates; never 0 */
  uint64_t heartbeat_ns; /* 224 CLOCK_MONOTONIC of the writer's last sign of life, atomic */
  uint8_t reserved2[24]; /* 232 zero; kept for later fields */
} sync_shm_header;

/* One per slot, at slots_offset + index * sizeof(sync_shm_slot). */
typedef struct sync_shm_slot {
  uint32_t seq;             /* 0   seqlock: odd while the writer fills the slot */
  uint32_t flags;           /* 4   frame flags from the producer (bit 0: content_hash valid) */
  uint64_t frame_sequence;  /* 8   producer's sequence number */
  uint64_t capture_time_us; /* 16  producer's capture timestamp */
  uint64_t publish_time_ns; /* 24  CLOCK_MONOTONIC when syncd published the frame */
  uint64_t content_hash;    /* 32  XXH3-64 of the pixels, as sent by the producer */
  uint64_t publish_counter; /* 40  write_counter value of this frame */
  uint64_t payload_bytes;   /* 48  the frame's bytes: frame_bytes, or an access unit's size */
  uint64_t reserved;        /* 56 */
} sync_shm_slot;

#ifdef __cplusplus
}
static_assert(sizeof(sync_shm_header) == 256, "shm header layout");
static_assert(offsetof(sync_shm_header, slot_stride) == 24, "shm header layout");
static_assert(offsetof(sync_shm_header, state) == 68, "shm header layout");
static_assert(offsetof(sync_shm_header, futex_word) == 72, "shm header layout");
static_assert(offsetof(sync_shm_header, write_counter) == 80, "shm header layout");
static_assert(offsetof(sync_shm_header, stream_name) == 96, "shm header layout");
static_assert(offsetof(sync_shm_header, plane_count) == 160, "shm header layout");
static_assert(offsetof(sync_shm_header, planes) == 168, "shm header layout");
static_assert(offsetof(sync_shm_header, generation) == 216, "shm header layout");
static_assert(offsetof(sync_shm_header, heartbeat_ns) == 224, "shm header layout");
static_assert(offsetof(sync_shm_header, reserved2) == 232, "shm header layout");
static_assert(sizeof(sync_shm_plane) == 16, "shm plane layout");
static_assert(sizeof(sync_shm_slot) == 64, "shm slot layout");
static_assert(offsetof(sync_shm_slot, frame_sequence) == 8, "shm slot layout");
static_assert(offsetof(sync_shm_slot, publish_time_ns) == 24, "shm slot layout");
static_assert(offsetof(sync_shm_slot, publish_counter) == 40, "shm slot layout");
#else
_Static_assert(sizeof(sync_shm_header) == 256, "shm header layout");
_Static_assert(offsetof(sync_shm_header, write_counter) == 80, "shm header layout");
_Static_assert(offsetof(sync_shm_header, plane_count) == 160, "shm header layout");
_Static_assert(offsetof(sync_shm_header, planes) == 168, "shm header layout");
_Static_assert(offsetof(sync_shm_header, generation) == 216, "shm header layout");
_Static_assert(offsetof(sync_shm_header, heartbeat_ns) == 224, "shm header layout");
_Static_assert(sizeof(sync_shm_plane) == 16, "shm plane layout");
_Static_assert(sizeof(sync_shm_slot) == 64, "shm slot layout");
#endif

#endif /* SYNC_SHM_RING_H */
