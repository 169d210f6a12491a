// Device side without hardware: probe over a fake /sys/class/hidraw tree, the replay format and
// recorder, the SPSC ring (two threads; run under TSan), the reader thread end to end on a replay,
// and an opt-in uhid test of the real hidraw path (skipped when /dev/uhid is absent).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/uhid.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/spsc_ring.h"
#include "headtrack/hidraw.h"
#include "headtrack/replay.h"
#include "headtrack/tracker_reader.h"
#include "headtrack_fixtures.h"

namespace syncd::headtrack {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/headtrack_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(Probe, FakeSysfsTree) {
  TempDir root;
  const std::string sys = root.path() + "/sys";
  const std::string dev = root.path() + "/dev";
  fs::create_directories(dev);
  // hidraw0: a mouse. hidraw1: the tracker, node present. hidraw2: tracker, node missing.
  // hidraw10: no descriptor file.
  write_file(sys + "/hidraw0/device/report_descriptor",
             {0x05, 0x01, 0x09, 0x02, 0xA1, 0x01, 0x75, 0x08, 0x95, 0x03, 0x81, 0x06, 0xC0});
  write_text(sys + "/hidraw0/device/uevent", "HID_ID=0003:0000046D:0000C077\nHID_NAME=Mouse\n");
  write_file(sys + "/hidraw1/device/report_descriptor", testing::v1_descriptor());
  write_text(sys + "/hidraw1/device/uevent",
             "HID_ID=0005:0000054C:00000DE1\nHID_NAME=WH-1000XM5\nHID_UNIQ=aa:bb:cc:dd:ee:ff\n");
  write_file(sys + "/hidraw2/device/report_descriptor", testing::v2_descriptor());
  fs::create_directories(sys + "/hidraw10/device");
  // A regular file stands in for hidraw1's node: it opens, but the feature ioctl fails.
  write_text(dev + "/hidraw1", "");

  EnumerateOptions options{sys, dev};
  const auto nodes = enumerate_hidraw(options);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "hidraw0");
  EXPECT_EQ(nodes[3].name, "hidraw10");  // numeric order, not lexical
  EXPECT_EQ(nodes[1].hid_name, "WH-1000XM5");
  EXPECT_EQ(nodes[1].hid_id, "0005:0000054C:00000DE1");
  EXPECT_EQ(nodes[1].devnode, dev + "/hidraw1");

  const auto probes = probe_all(options);
  ASSERT_EQ(probes.size(), 4u);
  EXPECT_FALSE(probes[0].is_tracker);
  EXPECT_NE(probes[0].reason.find("Other:Custom"), std::string::npos);
  EXPECT_TRUE(probes[1].is_tracker);
  EXPECT_EQ(probes[1].access, NodeAccess::kOk);
  EXPECT_EQ(probes[1].version, 1);
  EXPECT_NE(probes[1].reason.find("reading the description failed"), std::string::npos);
  EXPECT_TRUE(probes[2].is_tracker);
  EXPECT_EQ(probes[2].access, NodeAccess::kMissing);
  EXPECT_EQ(probes[2].version, 2);
  EXPECT_FALSE(probes[3].is_tracker);
  EXPECT_NE(probes[3].reason.find("no report descriptor"), std::string::npos);

  if (geteuid() != 0) {  // root ignores file modes, so "access denied" is testable only as a user
    chmod((dev + "/hidraw1").c_str(), 0);
    EXPECT_EQ(probe_node(nodes[1]).access, NodeAccess::kDenied);
  }
}

TEST(Probe, EmptyTree) {
  TempDir root;
  EXPECT_TRUE(probe_all({root.path(), root.path()}).empty());
  EXPECT_TRUE(probe_all({root.path() + "/absent", root.path()}).empty());
}

TEST(Replay, ParseAndErrors) {
  ReplayFile f;
  std::string error;
  ASSERT_TRUE(parse_replay("# c\n05 20 09 e1\nfeature 02 23 41\n0 01 02\n40.5 01 03\n", f, &error))
      << error;
  EXPECT_EQ(f.descriptor, (std::vector<uint8_t>{0x05, 0x20, 0x09, 0xE1}));
  ASSERT_EQ(f.features.size(), 1u);
  ASSERT_EQ(f.reports.size(), 2u);
  EXPECT_EQ(f.reports[1].t_ms, 40.5);
  EXPECT_EQ(f.reports[1].bytes, (std::vector<uint8_t>{0x01, 0x03}));
  EXPECT_FALSE(parse_replay("", f, &error));
  EXPECT_FALSE(parse_replay("zz\n", f, &error));
  EXPECT_FALSE(parse_replay("05 20\n10 01\n5 01\n", f, &error));
  EXPECT_NE(error.find("line 3"), std::string::npos);
  EXPECT_FALSE(parse_replay("05 20\nx 01\n", f, &error));
  EXPECT_FALSE(parse_replay("05 20\n10 0\n", f, &error));
}

TEST(Replay, RecorderRoundTrip) {
  TempDir root;
  const std::string path = root.path() + "/rec.replay";
  ReplayRecorder rec;
  std::string error;
  const std::vector<std::vector<uint8_t>> features = {{0x02, 0x23}};
  ASSERT_TRUE(rec.open(path, testing::v1_descriptor(), features, "test", &error)) << error;
  const std::vector<uint8_t> r1 = {0x01, 0x00, 0xff};
  rec.write(0, r1);
  rec.write(40.25, r1);
  rec.close();
  ReplayFile f;
  ASSERT_TRUE(load_replay(path, f, &error)) << error;
  EXPECT_EQ(f.descriptor, testing::v1_descriptor());
  EXPECT_EQ(f.features, features);
  ASSERT_EQ(f.reports.size(), 2u);
  EXPECT_EQ(f.reports[1].t_ms, 40.25);
  EXPECT_EQ(f.reports[1].bytes, r1);
}

TEST(SpscRing, TwoThreadsInOrder) {
  static syncd::core::SpscRing<uint64_t, 64> ring;
  constexpr uint64_t kCount = 200000;
  std::thread producer([] {
    for (uint64_t i = 0; i < kCount;) {
      if (ring.try_push(i))
        ++i;
      else
        std::this_thread::yield();
    }
  });
  uint64_t expected = 0;
  while (expected < kCount) {
    uint64_t v;
    if (ring.try_pop(v)) {
      ASSERT_EQ(v, expected);
      ++expected;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(ring.size(), 0u);
}

TEST(SpscRing, FullAndEmpty) {
  syncd::core::SpscRing<int, 4> ring;
  int v;
  EXPECT_FALSE(ring.try_pop(v));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.try_push(i));
  EXPECT_FALSE(ring.try_push(9));
  EXPECT_EQ(ring.size(), 4u);
  EXPECT_TRUE(ring.try_pop(v));
  EXPECT_EQ(v, 0);
}

std::string synthetic_replay() {
  return std::string(SYNC_HEADTRACK_DATA_DIR) + "/synthetic.replay";
}

// The reader thread on the checked-in synthetic replay, as fast as possible, consumed the way
// syncd's loop would: wait on the wakeup fd, then poll().
TEST(TrackerReader, ReplayEndToEnd) {
  ReaderConfig config;
  config.source = "replay:" + synthetic_replay();
  config.replay_realtime = false;
  TrackerReader reader(config);
  std::atomic<int> callbacks{0};
  reader.set_wakeup_callback([&] { callbacks.fetch_add(1, std::memory_order_relaxed); });
  std::string error;
  ASSERT_TRUE(reader.start(&error)) << error;
  int samples = 0, connected = 0, disconnected = 0;
  int64_t last_t = -1;
  TrackerEvent events[16];
  while (!(reader.finished() && disconnected)) {
    pollfd pfd{reader.wakeup_fd(), POLLIN, 0};
    ASSERT_GE(poll(&pfd, 1, 2000), 0);
    const size_t n = reader.poll(events, 16);
    for (size_t i = 0; i < n; ++i) {
      switch (events[i].kind) {
        case TrackerEvent::Kind::kSample:
          EXPECT_GT(events[i].sample.t_ns, last_t);
          last_t = events[i].sample.t_ns;
          ++samples;
          break;
        case TrackerEvent::Kind::kConnected:
          ++connected;
          EXPECT_EQ(events[i].version, 1);
          break;
        case TrackerEvent::Kind::kDisconnected:
          ++disconnected;
          break;
        case TrackerEvent::Kind::kStatus:
          break;
      }
    }
  }
  reader.stop();
  EXPECT_EQ(connected, 1);
  EXPECT_EQ(samples, 99);  // 100 reports, one with 0x8000 rejected; the other-ID one ignored
  const ReaderStats s = reader.stats();
  EXPECT_EQ(s.reports, 101u);
  EXPECT_EQ(s.out_of_range, 1u);
  EXPECT_EQ(s.other_report, 1u);
  EXPECT_EQ(s.ring_overruns, 0u);
  EXPECT_GE(callbacks.load(), 100);
}

TEST(TrackerReader, StopsPromptlyInRealTime) {
  ReaderConfig config;
  config.source = "replay:" + synthetic_replay();
  TrackerReader reader(config);
  std::string error;
  ASSERT_TRUE(reader.start(&error)) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  reader.stop();
  EXPECT_FALSE(reader.finished());
  EXPECT_LT(reader.stats().samples, 10u);
}

TEST(TrackerReader, BadReplayFailsAtStart) {
  ReaderConfig config;
  config.source = "replay:/nonexistent/file.replay";
  TrackerReader reader(config);
  std::string error;
  EXPECT_FALSE(reader.start(&error));
  EXPECT_NE(error.find("nonexistent"), std::string::npos);
}

TEST(TrackerReader, NoDeviceReportsStatusAndKeepsTrying) {
  TempDir root;
  ReaderConfig config;
  config.enumerate = {root.path(), root.path()};
  config.reenumerate_ms = 20;
  TrackerReader reader(config);
  std::string error;
  ASSERT_TRUE(reader.start(&error));
  TrackerEvent e;
  pollfd pfd{reader.wakeup_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 2000), 1);
  ASSERT_EQ(reader.poll(&e, 1), 1u);
  EXPECT_EQ(e.kind, TrackerEvent::Kind::kStatus);
  EXPECT_STREQ(e.text, "no head tracker found");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  reader.stop();
  EXPECT_FALSE(reader.stats().connected);
}

// Opt-in: a virtual head tracker through /dev/uhid, read by the real hidraw path.
TEST(Uhid, VirtualTrackerThroughHidraw) {
  const int fd = open("/dev/uhid", O_RDWR | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "/dev/uhid not available: " << std::strerror(errno);
  const std::vector<uint8_t> desc = testing::v1_descriptor();
  uhid_event ev{};
  ev.type = UHID_CREATE2;
  std::snprintf(reinterpret_cast<char*>(ev.u.create2.name), sizeof(ev.u.create2.name),
                "sync-headtrack test tracker");
  ev.u.create2.rd_size = uint16_t(desc.size());
  ev.u.create2.bus = 0x05;  // BUS_BLUETOOTH
  ev.u.create2.vendor = 0x054C;
  ev.u.create2.product = 0x0DE1;
  std::memcpy(ev.u.create2.rd_data, desc.data(), desc.size());
  ASSERT_EQ(write(fd, &ev, sizeof(ev)), ssize_t(sizeof(ev)));

  std::atomic<bool> done{false};
  // Answers feature reads (description, controls) and streams input reports.
  std::thread device([&] {
    uint8_t state = 0;
    int sent = 0;
    while (!done.load()) {
      pollfd pfd{fd, POLLIN, 0};
      if (poll(&pfd, 1, 20) == 1) {
        uhid_event in{};
        if (read(fd, &in, sizeof(in)) <= 0) break;
        uhid_event reply{};
        if (in.type == UHID_GET_REPORT) {
          reply.type = UHID_GET_REPORT_REPLY;
          reply.u.get_report_reply.id = in.u.get_report.id;
          if (in.u.get_report.rnum == 2) {
            reply.u.get_report_reply.data[0] = 2;
            std::memcpy(reply.u.get_report_reply.data + 1, "#AndroidHeadTracker#1.0", 23);
            reply.u.get_report_reply.size = 40;
          } else {
            reply.u.get_report_reply.data[0] = 1;
            reply.u.get_report_reply.data[1] = state;
            reply.u.get_report_reply.size = 2;
          }
          (void)!write(fd, &reply, sizeof(reply));
        } else if (in.type == UHID_SET_REPORT) {
          if (in.u.set_report.rnum == 1 && in.u.set_report.size >= 2) {
            state = in.u.set_report.data[1];
          }
          reply.type = UHID_SET_REPORT_REPLY;
          reply.u.set_report_reply.id = in.u.set_report.id;
          (void)!write(fd, &reply, sizeof(reply));
        }
      }
      if ((state & 3) == 3 && sent < 1000) {  // enabled: stream
        uhid_event input{};
        input.type = UHID_INPUT2;
        const uint8_t report[14] = {0x01, 0, 0, 0, 0, 0x55, 0x15, 0, 0, 0, 0, 0, 0, 0x03};
        std::memcpy(input.u.input2.data, report, sizeof(report));
        input.u.input2.size = sizeof(report);
        (void)!write(fd, &input, sizeof(input));
        ++sent;
      }
    }
  });

  ReaderConfig config;  // auto: libudev enumeration of the real /sys/class/hidraw
  config.reenumerate_ms = 100;
  TrackerReader reader(config);
  std::string error;
  ASSERT_TRUE(reader.start(&error)) << error;
  int samples = 0;
  TrackerEvent events[16];
  for (int i = 0; i < 100 && samples < 5; ++i) {
    pollfd pfd{reader.wakeup_fd(), POLLIN, 0};
    poll(&pfd, 1, 50);
    const size_t n = reader.poll(events, 16);
    for (size_t k = 0; k < n; ++k) {
      if (events[k].kind == TrackerEvent::Kind::kSample) {
        EXPECT_NEAR(events[k].sample.rotation[2], 0.5236, 1e-4);
        ++samples;
      }
    }
  }
  reader.stop();
  done.store(true);
  device.join();
  uhid_event destroy{};
  destroy.type = UHID_DESTROY;
  (void)!write(fd, &destroy, sizeof(destroy));
  close(fd);
  EXPECT_GE(samples, 5);
}

}  // namespace
}  // namespace syncd::headtrack
