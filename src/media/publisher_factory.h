// Publishers by name: one table of factories, from which syncd builds what `--publisher` lists.
// A new consumer (the system camera, the WAN sender) is one more row; nothing else names it.
//
// Thread: the loop thread (publishers are built at start-up).
#pragma once

#include <uv.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "media/publisher.h"
#include "media/publishers/camera/camera_publisher.h"
#include "media/publishers/shm_publisher.h"

namespace syncd::media {

// What a factory may use.
struct PublisherContext {
  uv_loop_t* loop = nullptr;  // for worker threads (core::WorkerHandoff) and loop timers
  ShmPublisherConfig shm;
  CameraConfig camera;
};

struct PublisherEntry {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<Publisher> (*make)(const PublisherContext& context);
};

std::span<const PublisherEntry> publisher_table();
// nullptr when no publisher has that name.
const PublisherEntry* find_publisher(std::string_view name);
// "test, shm, camera": the names, for help and error messages.
std::string publisher_names();

}  // namespace syncd::media
