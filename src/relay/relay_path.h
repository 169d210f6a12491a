// What a relay session's two media ends stand on (docs/wan.md "The path"): RelaySession is the
// DTLS/peer association (keys, SRTP, the peer's address, demultiplexing), and gives its sender
// (RelaySender) or receiver (RelayReceiver) this path to send protected media and feedback on,
// and to talk to the main loop. It also hands them each authenticated RTCP compound, parsed once.
//
// Thread: the relay thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "relay/relay_wire.h"
#include "rtp/rtcp.h"
#include "transport/packet_store.h"
#include "transport/transport_thread.h"

namespace syncd::relay {

// Payload types (docs/wan.md, "Wire decisions"); audio's is relay_audio.h's.
inline constexpr uint8_t kMediaPayloadType = 96;
inline constexpr uint8_t kRtxPayloadType = 97;
// A probe's padding: RTX copies of recent media packets under their own payload type, so that
// the receiver knows which packets make up a probe (congestion/probe_meter.h) and does not take
// them for repairs.
inline constexpr uint8_t kProbePaddingPayloadType = 98;
inline constexpr uint8_t kFecPayloadType = 115;
inline constexpr uint32_t kVideoClockHz = 90'000;
// The SRTP trailer: a 16-byte GCM tag and the 4-byte MKI (src/secure).
inline constexpr size_t kSrtpTrailerBytes = 20;
// The largest RTCP compound either end writes, and its buffer's room (trailer and slack).
inline constexpr size_t kRtcpBytes = 1200;
inline constexpr size_t kRtcpBufferBytes = kRtcpBytes + kSrtpTrailerBytes + 16;
// A buffer an RTP packet is protected in: any stored packet, its trailer and slack.
inline constexpr size_t kRtpBufferBytes =
    transport::PacketStore::kPacketBytes + kSrtpTrailerBytes + 16;
// Repair redundancy on a lossy path (docs/wan.md "Repair on a lossy path"): with the path's loss
// at kRedundantRepairLoss or more, a retransmission goes twice (the second copy
// kSecondCopyDelayNs later, out of the first's loss burst), and so does a receiver's NACK: a
// repair lost once costs a whole round trip, which at 80-100 ms stalls the stream past a
// second's quota of frames.
inline constexpr double kRedundantRepairLoss = 0.02;
inline constexpr uint64_t kSecondCopyDelayNs = 8'000'000;

class RelayPath {
 public:
  virtual ~RelayPath() = default;
  // Keys are installed and the peer's address is known.
  virtual bool connected() const = 0;
  // Protects the plain RTP packet in buffer[0, size) in place under the send epoch (buffer has
  // room for the trailer) and sends it to the peer. Returns the datagram's size, 0 when it did
  // not go.
  virtual size_t send_rtp(std::span<uint8_t> buffer, size_t size) = 0;
  // Protects the plain compound in buffer[0, size) in place (buffer has room for the trailer)
  // and sends it to the peer.
  virtual void send_rtcp(std::span<uint8_t> buffer, size_t size) = 0;
  // False when the channel to the main loop is full.
  virtual bool send_to_main(const transport::FromTransport& message) = 0;
};

// One authenticated RTCP compound, parsed (the reports about `media_ssrc`, the sender's video).
struct RelayRtcp final : rtp::RtcpSink {
  std::optional<rtp::SenderReport> sr;
  std::optional<rtp::ReportBlock> block;
  uint32_t media_ssrc = 0;
  std::vector<uint16_t>* nacks = nullptr;  // room for rtp::kNackEventCapacity
  size_t nack_count = 0;
  std::optional<uint64_t> remb;
  bool bye = false;
  bool pli = false;
  std::optional<StreamDescription> description;
  std::optional<AudioDescription> audio_description;

  void on_sender_report(const rtp::SenderReport& r) override { sr = r; }
  void on_receiver_report(const rtp::ReceiverReport& r) override {
    for (const rtp::ReportBlock& b : r.blocks)
      if (b.source_ssrc == media_ssrc) block = b;
  }
  void on_nack(const rtp::Nack& n) override {
    for (uint16_t s : n.lost)
      if (nack_count < nacks->size()) (*nacks)[nack_count++] = s;
  }
  void on_remb(const rtp::Remb& r) override { remb = r.bitrate_bps; }
  void on_goodbye(const rtp::Goodbye&) override { bye = true; }
  void on_pli(uint32_t, uint32_t) override { pli = true; }
  void on_application(std::span<const uint8_t> packet) override {
    StreamDescription d;
    if (parse_stream_description(packet, d) == DescriptionError::kNone) description = d;
    AudioDescription a;
    if (parse_audio_description(packet, a) == AudioDescriptionError::kNone) audio_description = a;
  }
};

}  // namespace syncd::relay
