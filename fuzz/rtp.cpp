// libFuzzer target for the RTP side of syncd::rtp: packet parse, one-byte extensions, RTX, and
// the H.264 depacketizer fed packet sequences; then the packetizer on the same bytes read as an
// Annex B access unit, with a byte-exact round trip through the depacketizer.
//
// Input: byte 0 picks the packetizer's payload budget; the rest is read twice: as records
// [16-bit length | datagram] pushed through parse and depacketize, and whole as an access unit.
// Every datagram is copied into its own exact-size allocation so a read past it trips ASan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "rtp/h264_depacketizer.h"
#include "rtp/h264_packetizer.h"
#include "rtp/rtp_packet.h"
#include "rtp/rtx.h"

namespace {

using namespace syncd::rtp;

constexpr size_t kAccessUnitCapacity = 64 * 1024;

bool inside(std::span<const uint8_t> part, std::span<const uint8_t> whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

void check_packet(const std::vector<uint8_t>& datagram, const RtpPacketView& view) {
  FUZZ_CHECK(view.header_bytes >= kRtpFixedHeaderBytes);
  FUZZ_CHECK(view.header_bytes + view.payload.size() + view.padding_bytes == datagram.size());
  FUZZ_CHECK(inside(view.payload, datagram));
  FUZZ_CHECK(inside(view.extension_data, datagram));
  for (size_t i = 0; i < view.csrc_count; ++i) (void)view.csrc(i);

  OneByteExtensionReader reader(view);
  uint8_t id = 0;
  std::span<const uint8_t> data;
  size_t elements = 0;
  while (reader.next(id, data)) {
    FUZZ_CHECK(id >= 1 && id <= 14);
    FUZZ_CHECK(data.size() >= 1 && data.size() <= 16);
    FUZZ_CHECK(inside(data, view.extension_data));
    FUZZ_CHECK(++elements <= view.extension_data.size());
  }
  uint32_t abs = 0;
  if (read_abs_send_time(view, abs)) FUZZ_CHECK(abs <= kAbsSendTimeMask);

  // RTX there and back: the restored packet is the original without its padding.
  std::vector<uint8_t> rtx(rtx_packet_size(view));
  FUZZ_CHECK(write_rtx(view, {97, 0x5EED, 42}, rtx) == rtx.size());
  RtpPacketView rtx_view;
  FUZZ_CHECK(parse_rtp(rtx, rtx_view) == RtpParseError::kOk);
  RtxContent content;
  FUZZ_CHECK(read_rtx(rtx_view, content) == RtxError::kOk);
  FUZZ_CHECK(content.original_sequence == view.sequence);
  std::vector<uint8_t> restored(view.header_bytes + view.payload.size());
  size_t restored_size = 0;
  FUZZ_CHECK(restore_original(rtx_view, view.payload_type, view.ssrc, restored, &restored_size) ==
             RtxError::kOk);
  FUZZ_CHECK(restored_size == restored.size());
  FUZZ_CHECK(std::memcmp(restored.data() + 1, datagram.data() + 1, view.header_bytes - 1) == 0);
  FUZZ_CHECK((restored[0] | 0x20) == (datagram[0] | 0x20));
  if (!view.payload.empty()) {
    FUZZ_CHECK(std::memcmp(restored.data() + view.header_bytes, view.payload.data(),
                           view.payload.size()) == 0);
  }
}

void check_access_unit(std::span<const uint8_t> au) {
  // What the depacketizer writes is Annex B with 4-byte start codes and no empty NAL units.
  if (au.empty()) return;
  FUZZ_CHECK(au.size() >= 5);
  FUZZ_CHECK(au[0] == 0 && au[1] == 0 && au[2] == 0 && au[3] == 1);
}

void run_packets(const uint8_t* data, size_t size) {
  std::vector<uint8_t> out(kAccessUnitCapacity);
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  RtpParseCounters counters;
  size_t pos = 0;
  while (size - pos >= 2) {
    const size_t length = std::min<size_t>(size_t{data[pos]} << 8 | data[pos + 1], size - pos - 2);
    pos += 2;
    std::vector<uint8_t> datagram(data + pos, data + pos + length);
    pos += length;
    RtpPacketView view;
    const RtpParseError error = parse_rtp(datagram, view);
    counters.count(error);
    if (error != RtpParseError::kOk) continue;
    check_packet(datagram, view);
    const DepacketizeError pushed = depacketizer.push(view);
    FUZZ_CHECK(depacketizer.access_unit().size() <= out.size());
    if (pushed != DepacketizeError::kOk) {
      FUZZ_CHECK(depacketizer.failed());
      depacketizer.begin(out);
    } else if (view.marker) {
      if (depacketizer.finish() == DepacketizeError::kOk) {
        check_access_unit(depacketizer.access_unit());
      }
      depacketizer.begin(out);
    }
  }
  if (depacketizer.finish() == DepacketizeError::kOk) check_access_unit(depacketizer.access_unit());
}

void run_access_unit(uint8_t selector, const uint8_t* data, size_t size) {
  const size_t max_payload = kMinMaxPayloadBytes + selector * 6;  // 3 .. 1533
  std::vector<uint8_t> au(data, data + size);
  H264Packetizer packetizer(PacketizerConfig{max_payload});
  if (packetizer.begin(au) != PacketizeError::kOk) return;

  // The canonical form the depacketizer must give back.
  std::vector<uint8_t> expected;
  split_annex_b(au, [&](std::span<const uint8_t> nal) {
    expected.insert(expected.end(), {0, 0, 0, 1});
    expected.insert(expected.end(), nal.begin(), nal.end());
  });

  std::vector<uint8_t> out(expected.size());
  H264Depacketizer depacketizer;
  depacketizer.begin(out);
  RtpHeader header;
  header.payload_type = 96;
  header.timestamp = 0xFFFFFFFF;
  header.sequence = 0xFFF0;
  size_t packets = 0;
  while (packetizer.has_next()) {
    std::vector<uint8_t> buffer(rtp_header_size(header) + packetizer.max_payload_bytes());
    const size_t n = packetizer.write_next(header, buffer);
    FUZZ_CHECK(n > kRtpFixedHeaderBytes);
    buffer.resize(n);
    RtpPacketView view;
    FUZZ_CHECK(parse_rtp(buffer, view) == RtpParseError::kOk);
    FUZZ_CHECK(view.payload.size() <= max_payload);
    FUZZ_CHECK(view.marker == !packetizer.has_next());
    FUZZ_CHECK(depacketizer.push(view) == DepacketizeError::kOk);
    ++header.sequence;
    ++packets;
  }
  FUZZ_CHECK(packets == packetizer.packet_count());
  FUZZ_CHECK(depacketizer.finish() == DepacketizeError::kOk);
  FUZZ_CHECK(depacketizer.access_unit().size() == expected.size());
  FUZZ_CHECK(std::memcmp(depacketizer.access_unit().data(), expected.data(), expected.size()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  run_packets(data + 1, size - 1);
  run_access_unit(data[0], data + 1, size - 1);
  return 0;
}
