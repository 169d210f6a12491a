// One probe at a time for the relay sender (docs/wan.md, "Caps" and "Probes the receiver
// measures"): padding (RTX copies of the newest media packets, under their own payload type)
// brings what is sent up to the probe's rate for a while. This is its state and its verdict; the
// sender asks the rate controller for probes, sends the padding and acts on the verdict.
//
//  - Past a policer's ceiling (kCeiling), for kCeilingNs: its media packets are the test. A NACK
//    for one sent after the padding began ends it at once as lost; none by kCeilingNs + RTT +
//    kGraceNs, and it reached kReached of its rate, it was carried. kCeilingNs outlasts the
//    32-KB bucket of the qualification's policer at a 25 % excess (100 ms), with room for a
//    deeper one.
//  - For a faster path (kFasterPath), for kFasterPathNs: the receiver measures it, and its REMB
//    says what came of it. Short: at twice the target into a cap that holds, its excess queues
//    there (18 ms at 16 into 10 Mbit/s), and the receiver's fit needs only ~40 packets.
//
// The rate controller's loss samples that span a probe are not its: their rate is padding's and
// their loss the probe's own. So is one that reaches back to packets sent before the probe
// ended (a NACK ends a probe while its last round trip of packets is still out).
//
// Pure: times are passed in. Thread: the relay thread (one per sender).
#pragma once

#include <cstdint>

namespace syncd::relay {

class PaddingProbe {
 public:
  enum class Kind : uint8_t { kCeiling, kFasterPath };
  enum class Step : uint8_t {
    kNone,
    kPaddingDone,  // a ceiling probe's padding stopped: it waits for NACKs
    kCarried,      // a ceiling probe's verdict
    kLost,
    kDone,  // a probe for a faster path ended (the REMB says the rest)
  };
  static constexpr uint64_t kCeilingNs = 400'000'000;
  static constexpr uint64_t kFasterPathNs = 30'000'000;

  // A probe at bps begins at now_ns, with bytes_sent gone out before it.
  void start(Kind kind, uint64_t bps, uint64_t now_ns, uint64_t bytes_sent);
  bool running() const { return bps_ != 0; }
  // Padding goes out (the probe's first kCeilingNs or kFasterPathNs).
  bool padding() const { return padding_; }
  Kind kind() const { return kind_; }
  uint64_t bps() const { return bps_; }
  uint64_t started_ns() const { return started_ns_; }

  // A media packet left.
  void on_media_sent(uint16_t sequence);
  // A NACK for `sequence`: whether it is a ceiling probe's loss (then end it, kLost).
  bool lost(uint16_t sequence) const;
  // What is due at now_ns: the padding stops once the probe's length has passed (a ceiling probe
  // notes whether it reached its rate, from bytes_sent), and a ceiling probe's verdict comes a
  // round trip and kGraceNs later. kNone when nothing is.
  Step advance(uint64_t now_ns, uint64_t bytes_sent, uint64_t rtt_ns);
  // The probe ended (on its verdict, or kDone); newest_media: the newest media packet sent.
  void end(uint64_t now_ns, uint16_t newest_media);

  // Whether a loss sample whose span began at span_start_ns with packet span_start_sequence is
  // a probe's (above).
  bool holds_loss_of(uint64_t span_start_ns, uint32_t span_start_sequence, uint64_t now_ns) const;
  // When advance() has work next (UINT64_MAX: none).
  uint64_t next_wakeup_ns() const;

 private:
  static constexpr uint64_t kGraceNs = 50'000'000;
  static constexpr double kReached = 0.9;
  // How long after a probe's end a loss sample reaching back before it is still its.
  static constexpr uint64_t kTailNs = 2'000'000'000;
  uint64_t length_ns() const { return kind_ == Kind::kCeiling ? kCeilingNs : kFasterPathNs; }

  Kind kind_ = Kind::kCeiling;
  uint64_t bps_ = 0;  // 0: none running
  bool padding_ = false;
  uint64_t started_ns_ = 0;
  uint64_t start_bytes_ = 0;
  bool reached_ = false;  // it sent at kReached x its rate or more
  bool have_first_ = false;
  uint16_t first_sequence_ = 0;  // the first media packet sent during the padding
  uint64_t ended_ns_ = 0;
  uint16_t last_sequence_ = 0;  // the newest media packet sent by its end
};

}  // namespace syncd::relay
