// libFuzzer target for the congestion module: the receiver's delay-based estimator (with the
// probes it measures), the sender's rate controller (with the probes it asks for) and the pacer,
// driven by operations decoded from the input.
//
// Input: a sequence of operations, each an opcode byte and its operands (little-endian); time
// only moves forward, by an amount the input chooses (arrival times may also step back, which the
// estimator must refuse). Invariants checked after every operation: the estimates and the target
// stay within their bounds, the detector's values are finite, REMB timing is consistent, the
// pacer never holds more than its capacity, accounts for every byte, never sends a packet older
// than its time bound, and next_event_ns() never says "later" when pop_due() has work now.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "congestion/delay_based_estimator.h"
#include "congestion/loss_based_estimator.h"
#include "congestion/pacer.h"
#include "fuzz_check.h"

namespace {

using namespace syncd::congestion;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint64_t take(size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) {
      value |= static_cast<uint64_t>(pos_ < size_ ? data_[pos_] : 0) << (8 * i);
      ++pos_;
    }
    return value;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr uint64_t kMinBps = 300'000;
constexpr uint64_t kMaxBps = 30'000'000;
constexpr uint32_t kPacerCapacity = 64;
constexpr uint64_t kMaxQueueDelayNs = 150'000'000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  DelayEstimatorConfig receiver_config;
  receiver_config.rate.min_bps = kMinBps;
  receiver_config.rate.max_bps = kMaxBps;
  receiver_config.rate.start_bps = 1'000'000 * (1 + in.take(1) % 40);  // may start above max
  DelayBasedEstimator receiver(receiver_config);
  SendRateConfig sender_config;
  sender_config.min_bps = kMinBps;
  sender_config.max_bps = kMaxBps;
  sender_config.delay_probes = true;
  SendRateController sender(sender_config);
  PacerConfig pacer_config;
  pacer_config.capacity_packets = kPacerCapacity;
  pacer_config.max_queue_delay_ns = kMaxQueueDelayNs;
  pacer_config.pacing_factor = 0.5 + static_cast<double>(in.take(1)) / 32;  // < 1 is raised to 1
  pacer_config.burst_ns = in.take(1) * 100'000;
  Pacer pacer(pacer_config);

  uint64_t now = in.take(5);  // any start, up to ~18 minutes of nanoseconds
  uint64_t queued_bytes = 0;
  uint64_t next_id = 0;
  PacedPacket out[8];

  for (int ops = 0; !in.empty() && ops < 4096; ++ops) {
    const uint8_t op = static_cast<uint8_t>(in.take(1));
    const bool padding = (op & 0x40) != 0;  // a probe's
    switch (op % 8) {
      case 0: {  // a packet with abs-send-time
        now += in.take(2) * 1'000;
        const uint32_t abs = static_cast<uint32_t>(in.take(3));
        const uint32_t bytes = static_cast<uint32_t>(in.take(2)) << (op >> 7);
        receiver.on_packet(now, abs, bytes, padding);
        break;
      }
      case 1: {  // a packet with a send time in ns, possibly arriving "before" the last
        const int64_t send = static_cast<int64_t>(now) - static_cast<int64_t>(in.take(3) * 100);
        const uint64_t arrival = (op & 0x80) ? now - std::min<uint64_t>(now, in.take(1)) : now;
        const PacketVerdict verdict =
            receiver.on_packet_send_ns(arrival, send, static_cast<uint32_t>(in.take(2)), padding);
        (void)verdict;
        break;
      }
      case 2: {  // the receiver's REMB timer
        now += in.take(1) * 1'000'000;
        const uint64_t due = receiver.next_remb_ns();
        const auto remb = receiver.take_remb(now);
        if (remb) {
          FUZZ_CHECK(due <= now);
          FUZZ_CHECK(*remb >= kMinBps && *remb <= kMaxBps);
          sender.on_remb(now, *remb);
        }
        break;
      }
      case 3: {  // feedback at the sender
        now += in.take(1) * 1'000'000;
        if (op & 0x80) {
          sender.on_remb(now, in.take(4) * 16);
        } else {
          sender.on_receiver_report(now, static_cast<uint8_t>(in.take(1)), in.take(4) * 1'000);
        }
        pacer.set_target_rate(sender.target_bps());
        break;
      }
      case 4: {  // a packet into the pacer
        const uint32_t bytes = static_cast<uint32_t>(in.take(2)) << (op >> 7);
        const size_t before = pacer.queued_packets();
        if (pacer.enqueue(now, next_id++, bytes) == EnqueueResult::kQueued) {
          queued_bytes += bytes;
          FUZZ_CHECK(pacer.queued_packets() == before + 1);
        } else {
          FUZZ_CHECK(pacer.queued_packets() == before);
        }
        break;
      }
      case 5: {  // the pacer's timer
        now += in.take(2) * 10'000;
        const uint64_t next = pacer.next_event_ns(now);
        const size_t n = pacer.pop_due(now, std::span<PacedPacket>(out, 1 + op % 8));
        FUZZ_CHECK(n <= 1u + op % 8);
        if (next > now) FUZZ_CHECK(n == 0);
        if (pacer.queued_packets() == 0) FUZZ_CHECK(pacer.next_event_ns(now) == Pacer::kNoEvent);
        for (size_t i = 0; i < n; ++i) {
          queued_bytes -= out[i].size_bytes;
          if (out[i].disposition == PacketDisposition::kSend) {
            FUZZ_CHECK(now - out[i].enqueued_ns <= kMaxQueueDelayNs);
          } else {
            FUZZ_CHECK(now - out[i].enqueued_ns > kMaxQueueDelayNs);
          }
        }
        break;
      }
      case 6: {  // the receiver learns an RTT
        receiver.set_rtt(in.take(4) * 1'000);
        break;
      }
      case 7: {  // the sender's probe for a faster path, when one is due
        now += in.take(1) * 10'000'000;
        if (const uint64_t bps = sender.delay_probe_bps(now)) {
          FUZZ_CHECK(bps > sender.target_bps() && bps <= kMaxBps);
          sender.on_delay_probe_sent(now);
          FUZZ_CHECK(sender.delay_probe_bps(now) == 0);
        }
        break;
      }
    }
    const ProbeMeterCounters& probes = receiver.probe_counters();
    FUZZ_CHECK(probes.clusters + probes.too_small <= probes.padding_packets);
    FUZZ_CHECK(receiver.estimate_bps() >= kMinBps && receiver.estimate_bps() <= kMaxBps);
    FUZZ_CHECK(sender.target_bps() >= kMinBps && sender.target_bps() <= kMaxBps);
    FUZZ_CHECK(sender.loss_based_bps() >= kMinBps && sender.loss_based_bps() <= kMaxBps);
    FUZZ_CHECK(std::isfinite(receiver.detector().slope()));
    FUZZ_CHECK(std::isfinite(receiver.detector().modified_trend_ms()));
    FUZZ_CHECK(receiver.detector().threshold_ms() >= 6.0 &&
               receiver.detector().threshold_ms() <= 600.0);
    FUZZ_CHECK(pacer.queued_packets() <= kPacerCapacity);
    FUZZ_CHECK(pacer.queued_bytes() == queued_bytes);
    FUZZ_CHECK(pacer.pacing_bps() > 0);
  }
  return 0;
}
