// HID descriptor parsing, head-tracker recognition, report decoding and the feature-report
// builders, against the spec's reference descriptors and test vectors (docs/headtracker.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "headtrack/head_tracker.h"
#include "headtrack/hid_descriptor.h"
#include "headtrack/report_decoder.h"
#include "headtrack_fixtures.h"
#include "headtrack_reference.h"

namespace syncd::headtrack {
namespace {

TrackerLayout layout_of(const std::vector<uint8_t>& descriptor) {
  ParsedDescriptor parsed;
  EXPECT_TRUE(parse_hid_descriptor(descriptor, parsed).ok());
  TrackerLayout layout;
  const char* why = nullptr;
  EXPECT_TRUE(recognize_head_tracker(parsed, layout, &why)) << why;
  return layout;
}

std::vector<uint8_t> report_with(int16_t rx, int16_t ry, int16_t rz, int16_t gx = 0, int16_t gy = 0,
                                 int16_t gz = 0, uint8_t counter = 0) {
  std::vector<uint8_t> r(14);
  r[0] = 1;
  const int16_t v[6] = {rx, ry, rz, gx, gy, gz};
  std::memcpy(r.data() + 1, v, 12);
  r[13] = counter;
  return r;
}

TEST(HidDescriptor, V1ReferenceFields) {
  ParsedDescriptor parsed;
  ASSERT_TRUE(parse_hid_descriptor(testing::v1_descriptor(), parsed).ok());
  EXPECT_TRUE(parsed.uses_report_ids);
  EXPECT_EQ(parsed.report_bytes(ReportKind::kInput, 1), 14u);
  EXPECT_EQ(parsed.report_bytes(ReportKind::kFeature, 1), 2u);
  EXPECT_EQ(parsed.report_bytes(ReportKind::kFeature, 2), 40u);
  ASSERT_EQ(parsed.collections.size(), 3u);
  EXPECT_EQ(parsed.collections[0].usage, ht_usage::kOtherCustom);
  EXPECT_EQ(parsed.collections[0].type, 1);

  const HidField* rotation = nullptr;
  for (const HidField& f : parsed.fields) {
    if (f.kind == ReportKind::kInput && f.usage_at(0) == ht_usage::kRotationVector) rotation = &f;
  }
  ASSERT_NE(rotation, nullptr);
  EXPECT_EQ(rotation->report_id, 1);  // inherited from the feature section's Report ID (1)
  EXPECT_EQ(rotation->bit_offset, 0u);
  EXPECT_EQ(rotation->report_size, 16u);
  EXPECT_EQ(rotation->report_count, 3u);
  EXPECT_EQ(rotation->logical_min, -32767);
  EXPECT_EQ(rotation->logical_max, 32767);
  EXPECT_EQ(rotation->physical_min, -314159264);
  EXPECT_EQ(rotation->physical_max, 314159265);
  EXPECT_EQ(rotation->unit_exponent, -8);
}

TEST(HidDescriptor, V1Layout) {
  const TrackerLayout l = layout_of(testing::v1_descriptor());
  EXPECT_EQ(l.input_report_id, 1);
  EXPECT_EQ(l.input_report_bytes, 14u);
  EXPECT_EQ(l.rotation[0].bit_offset, 0u);
  EXPECT_EQ(l.rotation[2].bit_offset, 32u);
  ASSERT_TRUE(l.has_angular_velocity);
  EXPECT_EQ(l.angular_velocity[0].bit_offset, 48u);
  EXPECT_EQ(l.angular_velocity[0].physical_max, 32);
  ASSERT_TRUE(l.has_counter);
  EXPECT_EQ(l.counter.bit_offset, 96u);
  EXPECT_EQ(l.counter.logical_max, 255);  // 0xFF with a non-negative minimum is unsigned
  ASSERT_TRUE(l.description.present);
  EXPECT_EQ(l.description.report_id, 2);
  EXPECT_EQ(l.description.length, 23u);
  EXPECT_EQ(l.unique_id.byte_offset, 23u);
  EXPECT_EQ(l.version_hint(), 1);
  ASSERT_TRUE(l.reporting_state.present);
  EXPECT_EQ(l.reporting_state.value.bit_offset, 0u);
  ASSERT_TRUE(l.power_state.present);
  EXPECT_EQ(l.power_state.value.bit_offset, 1u);
  ASSERT_TRUE(l.has_interval);
  EXPECT_EQ(l.interval.bit_offset, 2u);
  EXPECT_EQ(l.interval.unit_exponent, -3);
  EXPECT_FALSE(l.transport.present);
  EXPECT_EQ(l.control_report_ids(), std::vector<uint8_t>{1});
}

TEST(HidDescriptor, V2Layout) {
  const TrackerLayout l = layout_of(testing::v2_descriptor());
  EXPECT_EQ(l.version_hint(), 2);
  EXPECT_EQ(l.description.length, 25u);
  ASSERT_TRUE(l.transport.present);
  EXPECT_EQ(l.transport.value.report_id, 1);
  EXPECT_EQ(l.transport.value.bit_offset, 8u);
  EXPECT_EQ(l.transport.value_for(ht_usage::kTransportAcl), 0);
  EXPECT_EQ(l.feature_report_bytes[1], 3u);  // 8 bits + transport + the stray 1-bit item
  EXPECT_EQ(l.input_report_bytes, 14u);
  EXPECT_EQ(l.angular_velocity[0].bit_offset, 48u);
}

TEST(HidDescriptor, EdgeItems) {
  const std::vector<uint8_t> d = {
      0xFE, 0x03, 0x10, 0xAA, 0xBB, 0xCC,  // long item: skipped
      0x05, 0x20, 0x09, 0xE1, 0xA1, 0x01,
      0xA4,                                // Push
      0x15, 0x81, 0x25, 0x7F,              // logical -127..127 (signed bytes)
      0x75, 0x08, 0x95, 0x02, 0x55, 0xF8,  // unit exponent as a signed byte (-8)
      0x0B, 0x44, 0x05, 0x20, 0x00,        // extended usage 0x0020:0544
      0x81, 0x02,
      0xB4,  // Pop: back to no ranges, no sizes
      0x75, 0x04, 0x95, 0x03, 0x15, 0x00, 0x25, 0x0F,
      0x19, 0x10, 0x29, 0x12,                          // usage min/max 0x10..0x12
      0x81, 0x02, 0x75, 0x04, 0x95, 0x01, 0x81, 0x03,  // constant padding
      0xC0,
  };
  ParsedDescriptor p;
  ASSERT_TRUE(parse_hid_descriptor(d, p).ok());
  ASSERT_EQ(p.fields.size(), 3u);
  EXPECT_FALSE(p.uses_report_ids);
  EXPECT_EQ(p.fields[0].logical_min, -127);
  EXPECT_EQ(p.fields[0].unit_exponent, -8);
  EXPECT_EQ(p.fields[0].usage_at(0), usage(0x20, 0x544));
  EXPECT_EQ(p.fields[0].usage_at(1), usage(0x20, 0x544));  // last usage repeats
  EXPECT_EQ(p.fields[1].bit_offset, 16u);
  EXPECT_EQ(p.fields[1].unit_exponent, 0);  // restored by Pop
  EXPECT_EQ(p.fields[1].usages,
            (std::vector<uint32_t>{usage(0x20, 0x10), usage(0x20, 0x11), usage(0x20, 0x12)}));
  EXPECT_TRUE(p.fields[2].is_constant());
  EXPECT_EQ(p.report_bytes(ReportKind::kInput, 0), 4u);
}

TEST(HidDescriptor, UnitExponentEncodings) {
  EXPECT_EQ(decode_unit_exponent(0x0D, 1), -3);  // nibble
  EXPECT_EQ(decode_unit_exponent(0x08, 1), -8);
  EXPECT_EQ(decode_unit_exponent(0x07, 1), 7);
  EXPECT_EQ(decode_unit_exponent(0xF8, 1), -8);  // signed byte
  EXPECT_EQ(decode_unit_exponent(0xFFFD, 2), -3);
}

TEST(HidDescriptor, Errors) {
  ParsedDescriptor p;
  EXPECT_EQ(parse_hid_descriptor(std::vector<uint8_t>{0x26, 0xFF}, p).error,
            DescriptorError::kTruncatedItem);
  EXPECT_EQ(parse_hid_descriptor(std::vector<uint8_t>{0xB4}, p).error,
            DescriptorError::kPopUnderflow);
  EXPECT_EQ(parse_hid_descriptor(std::vector<uint8_t>{0xC0}, p).error,
            DescriptorError::kCollectionDepth);
  EXPECT_EQ(parse_hid_descriptor(std::vector<uint8_t>{0x85, 0x00}, p).error,
            DescriptorError::kBadReportId);
  EXPECT_EQ(parse_hid_descriptor(std::vector<uint8_t>{0xFE, 0x05, 0x00, 0x01}, p).error,
            DescriptorError::kTruncatedItem);
  std::vector<uint8_t> deep(40, 0xA4);
  EXPECT_EQ(parse_hid_descriptor(deep, p).error, DescriptorError::kPushOverflow);
  std::vector<uint8_t> huge = {0x19, 0x00, 0x2A, 0xFF, 0xFF, 0x81, 0x00};
  EXPECT_EQ(parse_hid_descriptor(huge, p).error, DescriptorError::kTooManyUsages);
}

TEST(HidDescriptor, NotATracker) {
  const std::vector<uint8_t> mouse = {0x05, 0x01, 0x09, 0x02, 0xA1, 0x01, 0x75,
                                      0x08, 0x95, 0x03, 0x81, 0x06, 0xC0};
  ParsedDescriptor p;
  ASSERT_TRUE(parse_hid_descriptor(mouse, p).ok());
  TrackerLayout l;
  const char* why = nullptr;
  EXPECT_FALSE(recognize_head_tracker(p, l, &why));
  EXPECT_NE(std::string(why).find("0xE1"), std::string::npos);
}

TEST(SensorDescription, Versions) {
  SensorDescription d;
  const std::string v1 = "#AndroidHeadTracker#1.0";
  ASSERT_TRUE(parse_sensor_description({(const uint8_t*)v1.data(), v1.size()}, d));
  EXPECT_EQ(d.major, 1);
  const std::string v2 = "#AndroidHeadTracker#2.0#3";
  ASSERT_TRUE(parse_sensor_description({(const uint8_t*)v2.data(), v2.size()}, d));
  EXPECT_EQ(d.major, 2);
  EXPECT_EQ(d.transports, 3);
  const std::string v3 = "#AndroidHeadTracker#3.0";
  EXPECT_FALSE(parse_sensor_description({(const uint8_t*)v3.data(), v3.size()}, d));
  const std::string other = "#SomethingElse#1.0";
  EXPECT_FALSE(parse_sensor_description({(const uint8_t*)other.data(), other.size()}, d));
}

// Test vectors of docs/headtracker.md.
TEST(ReportDecoder, RotationVectors) {
  const TrackerLayout l = layout_of(testing::v1_descriptor());
  EXPECT_NEAR(scale_value(l.rotation[0], 16384), 1.570844, 1e-6);
  EXPECT_NEAR(scale_value(l.rotation[0], 32767), 3.14159265, 1e-8);
  EXPECT_NEAR(scale_value(l.rotation[0], 0), 5e-9, 1e-8);
  EXPECT_NEAR(scale_value(l.angular_velocity[0], 32767), 32.0, 1e-9);
  EXPECT_NEAR(scale_value(l.angular_velocity[0], 1024), 1.00003, 1e-5);
}

TEST(ReportDecoder, SpecInputReport) {
  ReportDecoder dec(layout_of(testing::v1_descriptor()));
  const std::vector<uint8_t> r = {0x01, 0x00, 0x00, 0x00, 0x00, 0x55, 0x15,
                                  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03};
  TrackerSample s;
  ASSERT_EQ(dec.decode(r, s), DecodeStatus::kOk);
  EXPECT_NEAR(s.rotation[2], 0.5236, 1e-4);  // 30 degrees
  EXPECT_NEAR(s.rotation[2] * 180 / M_PI, 30.0, 0.01);
  EXPECT_TRUE(s.has_counter);
  EXPECT_EQ(s.counter, 3u);
  EXPECT_TRUE(s.has_angular_velocity);
}

TEST(ReportDecoder, RejectsAndCounts) {
  ReportDecoder dec(layout_of(testing::v1_descriptor()));
  TrackerSample s;
  s.rotation[0] = 42;
  auto bad = report_with(0, 0, 0);
  bad[1] = 0x00;
  bad[2] = 0x80;  // raw -32768: outside -32767..32767
  EXPECT_EQ(dec.decode(bad, s), DecodeStatus::kOutOfRange);
  EXPECT_EQ(s.rotation[0], 42);  // untouched
  auto bad_gyro = report_with(0, 0, 0, 0, int16_t(-32768), 0);
  EXPECT_EQ(dec.decode(bad_gyro, s), DecodeStatus::kOutOfRange);
  const std::vector<uint8_t> other = {0x02, 1, 2, 3};
  EXPECT_EQ(dec.decode(other, s), DecodeStatus::kOtherReport);
  const std::vector<uint8_t> short_report = {0x01, 0, 0, 0};
  EXPECT_EQ(dec.decode(short_report, s), DecodeStatus::kTooShort);
  EXPECT_EQ(dec.decode(report_with(100, -100, 32767), s), DecodeStatus::kOk);
  EXPECT_EQ(dec.counters().out_of_range, 2u);
  EXPECT_EQ(dec.counters().other_report, 1u);
  EXPECT_EQ(dec.counters().too_short, 1u);
  EXPECT_EQ(dec.counters().ok, 1u);
}

TEST(ReportDecoder, ExtractBitsMatchesPerBitReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint8_t buf[24];
    for (auto& b : buf) b = uint8_t(rng());
    const size_t size = rng() % 25;
    const uint32_t bits = 1 + rng() % 32;
    const uint32_t offset = rng() % 160;
    ASSERT_EQ(extract_bits(buf, size, offset, bits),
              reference::extract_bits_per_bit(buf, size, offset, bits))
        << "size " << size << " offset " << offset << " bits " << bits;
  }
}

TEST(ReportDecoder, BitIdenticalToReferenceOnRandomLayouts) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const TrackerLayout l = reference::random_layout(rng);
    ReportDecoder dec(l);
    std::vector<uint8_t> report(l.input_report_bytes);
    for (auto& b : report) b = uint8_t(rng());
    report[0] = l.input_report_id;
    TrackerSample a, b;
    const DecodeStatus sa = dec.decode(report, a);
    const DecodeStatus sb = reference::decode(l, report, b);
    ASSERT_EQ(sa, sb);
    if (sa == DecodeStatus::kOk) {
      ASSERT_EQ(std::memcmp(a.rotation, b.rotation, sizeof(a.rotation)), 0);
      ASSERT_EQ(std::memcmp(a.angular_velocity, b.angular_velocity, sizeof(a.rotation)), 0);
      ASSERT_EQ(a.counter, b.counter);
    }
  }
}

TEST(FeatureReports, IntervalVectors) {
  const TrackerLayout l = layout_of(testing::v1_descriptor());
  EXPECT_EQ(interval_to_raw(l.interval, 0.010), 0);
  EXPECT_EQ(interval_to_raw(l.interval, 0.020), 7);
  EXPECT_EQ(interval_to_raw(l.interval, 0.040), 21);
  EXPECT_EQ(interval_to_raw(l.interval, 0.100), 63);
  EXPECT_EQ(interval_to_raw(l.interval, 5.0), 63);   // clamped
  EXPECT_EQ(interval_to_raw(l.interval, 0.001), 0);  // clamped
  const std::pair<double, uint8_t> cases[] = {
      {0.010, 0x03}, {0.020, 0x1F}, {0.040, 0x57}, {0.100, 0xFF}};
  for (const auto& [seconds, byte] : cases) {
    std::vector<uint8_t> report = {0x01, 0x00};
    ASSERT_TRUE(apply_enable(l, report, seconds));
    EXPECT_EQ(report, (std::vector<uint8_t>{0x01, byte})) << seconds;
  }
}

TEST(FeatureReports, DisableKeepsInterval) {
  const TrackerLayout l = layout_of(testing::v1_descriptor());
  std::vector<uint8_t> report = {0x01, 0x57};
  ASSERT_TRUE(apply_disable(l, report));
  EXPECT_EQ(report, (std::vector<uint8_t>{0x01, 0x54}));  // no events, power off, 40 ms kept
  std::vector<uint8_t> other = {0x02, 0x57};
  EXPECT_FALSE(apply_disable(l, other));  // report 2 holds no controls
}

TEST(FeatureReports, V2TransportReadModifyWrite) {
  const TrackerLayout l = layout_of(testing::v2_descriptor());
  std::vector<uint8_t> report = {0x01, 0x00, 0xFF};  // ISO selected, stray bits set
  ASSERT_TRUE(apply_enable(l, report, 0.040));
  EXPECT_EQ(report, (std::vector<uint8_t>{0x01, 0x57, 0xFE}));  // ACL = index 0, rest kept
}

}  // namespace
}  // namespace syncd::headtrack
