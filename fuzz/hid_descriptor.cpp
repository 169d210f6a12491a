// libFuzzer target for the HID descriptor parser and head-tracker recognition.
//
// Input: a report descriptor. When it parses and holds a head tracker, the layout's decoder is
// also run over the input's own bytes as a report and must agree with the reference decoder,
// and the feature builders are run on a buffer of the declared size. Invariants abort.
#include "headtrack/hid_descriptor.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "headtrack/head_tracker.h"
#include "headtrack/report_decoder.h"
#include "headtrack_reference.h"

using namespace syncd::headtrack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);  // exact-size copy: overreads trip ASan
  ParsedDescriptor parsed;
  const ParseResult r = parse_hid_descriptor(bytes, parsed);
  FUZZ_CHECK(r.ok() || r.error_offset < size);
  FUZZ_CHECK(parsed.fields.size() <= kMaxFields);
  for (const HidField& f : parsed.fields) {
    FUZZ_CHECK(f.usages.size() <= 2 * kMaxUsagesPerField);
    FUZZ_CHECK(f.collection < int32_t(parsed.collections.size()));
  }
  TrackerLayout layout;
  const char* why = nullptr;
  if (!r.ok() || !recognize_head_tracker(parsed, layout, &why)) return 0;
  FUZZ_CHECK(layout.rotation[0].bit_size >= 1 && layout.rotation[0].bit_size <= 32);

  ReportDecoder decoder(layout);
  std::vector<uint8_t> report(bytes.begin(), bytes.begin() + long(std::min(size, size_t(64))));
  if (!report.empty() && layout.uses_report_ids) report[0] = layout.input_report_id;
  TrackerSample a, b;
  const DecodeStatus sa = decoder.decode(report, a);
  const DecodeStatus sb = reference::decode(layout, report, b);
  FUZZ_CHECK(sa == sb);
  if (sa == DecodeStatus::kOk) {
    FUZZ_CHECK(std::memcmp(a.rotation, b.rotation, sizeof(a.rotation)) == 0);
    FUZZ_CHECK(std::memcmp(a.angular_velocity, b.angular_velocity, sizeof(a.rotation)) == 0);
  }
  for (uint8_t id : layout.control_report_ids()) {
    std::vector<uint8_t> feature(layout.feature_report_bytes[id]);
    if (feature.empty()) continue;
    if (layout.uses_report_ids) feature[0] = id;
    apply_enable(layout, feature, 0.02);
    apply_disable(layout, feature);
  }
  return 0;
}
