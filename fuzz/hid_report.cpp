// libFuzzer target for head-tracker report decoding and the pose pipeline.
//
// Input: byte 0 picks the v1 or v2 reference layout and dt; the rest is a stream of 14-byte
// input reports. Each report is decoded by the word-wise decoder and by the per-bit reference
// (they must agree bit for bit), then run through the pipeline; the OpenTrack packet must be 48
// finite bytes and the JSON must serialize.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "headtrack/head_tracker.h"
#include "headtrack/orientation.h"
#include "headtrack/output.h"
#include "headtrack/report_decoder.h"
#include "headtrack_fixtures.h"
#include "headtrack_reference.h"

using namespace syncd::headtrack;

namespace {

TrackerLayout make_layout(bool v2) {
  ParsedDescriptor parsed;
  parse_hid_descriptor(v2 ? testing::v2_descriptor() : testing::v1_descriptor(), parsed);
  TrackerLayout layout;
  recognize_head_tracker(parsed, layout, nullptr);
  return layout;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const TrackerLayout layouts[2] = {make_layout(false), make_layout(true)};
  const TrackerLayout& layout = layouts[data[0] & 1];
  const double dt = double(data[0] >> 1) / 1000.0;
  ReportDecoder decoder(layout);
  PipelineConfig config;
  config.filter.predict_ms = double(data[0] & 0x3f);
  PosePipeline pipeline(config);
  TelemetryJson json;
  ++data;
  --size;
  for (size_t off = 0; off < size; off += 14) {
    const size_t n = std::min<size_t>(14, size - off);
    std::vector<uint8_t> report(data + off, data + off + n);  // exact size
    TrackerSample a, b;
    const DecodeStatus sa = decoder.decode(report, a);
    FUZZ_CHECK(sa == reference::decode(layout, report, b));
    if (sa != DecodeStatus::kOk) continue;
    FUZZ_CHECK(std::memcmp(a.rotation, b.rotation, sizeof(a.rotation)) == 0);
    const Pose& pose = pipeline.process(a, dt);
    OpenTrackPacket packet;
    encode_opentrack(pose, packet);
    double v[6];
    std::memcpy(v, packet.data(), sizeof(v));
    for (double d : v) FUZZ_CHECK(std::isfinite(d));
    TelemetrySample t;
    t.quaternion = pose.orientation;
    for (int k = 0; k < 3; ++k) t.ypr_deg[k] = pose.ypr_deg[k];
    FUZZ_CHECK(!json.serialize(t).empty());
  }
  return 0;
}
