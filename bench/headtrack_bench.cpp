// Head-tracker per-packet costs with equivalence gates, in the style of the predecessor's
// harness: every optimised path is timed next to a straightforward reference measured in the same
// run, and the run fails unless their outputs are identical.
//
//   decode:  word-wise extraction + cached scale factors  vs  per-bit loop + std::pow per value
//   json:    std::to_chars into a reused buffer           vs  snprintf into a std::string
//   send:    one sendmmsg of both datagrams               vs  two sendto (loopback, drained)
//   filter, OpenTrack encoding, and the whole parse -> filter -> serialise path (no syscalls)
//
// Gates (exit 1 on failure): decode bit-identical over 20,000 random layouts/buffers and over the
// synthetic replay; JSON byte-identical over 20,000 random samples; pose outputs over the replay
// byte-identical between the optimised and the reference decode paths. The 0.1x-of-send target is
// reported (MET/MISSED), not gated.
//
// Run: headtrack_bench [replay-file]   (best of 5 repeats per metric)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "headtrack/head_tracker.h"
#include "headtrack/orientation.h"
#include "headtrack/output.h"
#include "headtrack/replay.h"
#include "headtrack/report_decoder.h"
#include "headtrack_fixtures.h"
#include "headtrack_reference.h"

using namespace syncd::headtrack;

namespace {

// Keeps a value alive without a volatile compound assignment (deprecated in C++20).
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "g"(value) : "memory");
}

// Best-of-5 nanoseconds per iteration.
double measure(size_t iterations, const std::function<void()>& body) {
  double best = 1e300;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < iterations; ++i) body();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best,
                    std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iterations));
  }
  return best;
}

int failures = 0;
void gate(bool ok, const char* what) {
  std::printf("gate  %-58s %s\n", what, ok ? "PASS" : "FAIL");
  if (!ok) ++failures;
}

void row(const char* name, double ns_ref, double ns_opt) {
  std::printf("%-34s reference %9.1f ns   optimised %9.1f ns   %5.2fx faster\n", name, ns_ref,
              ns_opt, ns_ref / ns_opt);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string replay_path =
      argc > 1 ? argv[1] : std::string(SYNC_ROOT_DIR) + "/tests/data/headtrack/synthetic.replay";
  ReplayFile replay;
  std::string error;
  if (!load_replay(replay_path, replay, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  ParsedDescriptor parsed;
  TrackerLayout layout;
  if (!parse_hid_descriptor(replay.descriptor, parsed).ok() ||
      !recognize_head_tracker(parsed, layout, nullptr)) {
    std::fprintf(stderr, "replay descriptor is not a head tracker\n");
    return 1;
  }

  // ---- Gates ----
  {
    std::mt19937 rng(1);
    bool same = true;
    for (int i = 0; i < 20000 && same; ++i) {
      const TrackerLayout l = reference::random_layout(rng);
      ReportDecoder dec(l);
      std::vector<uint8_t> report(l.input_report_bytes - (rng() % 2 ? 0 : 1));
      for (auto& b : report) b = uint8_t(rng());
      if (!report.empty() && rng() % 8) report[0] = l.input_report_id;
      TrackerSample a, b;
      const DecodeStatus sa = dec.decode(report, a);
      same = sa == reference::decode(l, report, b) &&
             (sa != DecodeStatus::kOk ||
              (std::memcmp(a.rotation, b.rotation, sizeof(a.rotation)) == 0 &&
               std::memcmp(a.angular_velocity, b.angular_velocity, sizeof(a.rotation)) == 0 &&
               a.counter == b.counter));
    }
    gate(same, "decode bit-identical, 20,000 random layouts/buffers");
  }
  {
    std::mt19937_64 rng(2);
    std::uniform_real_distribution<double> wide(-1e6, 1e6), unit(-1, 1);
    TelemetryJson json;
    bool same = true;
    std::string device;
    for (int i = 0; i < 20000 && same; ++i) {
      TelemetrySample s;
      device.assign(rng() % 40, 'x');
      for (char& c : device) c = char(32 + rng() % 95);
      s.device = device;
      for (double& v : s.rotation_vector) v = unit(rng) * 3.2;
      s.quaternion = {unit(rng), unit(rng), unit(rng), unit(rng)};
      for (double& v : s.ypr_deg) v = unit(rng) * 180;
      double gyro[3] = {unit(rng) * 32, unit(rng), unit(rng)};
      s.gyroscope = i % 3 ? gyro : nullptr;
      s.reset_counter = uint32_t(rng() % 256);
      s.packets_per_second = std::fabs(wide(rng)) / 1e4;
      s.seq = rng();
      s.timestamp_ns = rng();
      same = json.serialize(s) == reference::json(s);
    }
    gate(same, "JSON byte-identical, 20,000 random samples");
  }
  {
    // The whole replay through both decode paths and the same pipeline: identical datagrams.
    ReportDecoder dec(layout);
    PosePipeline p1, p2;
    TelemetryJson j1;
    bool same = true;
    size_t n = 0;
    for (const ReplayReport& r : replay.reports) {
      TrackerSample a, b;
      const DecodeStatus sa = dec.decode(r.bytes, a);
      same &= sa == reference::decode(layout, r.bytes, b);
      if (sa != DecodeStatus::kOk) continue;
      OpenTrackPacket pa, pb;
      encode_opentrack(p1.process(a, 0.04), pa);
      encode_opentrack(p2.process(b, 0.04), pb);
      same &= pa == pb;
      TelemetrySample t;
      t.quaternion = p1.pose().orientation;
      for (int k = 0; k < 3; ++k) t.ypr_deg[k] = p1.pose().ypr_deg[k];
      same &= std::string(j1.serialize(t)) == reference::json(t);
      ++n;
    }
    gate(same && n > 0, "replay: decode, OpenTrack and JSON outputs byte-identical");
  }

  // ---- Timings ----
  std::vector<std::vector<uint8_t>> reports;
  for (const ReplayReport& r : replay.reports) reports.push_back(r.bytes);
  size_t k = 0;
  auto next = [&]() -> const std::vector<uint8_t>& { return reports[k++ % reports.size()]; };

  ReportDecoder dec(layout);
  TrackerSample s;
  const double decode_ref = measure(200000, [&] {
    reference::decode(layout, next(), s);
    keep(s.rotation[0]);
  });
  const double decode_opt = measure(200000, [&] {
    dec.decode(next(), s);
    keep(s.rotation[0]);
  });
  row("decode (3 rot + 3 gyro + counter)", decode_ref, decode_opt);

  PosePipeline pipeline;
  dec.decode(reports[5], s);
  const double filter = measure(200000, [&] { keep(pipeline.process(s, 0.04).ypr_deg[0]); });
  std::printf("%-34s %9.1f ns\n", "pipeline (recenter+filter+euler)", filter);

  TelemetryJson json;
  TelemetrySample t;
  t.device = "WH-1000XM5";
  const double gyro[3] = {0.01, -0.02, 0.5};
  t.gyroscope = gyro;
  t.quaternion = pipeline.pose().orientation;
  for (int i = 0; i < 3; ++i) {
    t.ypr_deg[i] = pipeline.pose().ypr_deg[i];
    t.rotation_vector[i] = s.rotation[i];
  }
  t.packets_per_second = 25;
  const double json_ref = measure(100000, [&] {
    ++t.seq;
    keep(double(reference::json(t).size()));
  });
  const double json_opt = measure(100000, [&] {
    ++t.seq;
    keep(double(json.serialize(t).size()));
  });
  row("JSON telemetry", json_ref, json_opt);

  OpenTrackPacket packet;
  const double opentrack = measure(1000000, [&] {
    encode_opentrack(pipeline.pose(), packet);
    keep(packet[47]);
  });
  std::printf("%-34s %9.1f ns\n", "OpenTrack encode", opentrack);

  PosePipeline pipeline2;
  int64_t tick = 0;
  const double full = measure(200000, [&] {
    TrackerSample x;
    if (dec.decode(next(), x) != DecodeStatus::kOk) return;
    x.t_ns = (tick += 40'000'000);
    const Pose& pose = pipeline2.process(x, 0.04);
    encode_opentrack(pose, packet);
    TelemetrySample u;
    u.device = "WH-1000XM5";
    u.quaternion = pose.orientation;
    for (int i = 0; i < 3; ++i) u.ypr_deg[i] = pose.ypr_deg[i];
    u.gyroscope = x.angular_velocity;
    keep(double(json.serialize(u).size()) + packet[40]);
  });
  std::printf("%-34s %9.1f ns\n", "full: parse->filter->serialise", full);

  // Loopback send: a receiver on two consecutive ports, drained outside the timed batches.
  int rx[2] = {-1, -1};
  uint16_t port = 0;
  for (int attempt = 0; attempt < 50 && rx[1] < 0; ++attempt) {
    if (rx[0] >= 0) close(rx[0]);
    rx[0] = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(rx[0], reinterpret_cast<sockaddr*>(&a), sizeof(a));
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
  UdpOutput out;
  if (rx[1] < 0 || !out.open("127.0.0.1", port, &error)) {
    std::fprintf(stderr, "loopback setup failed: %s\n", error.c_str());
    return 1;
  }
  const std::string_view payload = json.serialize(t);
  const std::string json_copy(payload);
  auto drain = [&] {
    char buf[2048];
    for (int fd : rx) {
      while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
      }
    }
  };
  auto time_sends = [&](bool mmsg) {
    double best = 1e300;
    for (int rep = 0; rep < 5; ++rep) {
      double total = 0;
      int count = 0;
      for (int batch = 0; batch < 40; ++batch) {
        drain();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 64; ++i) {
          if (mmsg)
            out.send(packet, json_copy);
          else
            out.send_separately(packet, json_copy);
        }
        const auto t1 = std::chrono::steady_clock::now();
        total += std::chrono::duration<double, std::nano>(t1 - t0).count();
        count += 64;
      }
      best = std::min(best, total / count);
    }
    return best;
  };
  const double two_sendto = time_sends(false);
  const double one_sendmmsg = time_sends(true);
  const double two_sendto_again = time_sends(false);
  const double sendto_best = std::min(two_sendto, two_sendto_again);
  std::printf("%-34s two sendto %9.1f ns   one sendmmsg %9.1f ns   ratio %.2fx (sendmmsg/sendto)\n",
              "send both datagrams (loopback)", sendto_best, one_sendmmsg,
              one_sendmmsg / sendto_best);
  std::printf("send errors: %llu\n", (unsigned long long)out.send_errors());
  close(rx[0]);
  close(rx[1]);

  const double send_cost = std::min(sendto_best, one_sendmmsg);
  const double per_packet = decode_opt + filter + json_opt + opentrack;
  std::printf(
      "per-packet processing (decode+filter+JSON+OpenTrack) %.1f ns = %.3fx the send "
      "(%.1f ns); target <= 0.1x\n",
      per_packet, per_packet / send_cost, send_cost);
  std::printf("full path measured in one loop %.1f ns = %.3fx the send\n", full, full / send_cost);
  // A performance target, reported but not a gate: only equivalence failures fail the run.
  std::printf("target per-packet processing <= 0.1x the send cost: %s\n",
              per_packet <= 0.1 * send_cost ? "MET" : "MISSED");
  if (failures) {
    std::printf("%d gate(s) failed\n", failures);
    return 1;
  }
  std::printf("all gates passed\n");
  return 0;
}
