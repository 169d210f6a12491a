// The sending half of one RTP stream, as the WAN relay's sender and the WebRTC egress both keep
// it (docs/wan.md "Retransmission", docs/whep.md): its media clock, its sequence numbers, the
// history of sent packets that NACKs are served from, the counts a sender report carries, and the
// tail-loss probe's timing. What is sent, how it is protected and paced is the owner's; this is
// the bookkeeping both would otherwise write twice.
//
// Packets live in the owner's transport::PacketStore; the history holds one reference to each
// packet it keeps (PacketStore::hold) and lets go when a newer sequence number lands on its
// entry, so a packet also in a pacer's queue stays until both are done with it.
//
// Pure: no sockets or clocks (times come in). The transport thread only (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "rtp/rtcp.h"
#include "transport/packet_store.h"

namespace syncd::rtp_media {

// An RTP stream's media clock (RFC 3550 5.1): `rate_hz` ticks a second since `epoch_ns` on the
// transport thread's monotonic clock, from a random offset.
class RtpClock {
 public:
  RtpClock(uint32_t rate_hz, uint32_t offset, uint64_t epoch_ns = 0)
      : rate_hz_(rate_hz), offset_(offset), epoch_ns_(epoch_ns) {}
  void set_epoch(uint64_t epoch_ns) { epoch_ns_ = epoch_ns; }
  uint32_t at(uint64_t ns) const {
    const uint64_t elapsed = ns > epoch_ns_ ? ns - epoch_ns_ : 0;
    // Whole seconds and the rest apart: elapsed * rate would overflow 64 bits after ~6 years at
    // 90 kHz, and the split keeps the tick exact.
    return offset_ + uint32_t((elapsed / 1'000'000'000) * rate_hz_ +
                              (elapsed % 1'000'000'000) * rate_hz_ / 1'000'000'000);
  }

 private:
  uint32_t rate_hz_;
  uint32_t offset_;
  uint64_t epoch_ns_;
};

struct SendStreamConfig {
  uint32_t ssrc = 0;
  uint16_t first_sequence = 0;  // random (RFC 3550 5.1)
  uint32_t clock_rate = 90'000;
  uint32_t clock_offset = 0;  // random (RFC 3550 5.1)
  // Packets kept for retransmission, by sequence number: about a second at the stream's rate
  // is several round trips on any path worth repairing over.
  uint32_t history = 2048;
};

// Whether a NACKed packet goes again.
enum class NackAnswer : uint8_t {
  kResend,
  kUnavailable,  // gone from the history (or never sent)
  kJustResent,   // resent less than the hold time ago: a repeated NACK, or one crossing ours
};

class SendStream {
 public:
  SendStream(SendStreamConfig config, transport::PacketStore& store);
  ~SendStream();  // lets go of the packets the history holds
  SendStream(const SendStream&) = delete;
  SendStream& operator=(const SendStream&) = delete;

  uint32_t ssrc() const { return config_.ssrc; }
  // The RTP timestamp of `ns` (the transport thread's monotonic clock).
  uint32_t rtp_time(uint64_t ns) const { return clock_.at(ns); }
  // Restarts the media clock's elapsed time at epoch_ns (the offset stays).
  void set_clock_epoch(uint64_t epoch_ns) { clock_.set_epoch(epoch_ns); }
  // The next media packet's sequence number, taken.
  uint16_t take_sequence() { return next_sequence_++; }

  // ---- history ----
  // The packet of `sequence` is in store buffer `handle`: the history holds it (one reference)
  // until a later sequence number lands on its entry, and forgets when it was resent.
  void remember(uint16_t sequence, uint32_t handle);
  bool holds(uint16_t sequence) const;
  // The stored packet of `sequence`; holds(sequence) first.
  std::span<uint8_t> packet(uint16_t sequence);
  // A receiver asked for `sequence` again: resend it, unless it is gone or was resent less than
  // hold_ns ago.
  NackAnswer answer_nack(uint16_t sequence, uint64_t now_ns, uint64_t hold_ns) const;
  void mark_resent(uint16_t sequence, uint64_t now_ns);

  // ---- sender report ----
  // A media packet went out with this many payload octets (RFC 3550 6.4.1's octet count).
  void count_sent(size_t payload_octets) {
    ++packets_sent_;
    octets_sent_ += uint32_t(payload_octets);
  }
  uint32_t packets_sent() const { return packets_sent_; }
  // The sender info of a report made at now_ns, whose wall clock then was wall_ntp_ns
  // (nanoseconds since 1900: transport::wall_clock_ntp_ns()).
  rtp::SenderInfo sender_info(uint64_t now_ns, uint64_t wall_ntp_ns) const;

  // ---- tail-loss probe ----
  // A frame's last packet, if lost with nothing sent after it, shows the receiver no gap to
  // NACK; once the stream has paused for two frame intervals (smoothed, 10-500 ms; 50 ms before
  // the rate is known) after a frame's last packet, that packet should go once more.
  // A frame was handed to the sender at now_ns (for the interval).
  void on_frame(uint64_t now_ns);
  // Media packet `sequence` went out; `last_of_frame` when it ends its frame (RTP marker).
  void on_media_sent(uint16_t sequence, bool last_of_frame, uint64_t now_ns);
  static constexpr uint64_t kNoProbe = UINT64_MAX;
  uint64_t tail_probe_due_ns() const { return tail_probe_due_ns_; }
  // The probe is due: the sequence to send again, if the history still holds it. Disarms it.
  std::optional<uint16_t> take_tail_probe();

 private:
  SendStreamConfig config_;
  transport::PacketStore& store_;
  RtpClock clock_;
  uint16_t next_sequence_;
  std::unique_ptr<uint32_t[]> handles_;    // per entry: the store buffer, or kNone
  std::unique_ptr<uint16_t[]> sequences_;  // which sequence each entry holds
  std::unique_ptr<uint64_t[]> resent_ns_;  // when each entry was last resent (0: never)
  uint32_t packets_sent_ = 0, octets_sent_ = 0;
  uint64_t tail_probe_due_ns_ = kNoProbe;
  uint16_t tail_sequence_ = 0;
  uint64_t last_frame_ns_ = 0;
  uint64_t frame_interval_ns_ = 0;
};

}  // namespace syncd::rtp_media
