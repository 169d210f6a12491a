// What the relay sender put on the wire, for its rate control (docs/wan.md, "Caps"):
//  - the bytes sent, and of them the access units' and the probes' padding, in 100-ms samples
//    over the last second: the send rate, and the encoder's share of it;
//  - each media packet's wire time and the bytes sent up to it, by sequence number: the rate
//    over exactly the packets a receiver report's loss covers;
//  - the loss samples for the rate controller, from the reports' running counts.
//
// A policer's mark is its throughput, what was sent x (1 - loss). With the rate taken over the
// last 100-ms samples up to a report's arrival, the rate and the loss described different
// packets (shifted by the one-way delay and the report's own wait), and two throughputs of one
// policer came out 10-30 % apart.
//
// Pure: times are passed in; no allocation after construction. Thread: the relay thread (one
// per sender).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace syncd::relay {

// A receiver report's loss over a span long enough to say something, and what was sent over it.
struct LossSample {
  double fraction = 0;    // lost / expected over the span
  uint64_t sent_bps = 0;  // 0: not known
  uint64_t from_ns = 0;   // when the span began (the report before)
};

class SentRecord {
 public:
  static constexpr uint64_t kSampleNs = 100'000'000;
  // The loss sample's span: at least this long and this many packets. The receiver reports early
  // when it sees a loss, so its RRs come a few dozen packets apart and each one's fraction lost
  // is 0 or a spike: under a policer dropping most of what was sent, the first RR past the
  // estimator's interval said 0 as often as not, and the rate climbed 8 % into the cap again
  // (measured: the target 10-27 Mbit/s against 10).
  static constexpr uint64_t kLossSampleNs = 300'000'000;
  static constexpr uint32_t kLossSamplePackets = 50;

  // Datagram bytes sent (every packet: media, FEC, RTX, padding).
  void on_sent(uint64_t bytes) { bytes_ += bytes; }
  // An access unit's bytes, taken to be sent.
  void on_access_unit(uint64_t bytes) { media_bytes_ += bytes; }
  // A probe's padding packet's bytes, queued.
  void on_padding(uint64_t bytes) { padding_bytes_ += bytes; }
  // A media packet left, after its on_sent.
  void on_media_sent(uint16_t sequence, uint64_t now_ns) {
    marks_[sequence % kMarks] = {now_ns, bytes_, sequence, true};
  }
  // Takes a rate sample when one is due (every kSampleNs).
  void sample(uint64_t now_ns);

  uint64_t bytes() const { return bytes_; }
  // What went out over the last `samples` samples, bit/s (0 before two samples).
  uint64_t sent_bps(size_t samples) const;
  // What went out between the wire times of media packets `first` and `last`, bit/s: 0 when
  // either is no longer known or they are under 100 ms apart.
  uint64_t sent_bps_between(uint16_t first, uint16_t last) const;
  // The share of what went out over the last second that was access units, padding left out,
  // within [kMinMediaShare, kMaxMediaShare]; 0 while too little went out to say.
  double media_share() const;

  // A receiver report's running counts: the loss sample they close, if its span is long enough.
  // restart: the span so far must not count (it holds a probe's loss); the next starts here.
  std::optional<LossSample> loss_sample(uint32_t extended_highest_sequence, int32_t cumulative_lost,
                                        uint64_t now_ns, bool restart);
  // Where the current loss sample's span began.
  uint64_t loss_span_start_ns() const { return span_start_ns_; }
  uint32_t loss_span_start_sequence() const { return span_sequence_; }

 private:
  // The encoder's share stays within these: below, the sender is repairing more than it sends
  // (the next IDR is the better repair); above, nothing is left for a loss's first repairs.
  static constexpr double kMinMediaShare = 0.5;
  static constexpr double kMaxMediaShare = 0.95;
  static constexpr uint64_t kMinShareBytes = 20'000;  // a second of less says nothing
  static constexpr size_t kSamples = 11;              // a second of them, and the one before
  struct Sample {
    uint64_t at_ns = 0;
    uint64_t bytes = 0;
    uint64_t media_bytes = 0;
    uint64_t padding_bytes = 0;
  };
  // The oldest of the last `samples` (at most what is held).
  size_t samples_back(size_t samples) const;

  std::array<Sample, kSamples> samples_{};
  size_t count_ = 0, head_ = 0;
  uint64_t bytes_ = 0, media_bytes_ = 0, padding_bytes_ = 0, next_sample_ns_ = 0;

  struct Mark {
    uint64_t at_ns = 0;
    uint64_t bytes = 0;  // bytes_ once it was sent
    uint16_t sequence = 0;
    bool valid = false;
  };
  static constexpr size_t kMarks = 4096;  // 1.5 s at 30 Mbit/s
  static constexpr uint64_t kMinMarkSpanNs = 100'000'000;
  std::array<Mark, kMarks> marks_{};

  bool span_open_ = false;
  uint32_t span_sequence_ = 0;
  int32_t span_lost_ = 0;
  uint64_t span_start_ns_ = 0;
};

}  // namespace syncd::relay
