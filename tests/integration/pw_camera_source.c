// A PipeWire camera node for the integration tests: a pw_stream that drives itself on a timer
// and sends frames whose first 16 bytes carry the sequence marker (docs/protocol.md, "Sequence
// marker"), in the format the consumer negotiates among I420, NV12 and YUY2. It is the same
// stream shape syncd's PipeWire camera exports (docs/camera.md, "Test setup"), kept in the tests
// so the test infrastructure can be proven without syncd. Built by pipewire_session.py with cc.
//
// usage: pw_camera_source NAME WIDTH HEIGHT FPS
// stdout: "streaming <node id>" when a consumer has negotiated a format, then at exit one JSON
// line of counts. Single-threaded: everything runs on the pw_main_loop.
#include <pipewire/pipewire.h>
#include <signal.h>
#include <spa/debug/types.h>
#include <spa/param/video/format-utils.h>
#include <spa/param/video/type-info.h>
#include <spa/pod/builder.h>
#include <spa/utils/result.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct camera {
  struct pw_main_loop* loop;
  struct pw_stream* stream;
  struct spa_hook listener;
  struct spa_source* timer;
  struct spa_video_info_raw format;
  uint32_t width, height, fps;
  uint32_t frame_size, stride;
  uint64_t ticks;      // timer expiries while streaming: the sequence of the next frame
  uint64_t sent;       // frames queued
  uint64_t no_buffer;  // ticks with no free buffer (the consumer holds them all): dropped
  uint64_t process_calls;
  uint64_t skipped;  // periods a late wake-up of this process passed over (never sent)
};

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * SPA_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

// Fills and queues one buffer if there is one free. Called from the timer, outside the graph's
// cycle: the buffer waits in the stream's queue until the next cycle takes it, so a trigger
// that merges with a running cycle delays the frame instead of losing it.
static void send_frame(struct camera* c, uint64_t sequence) {
  struct pw_buffer* b = pw_stream_dequeue_buffer(c->stream);
  if (b == NULL) {
    c->no_buffer++;
    return;
  }
  struct spa_buffer* buf = b->buffer;
  struct spa_data* d = &buf->datas[0];
  if (d->data == NULL || d->maxsize < c->frame_size) {
    pw_stream_queue_buffer(c->stream, b);
    return;
  }
  uint64_t marker[2] = {sequence, ~sequence};
  memcpy(d->data, marker, sizeof marker);
  struct spa_meta_header* h = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof *h);
  if (h != NULL) {
    // pipewiresrc turns pts into the GStreamer buffer's PTS and seq into its offset.
    h->pts = (int64_t)monotonic_ns();
    h->flags = 0;
    h->seq = sequence;
    h->dts_offset = 0;
  }
  d->chunk->offset = 0;
  d->chunk->size = c->frame_size;
  d->chunk->stride = (int32_t)c->stride;
  pw_stream_queue_buffer(c->stream, b);
  c->sent++;
}

// The graph's cycle: the queued buffer goes out; nothing to do here but count.
static void on_process(void* data) {
  struct camera* c = data;
  c->process_calls++;
}

static void on_timeout(void* data, uint64_t expirations) {
  struct camera* c = data;
  // A late wake-up counts every period it missed, as a camera that keeps its clock would, and
  // sends the newest frame.
  c->ticks += expirations;
  if (expirations > 1) c->skipped += expirations - 1;
  send_frame(c, c->ticks - 1);
  pw_stream_trigger_process(c->stream);
}

static void on_state_changed(void* data, enum pw_stream_state old, enum pw_stream_state state,
                             const char* error) {
  struct camera* c = data;
  struct pw_loop* loop = pw_main_loop_get_loop(c->loop);
  (void)old;
  if (error != NULL) fprintf(stderr, "stream error: %s\n", error);
  if (state == PW_STREAM_STATE_STREAMING) {
    struct timespec first = {0, 1}, period = {0, (long)(SPA_NSEC_PER_SEC / c->fps)};
    pw_loop_update_timer(loop, c->timer, &first, &period, false);
    printf("streaming %u\n", pw_stream_get_node_id(c->stream));
    fflush(stdout);
  } else {
    pw_loop_update_timer(loop, c->timer, NULL, NULL, false);
  }
}

static void on_param_changed(void* data, uint32_t id, const struct spa_pod* param) {
  struct camera* c = data;
  if (param == NULL || id != SPA_PARAM_Format) return;
  if (spa_format_video_raw_parse(param, &c->format) < 0) return;
  uint32_t w = c->format.size.width, h = c->format.size.height;
  switch (c->format.format) {
    case SPA_VIDEO_FORMAT_YUY2:
      c->stride = w * 2;
      c->frame_size = c->stride * h;
      break;
    default:  // I420, NV12: a full luma plane, then chroma at a quarter each (packed here).
      c->stride = w;
      c->frame_size = w * h * 3 / 2;
      break;
  }
  uint8_t storage[1024];
  struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  const struct spa_pod* params[2];
  params[0] = spa_pod_builder_add_object(
      &builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers, SPA_PARAM_BUFFERS_buffers,
      SPA_POD_CHOICE_RANGE_Int(4, 2, 16), SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
      SPA_PARAM_BUFFERS_size, SPA_POD_Int((int32_t)c->frame_size), SPA_PARAM_BUFFERS_stride,
      SPA_POD_Int((int32_t)c->stride), SPA_PARAM_BUFFERS_dataType,
      SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
  params[1] =
      spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
                                 SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header),
                                 SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
  pw_stream_update_params(c->stream, params, 2);
  fprintf(stderr, "format %s %ux%u\n",
          spa_debug_type_find_short_name(spa_type_video_format, c->format.format), w, h);
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void on_quit(void* data, int signal_number) {
  struct camera* c = data;
  (void)signal_number;
  pw_main_loop_quit(c->loop);
}

int main(int argc, char* argv[]) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s NAME WIDTH HEIGHT FPS\n", argv[0]);
    return 2;
  }
  struct camera c = {0};
  c.width = (uint32_t)atoi(argv[2]);
  c.height = (uint32_t)atoi(argv[3]);
  c.fps = (uint32_t)atoi(argv[4]);
  if (c.width == 0 || c.height == 0 || c.fps == 0 || c.width % 2 || c.height % 2) {
    fprintf(stderr, "bad size or rate\n");
    return 2;
  }
  pw_init(&argc, &argv);
  c.loop = pw_main_loop_new(NULL);
  struct pw_loop* loop = pw_main_loop_get_loop(c.loop);
  pw_loop_add_signal(loop, SIGINT, on_quit, &c);
  pw_loop_add_signal(loop, SIGTERM, on_quit, &c);
  c.timer = pw_loop_add_timer(loop, on_timeout, &c);

  // What makes the node a camera to wireplumber, Chromium and OBS. wireplumber takes the media
  // type from media.class here; media.type is set as well for consumers that filter on it.
  struct pw_properties* props =
      pw_properties_new(PW_KEY_MEDIA_CLASS, "Video/Source", PW_KEY_MEDIA_TYPE, "Video",
                        PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Camera",
                        PW_KEY_NODE_NAME, argv[1], PW_KEY_NODE_DESCRIPTION, argv[1], NULL);
  c.stream = pw_stream_new_simple(loop, argv[1], props, &stream_events, &c);

  uint8_t storage[1024];
  struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
  /* One EnumFormat per format, each fixed: Chromium's PipeWire capture (WebRTC's
   * pipewire_session.cc) ignores an EnumFormat whose format is a choice, and lists no camera
   * without a format it could parse. pipewiresrc takes either. */
  const uint32_t formats[3] = {SPA_VIDEO_FORMAT_I420, SPA_VIDEO_FORMAT_NV12, SPA_VIDEO_FORMAT_YUY2};
  const struct spa_pod* params[3];
  for (int i = 0; i < 3; i++)
    params[i] = spa_pod_builder_add_object(
        &builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat, SPA_FORMAT_mediaType,
        SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype,
        SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), SPA_FORMAT_VIDEO_format, SPA_POD_Id(formats[i]),
        SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&SPA_RECTANGLE(c.width, c.height)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&SPA_FRACTION(c.fps, 1)));
  int rc = pw_stream_connect(c.stream, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                             PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS, params, 3);
  if (rc < 0) {
    fprintf(stderr, "pw_stream_connect: %s\n", spa_strerror(rc));
    return 1;
  }
  pw_main_loop_run(c.loop);
  printf("{\"ticks\": %llu, \"sent\": %llu, \"no_buffer\": %llu, \"process_calls\": %llu, "
         "\"skipped\": %llu}\n",
         (unsigned long long)c.ticks, (unsigned long long)c.sent, (unsigned long long)c.no_buffer,
         (unsigned long long)c.process_calls, (unsigned long long)c.skipped);
  pw_stream_destroy(c.stream);
  pw_main_loop_destroy(c.loop);
  pw_deinit();
  return 0;
}
