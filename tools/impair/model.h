// The impairment model of sync-impair (docs/wan.md, "Impairment proxy"): packets with their
// arrival times in, each packet's fate out (dropped and why, or delivered at a time, maybe
// twice). One chain per direction. The proxy around it only moves bytes and keeps time.
//
// Stages, in a packet's order through them:
//   1. random loss (Bernoulli, --loss)
//   2. Gilbert-Elliott burst loss: a two-state Markov chain, stepped once per packet
//   3. duplication (a second copy goes through the stages below on its own)
//   4. rate cap: token bucket in front of a FIFO queue of limited bytes; a packet that does not
//      fit the queue is dropped (tail drop)
//   5. one-way delay plus jitter (uniform or normal), and explicit reordering
// Each random stage draws from its own generator, seeded from the one seed, so changing one
// stage's settings does not change another stage's draws: the same seed and the same packet
// sequence give the same fates.
//
// Pure: no sockets, clocks, logs or threads; times are passed in (uint64 ns, monotonic). Any
// thread; not thread-safe; one instance per direction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace syncd::impair {

enum class JitterDistribution : uint8_t {
  kUniform,  // delay uniform in [delay - jitter, delay + jitter]
  kNormal,   // delay normal with mean delay, standard deviation jitter, cut at +-3 sigma
};

struct ChainConfig {
  double loss_percent = 0;  // independent random loss
  // Gilbert-Elliott (per packet): p = P(good -> bad), r = P(bad -> good); the loss probability
  // in each state. Off while ge_p == 0.
  double ge_p = 0;
  double ge_r = 1;
  double ge_bad_loss_percent = 100;
  double ge_good_loss_percent = 0;
  double delay_ms = 0;
  double jitter_ms = 0;
  JitterDistribution jitter_distribution = JitterDistribution::kUniform;
  // Whether jitter may reorder packets. If not, a packet is never delivered before the one that
  // arrived before it (its delivery waits: jitter then bunches packets, as a FIFO link does).
  bool allow_reorder = false;
  // Explicit reordering: with this probability a packet is held reorder_gap_ms longer and
  // overtaken by the packets behind it (whatever allow_reorder says).
  double reorder_percent = 0;
  double reorder_gap_ms = 5;
  double duplicate_percent = 0;
  double rate_kbps = 0;          // 0: no rate cap
  size_t bucket_bytes = 0;       // token bucket depth; 0: 1500 bytes (one packet at line rate)
  size_t queue_limit_bytes = 0;  // queue in front of the cap; 0: 100 ms at the rate (min 3000)
};

// Sets ge_p and ge_r (bad-state loss 100 %, good-state 0 %) so that the long-run loss is
// loss_percent and the mean burst of consecutive losses is mean_burst packets:
// r = 1 / mean_burst; stationary P(bad) = p / (p + r) = L, so p = r L / (1 - L).
// Returns false (config unchanged) unless 0 < loss_percent < 100 and mean_burst >= 1.
bool set_gilbert_elliott_from_target(ChainConfig& config, double loss_percent, double mean_burst);

enum class Fate : uint8_t {
  kDelivered,
  kDuplicated,  // delivered twice
  kDropRandom,
  kDropBurst,  // Gilbert-Elliott
  kDropRate,   // tail drop at the rate cap's queue
};
const char* fate_name(Fate fate);

struct Decision {
  Fate fate = Fate::kDelivered;
  uint8_t copies = 1;              // 0 when dropped, 2 when duplicated
  uint64_t deliver_at_ns[2] = {};  // for each copy
  bool reordered = false;          // held by explicit reordering
  // The duplicate of a duplicated packet can itself fall to the rate cap: then copies is 1.
};

struct ChainCounters {
  uint64_t packets_in = 0;
  uint64_t packets_out = 0;  // copies scheduled for delivery
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t dropped_random = 0;
  uint64_t dropped_burst = 0;
  uint64_t dropped_rate = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
};

class ImpairmentChain {
 public:
  ImpairmentChain(const ChainConfig& config, uint64_t seed);

  // One packet of `bytes` bytes arrived at arrival_ns (non-decreasing across calls).
  Decision on_packet(uint64_t arrival_ns, size_t bytes);

  const ChainCounters& counters() const { return counters_; }
  const ChainConfig& config() const { return config_; }

  // A new rate cap from now on (0: none), for a path whose capacity changes during a run
  // (--fwd-rate-schedule): packets already queued keep their departures; the queue becomes 100
  // ms at the new rate unless the configuration gave its size. May allocate (the first cap).
  void set_rate(double rate_kbps);

 private:
  // splitmix64-seeded xoshiro256** generator: small, fast and the same on every platform (the
  // standard library's distributions are not), so a seed reproduces a run anywhere.
  struct Random {
    uint64_t s[4];
    explicit Random(uint64_t seed);
    uint64_t next();
    double uniform();  // [0, 1)
    bool chance(double percent) { return percent > 0 && uniform() * 100 < percent; }
    double normal();  // mean 0, sd 1 (Box-Muller)
  };

  // Rate cap: the departure time of `bytes` arriving at t, or false when the queue is full.
  bool rate_depart(uint64_t t, size_t bytes, uint64_t* departure_ns);
  uint64_t draw_delay_ns();

  ChainConfig config_;
  Random loss_random_;
  Random burst_random_;
  Random duplicate_random_;
  Random delay_random_;
  Random reorder_random_;
  bool ge_bad_ = false;
  // Token bucket (bytes, as of last_departure_ns_) and the queue's departures, FIFO.
  double bytes_per_ns_ = 0;
  bool queue_limit_given_ = false;  // queue_limit_bytes came from the configuration
  double tokens_ = 0;
  uint64_t last_departure_ns_ = 0;
  size_t queued_bytes_ = 0;
  struct Queued {
    uint64_t departure_ns;
    size_t bytes;
  };
  std::vector<Queued> queue_;  // ring, preallocated
  size_t queue_head_ = 0;
  size_t queue_count_ = 0;
  uint64_t last_delivery_ns_ = 0;  // FIFO order when reordering is not allowed
  ChainCounters counters_;
};

}  // namespace syncd::impair
