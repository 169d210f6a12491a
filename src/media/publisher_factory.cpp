#include "media/publisher_factory.h"

#include "media/publishers/test_publisher.h"

namespace syncd::media {

namespace {
const PublisherEntry kPublishers[] = {
    {"test", "verifies every frame's bytes and order",
     [](const PublisherContext& c) -> std::unique_ptr<Publisher> {
       return std::make_unique<TestPublisher>(c.loop);
     }},
    {"shm", "shared-memory ring for local readers (include/sync/shm_reader.h)",
     [](const PublisherContext& c) -> std::unique_ptr<Publisher> {
       return std::make_unique<ShmPublisher>(c.shm, c.loop);
     }},
    {"camera",
     "system camera: a PipeWire node, or v4l2loopback with --camera-device (docs/camera.md)",
     [](const PublisherContext& c) -> std::unique_ptr<Publisher> {
       return CameraPublisher::create(c.loop, c.camera);
     }},
};
}  // namespace

std::span<const PublisherEntry> publisher_table() {
  return kPublishers;
}

const PublisherEntry* find_publisher(std::string_view name) {
  for (const PublisherEntry& e : kPublishers)
    if (e.name == name) return &e;
  return nullptr;
}

std::string publisher_names() {
  std::string out;
  for (const PublisherEntry& e : kPublishers) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace syncd::media
