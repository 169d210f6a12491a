// Orientation pipeline and outputs: the spec's math vectors, property tests, the OpenTrack and
// JSON formats, and a loopback test receiving both datagrams from one source port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>

#include "headtrack/orientation.h"
#include "headtrack/output.h"
#include "headtrack/report_decoder.h"
#include "headtrack_fixtures.h"
#include "headtrack_reference.h"

namespace syncd::headtrack {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Angle of conj(a) * b; atan2 stays accurate near zero where acos(dot) does not.
double angle_between(const Quat& a, const Quat& b) {
  const Quat d = multiply(conjugate(normalized(a)), normalized(b));
  return 2 * std::atan2(std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z), std::fabs(d.w));
}

TEST(Orientation, SpecVector) {
  const double r[3] = {0, 0, kPi / 6};
  const Quat q = quat_from_rotation_vector(r);
  EXPECT_NEAR(q.w, 0.965926, 1e-6);
  EXPECT_NEAR(q.x, 0, 1e-12);
  EXPECT_NEAR(q.y, 0, 1e-12);
  EXPECT_NEAR(q.z, 0.258819, 1e-6);
  const double forward[3] = {0, 1, 0};
  double nose[3];
  rotate(q, forward, nose);
  EXPECT_NEAR(nose[0], -0.5, 1e-6);
  EXPECT_NEAR(nose[1], 0.866025, 1e-6);
  EXPECT_NEAR(nose[2], 0, 1e-12);
  EXPECT_NEAR(head_euler(q).yaw * 180 / kPi, 30.0, 1e-9);
}

TEST(Orientation, TinyRotationIsIdentity) {
  const double r[3] = {0, 0, 0};
  const Quat q = quat_from_rotation_vector(r);
  EXPECT_EQ(q.w, 1);
  EXPECT_EQ(q.z, 0);
}

TEST(Orientation, EulerRoundTripProperty) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> yaw(-kPi, kPi), pitch(-1.5, 1.5), roll(-kPi, kPi);
  for (int i = 0; i < 20000; ++i) {
    const HeadEuler e{yaw(rng), pitch(rng), roll(rng)};
    const Quat q = quat_from_head_euler(e);
    const HeadEuler back = head_euler(q);
    const Quat q2 = quat_from_head_euler(back);
    ASSERT_LT(angle_between(q, q2), 1e-9) << e.yaw << " " << e.pitch << " " << e.roll;
    ASSERT_NEAR(back.pitch, e.pitch, 1e-9);
  }
}

TEST(Orientation, RotationVectorRoundTrip) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> c(-1.8, 1.8);
  for (int i = 0; i < 5000; ++i) {
    const double r[3] = {c(rng), c(rng), c(rng)};
    double back[3];
    rotation_vector_from_quat(quat_from_rotation_vector(r), back);
    for (int k = 0; k < 3; ++k) ASSERT_NEAR(back[k], r[k], 1e-9);
  }
}

TEST(Pipeline, RecenterGivesIdentityProperty) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> c(-3.0, 3.0);
  PipelineConfig config;
  config.filter.smoothing = 0.5;
  for (int i = 0; i < 2000; ++i) {
    PosePipeline p(config);
    TrackerSample s;
    for (double& v : s.rotation) v = c(rng);
    p.process(s, 0.04);
    for (double& v : s.rotation) v = c(rng);
    p.request_recenter();
    const Pose& pose = p.process(s, 0.04);
    ASSERT_TRUE(pose.recentered);
    ASSERT_LT(angle_between(pose.orientation, Quat{}), 1e-9);
    for (double a : pose.ypr_deg) ASSERT_NEAR(a, 0, 1e-6);
  }
}

TEST(Pipeline, DefaultAxisMapping) {
  PipelineConfig config;
  config.recenter_on_start = false;
  config.filter.smoothing = 0;
  PosePipeline p(config);
  TrackerSample s;
  s.rotation[2] = kPi / 6;                                // +30 deg about Z
  EXPECT_NEAR(p.process(s, 0.04).ypr_deg[0], -30, 1e-9);  // yaw = -rot(Z)
  p.reset();
  s.rotation[2] = 0;
  s.rotation[0] = 0.2;  // about X: pitch = +rot(X)
  EXPECT_NEAR(p.process(s, 0.04).ypr_deg[1], 0.2 * 180 / kPi, 1e-9);
  p.reset();
  s.rotation[0] = 0;
  s.rotation[1] = 0.3;  // about Y: roll = -rot(Y)
  EXPECT_NEAR(p.process(s, 0.04).ypr_deg[2], -0.3 * 180 / kPi, 1e-9);
}

TEST(Pipeline, ConfigurableAxes) {
  AxisMap m;
  ASSERT_TRUE(parse_axis_order("xyz", m));
  EXPECT_EQ(m.source[0], 0);
  EXPECT_EQ(m.sign[0], 1);   // X was not inverted
  EXPECT_EQ(m.sign[2], -1);  // Z keeps its inversion, now in the roll slot
  ASSERT_TRUE(parse_invert("none", m));
  for (double s : m.sign) EXPECT_EQ(s, 1);
  ASSERT_TRUE(parse_invert("X", m));
  EXPECT_EQ(m.sign[0], -1);
  EXPECT_FALSE(parse_axis_order("XXY", m));
  EXPECT_FALSE(parse_axis_order("XY", m));
  EXPECT_FALSE(parse_invert("w", m));
}

TEST(Pipeline, AutoRecenterOnDiscontinuity) {
  PipelineConfig config;
  config.recenter_on_start = false;
  PosePipeline p(config);
  TrackerSample s;
  s.has_counter = true;
  s.counter = 4;
  s.rotation[2] = 1.0;
  EXPECT_FALSE(p.process(s, 0.04).recentered);
  EXPECT_EQ(p.pose().discontinuities, 0u);
  s.counter = 5;
  s.rotation[2] = -0.5;  // the device re-based its frame
  const Pose& pose = p.process(s, 0.04);
  EXPECT_TRUE(pose.recentered);
  EXPECT_EQ(pose.discontinuities, 1u);
  EXPECT_LT(angle_between(pose.orientation, Quat{}), 1e-9);
}

// At 25 Hz with an all-zero gyro the filter must still follow a turn closely: the speed comes from
// successive orientations. (Steps and jitter against upstream: headtrack_filter_test.cpp.)
TEST(Filter, ZeroGyroStaysResponsive) {
  OrientationFilter f;
  const double zero[3] = {0, 0, 0};
  f.update(Quat{}, zero, 0);
  const double rate = 2.0;  // rad/s about Z
  Quat out;
  Quat truth;
  for (int i = 1; i <= 40; ++i) {
    const double r[3] = {0, 0, rate * 0.04 * i};
    truth = quat_from_rotation_vector(r);
    out = f.update(truth, zero, 0.04);
  }
  EXPECT_TRUE(f.gyro_silent());
  EXPECT_NEAR(f.angular_speed(), rate, 0.05);  // the low-passed (0.4 Hz) estimate caught up
  // 2 rad/s opens the filter to ~22 Hz: under 0.2 degree behind (upstream: ~20 degrees).
  EXPECT_LT(angle_between(out, truth), 0.2 * kPi / 180);

  // At rest it smooths: a 0.5 degree jitter moves the output by well under that.
  OrientationFilter g;
  g.update(Quat{}, zero, 0);
  const double jitter[3] = {0, 0, 0.5 * kPi / 180};
  const Quat q = g.update(quat_from_rotation_vector(jitter), zero, 0.04);
  EXPECT_LT(angle_between(q, Quat{}), 0.2 * jitter[2]);
}

TEST(Filter, PredictsAlongAngularVelocity) {
  FilterConfig fc;
  fc.smoothing = 0;
  fc.predict_ms = 50;
  OrientationFilter f(fc);
  const double gyro[3] = {0, 0, 1.0};
  f.update(Quat{}, gyro, 0);
  const Quat out = f.update(Quat{}, gyro, 0.04);
  EXPECT_NEAR(head_euler(out).yaw, 0.05, 1e-9);  // 1 rad/s * 50 ms ahead
}

TEST(Filter, IgnoresBadDt) {
  OrientationFilter f;
  const Quat a = f.update(Quat{}, nullptr, 0);
  const double r[3] = {0, 0, 1};
  const Quat b = f.update(quat_from_rotation_vector(r), nullptr, std::nan(""));
  EXPECT_NEAR(head_euler(b).yaw, 1.0, 1e-9);  // reset: no slerp across an unknown gap
  EXPECT_EQ(a.w, 1);
}

TEST(OpenTrack, SpecPacket) {
  const double v[6] = {0, 0, 0, 30, -20, 5};
  OpenTrackPacket p;
  encode_opentrack(v, p);
  EXPECT_EQ(p.size(), 48u);
  EXPECT_EQ(p[30], 0x3e);
  EXPECT_EQ(p[31], 0x40);
  EXPECT_EQ(p[38], 0x34);
  EXPECT_EQ(p[39], 0xc0);
  EXPECT_EQ(p[46], 0x14);
  EXPECT_EQ(p[47], 0x40);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(p[size_t(i)], 0);
}

TEST(OpenTrack, NeverNaN) {
  const double v[6] = {std::nan(""), INFINITY, -INFINITY, 1, 2, 3};
  OpenTrackPacket p;
  encode_opentrack(v, p);
  double back[6];
  std::memcpy(back, p.data(), 48);
  for (double d : back) EXPECT_TRUE(std::isfinite(d));
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(back[5], 3);
}

// Random reports through decode -> pipeline -> encode: always 48 finite bytes.
TEST(OpenTrack, FiniteUnderRandomReportsProperty) {
  ParsedDescriptor parsed;
  ASSERT_TRUE(parse_hid_descriptor(testing::v1_descriptor(), parsed).ok());
  TrackerLayout layout;
  ASSERT_TRUE(recognize_head_tracker(parsed, layout, nullptr));
  ReportDecoder dec(layout);
  PipelineConfig config;
  config.filter.predict_ms = 30;
  PosePipeline pipe(config);
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> dt(-0.01, 0.2);
  uint8_t report[14];
  for (int i = 0; i < 20000; ++i) {
    for (auto& b : report) b = uint8_t(rng());
    report[0] = 1;
    TrackerSample s;
    if (dec.decode(report, s) != DecodeStatus::kOk) continue;
    if (i % 7 == 0) pipe.request_recenter();
    OpenTrackPacket p;
    encode_opentrack(pipe.process(s, dt(rng)), p);
    double back[6];
    std::memcpy(back, p.data(), 48);
    for (double d : back) ASSERT_TRUE(std::isfinite(d));
    for (int k = 3; k < 6; ++k) ASSERT_TRUE(back[k] > -180.0 - 1e-9 && back[k] <= 180.0);
  }
  EXPECT_GT(dec.counters().ok, 10000u);
  EXPECT_GT(dec.counters().out_of_range, 0u);
}

TEST(TelemetryJson, Format) {
  TelemetryJson json;
  TelemetrySample s;
  s.device = "WH-1000XM5 \"L\"";
  s.rotation_vector[2] = 0.5;
  s.ypr_deg[0] = -30;
  const double gyro[3] = {0, 0, 1.25};
  s.gyroscope = gyro;
  s.reset_counter = 3;
  s.packets_per_second = 25;
  s.discontinuity_count = 1;
  s.seq = 7;
  s.timestamp_ns = 123;
  EXPECT_EQ(json.serialize(s),
            "{\"version\":2,\"device\":\"WH-1000XM5 \\\"L\\\"\",\"rotationVector\":[0,0,0.5],"
            "\"quaternion\":[1,0,0,0],\"yprDegrees\":[-30,0,0],\"gyroscope\":[0,0,1.25],"
            "\"resetCounter\":3,\"packetsPerSecond\":25.000,\"discontinuityCount\":1,\"seq\":7,"
            "\"timestampNs\":123}");
  s.gyroscope = nullptr;
  s.device = {};
  s.rotation_vector[0] = std::nan("");
  const std::string_view out = json.serialize(s);
  EXPECT_NE(out.find("\"device\":null"), std::string_view::npos);
  EXPECT_NE(out.find("\"gyroscope\":null"), std::string_view::npos);
  EXPECT_NE(out.find("[null,0,0.5]"), std::string_view::npos);
}

TEST(TelemetryJson, ByteIdenticalToReferenceProperty) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> wide(-1e6, 1e6), unit(-1, 1);
  TelemetryJson json;
  std::string device;
  for (int i = 0; i < 20000; ++i) {
    TelemetrySample s;
    device.assign(rng() % 160, 'a');
    for (char& c : device) c = char(rng() % 256);
    s.device = device;
    for (double& v : s.rotation_vector) v = i % 3 ? unit(rng) : wide(rng);
    s.quaternion = {unit(rng), unit(rng), unit(rng), unit(rng)};
    for (double& v : s.ypr_deg) v = wide(rng) / 1e4;
    double gyro[3] = {unit(rng) * 32, unit(rng), std::ldexp(unit(rng), -int(rng() % 60))};
    s.gyroscope = i % 5 ? gyro : nullptr;
    s.reset_counter = uint32_t(rng() % 256);
    s.packets_per_second = std::fabs(wide(rng)) / 1e3;
    s.discontinuity_count = rng() % 1000;
    s.seq = rng();
    s.timestamp_ns = rng();
    ASSERT_EQ(json.serialize(s), reference::json(s)) << i;
  }
}

TEST(UdpOutput, BothDatagramsFromOneSourcePort) {
  // Receiver: two sockets on consecutive ports (retry until a free pair is found).
  int rx[2] = {-1, -1};
  uint16_t port = 0;
  for (int attempt = 0; attempt < 50 && rx[1] < 0; ++attempt) {
    for (int& fd : rx) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    rx[0] = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(rx[0], reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(rx[0], reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    if (port >= 65534) continue;
    rx[1] = socket(AF_INET, SOCK_DGRAM, 0);
    a.sin_port = htons(uint16_t(port + 1));
    if (bind(rx[1], reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(rx[1]);
      rx[1] = -1;
    }
  }
  ASSERT_GE(rx[1], 0);

  UdpOutput out;
  std::string error;
  ASSERT_TRUE(out.open("127.0.0.1", port, &error)) << error;
  const double v[6] = {0, 0, 0, 30, -20, 5};
  OpenTrackPacket packet;
  encode_opentrack(v, packet);
  const std::string json = "{\"seq\":1}";
  EXPECT_EQ(out.send(packet, json), 2);

  uint16_t source_ports[2];
  for (int i = 0; i < 2; ++i) {
    pollfd pfd{rx[i], POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, 2000), 1);
    uint8_t buf[2048];
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    const ssize_t n =
        recvfrom(rx[i], buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
    source_ports[i] = ntohs(from.sin_port);
    if (i == 0) {
      ASSERT_EQ(n, 48);
      EXPECT_EQ(std::memcmp(buf, packet.data(), 48), 0);
    } else {
      ASSERT_EQ(size_t(n), json.size());
      EXPECT_EQ(std::memcmp(buf, json.data(), json.size()), 0);
    }
  }
  EXPECT_EQ(source_ports[0], source_ports[1]);
  EXPECT_EQ(source_ports[0], out.local_port());
  EXPECT_EQ(out.send_separately(packet, json), 2);
  close(rx[0]);
  close(rx[1]);
}

TEST(UdpOutput, RejectsPortOutOfRange) {
  UdpOutput out;
  std::string error;
  EXPECT_FALSE(out.open("127.0.0.1", 65535, &error));
  EXPECT_FALSE(out.open("127.0.0.1", 0, &error));
}

}  // namespace
}  // namespace syncd::headtrack
