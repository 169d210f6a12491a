#include "impair/model.h"

#include <algorithm>
#include <cmath>

namespace syncd::impair {

namespace {

constexpr double kNsPerMs = 1e6;
constexpr size_t kMaxQueuedPackets = 1 << 16;

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

bool set_gilbert_elliott_from_target(ChainConfig& config, double loss_percent, double mean_burst) {
  if (!(loss_percent > 0 && loss_percent < 100 && mean_burst >= 1)) return false;
  const double loss = loss_percent / 100;
  const double r = 1 / mean_burst;
  config.ge_r = r;
  config.ge_p = r * loss / (1 - loss);
  config.ge_bad_loss_percent = 100;
  config.ge_good_loss_percent = 0;
  return true;
}

const char* fate_name(Fate fate) {
  switch (fate) {
    case Fate::kDelivered:
      return "delivered";
    case Fate::kDuplicated:
      return "duplicated";
    case Fate::kDropRandom:
      return "drop_random";
    case Fate::kDropBurst:
      return "drop_burst";
    case Fate::kDropRate:
      return "drop_rate";
  }
  return "unknown";
}

ImpairmentChain::Random::Random(uint64_t seed) {
  for (uint64_t& word : s) word = splitmix64(seed);
}

uint64_t ImpairmentChain::Random::next() {
  // xoshiro256** (Blackman and Vigna).
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double ImpairmentChain::Random::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double ImpairmentChain::Random::normal() {
  const double u1 = 1 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

// Each stage's generator gets its own seed derived from the one seed and the stage's number.
ImpairmentChain::ImpairmentChain(const ChainConfig& config, uint64_t seed)
    : config_(config),
      loss_random_(seed ^ 0x100),
      burst_random_(seed ^ 0x200),
      duplicate_random_(seed ^ 0x300),
      delay_random_(seed ^ 0x400),
      reorder_random_(seed ^ 0x500) {
  queue_limit_given_ = config_.queue_limit_bytes != 0;
  if (config_.bucket_bytes == 0) config_.bucket_bytes = 1500;
  tokens_ = static_cast<double>(config_.bucket_bytes);
  set_rate(config_.rate_kbps);
}

void ImpairmentChain::set_rate(double rate_kbps) {
  config_.rate_kbps = rate_kbps;
  bytes_per_ns_ = rate_kbps > 0 ? rate_kbps * 1000 / 8 / 1e9 : 0;
  if (rate_kbps <= 0) return;
  if (!queue_limit_given_) {
    config_.queue_limit_bytes =
        std::max<size_t>(3000, static_cast<size_t>(rate_kbps * 1000 / 8 / 10));
  }
  if (queue_.empty()) queue_.resize(kMaxQueuedPackets);
}

bool ImpairmentChain::rate_depart(uint64_t t, size_t bytes, uint64_t* departure_ns) {
  if (bytes_per_ns_ <= 0) {
    *departure_ns = t;
    return true;
  }
  // Packets whose departure has passed have left the queue.
  while (queue_count_ > 0 && queue_[queue_head_].departure_ns <= t) {
    queued_bytes_ -= queue_[queue_head_].bytes;
    queue_head_ = (queue_head_ + 1) % queue_.size();
    --queue_count_;
  }
  const uint64_t start = std::max(t, last_departure_ns_);
  double tokens =
      std::min(static_cast<double>(config_.bucket_bytes),
               tokens_ + static_cast<double>(start - last_departure_ns_) * bytes_per_ns_);
  uint64_t departure = start;
  if (tokens < static_cast<double>(bytes)) {
    departure = start + static_cast<uint64_t>(
                            std::ceil((static_cast<double>(bytes) - tokens) / bytes_per_ns_));
  }
  if (departure > t) {  // it waits in the queue: tail drop when the queue is full
    if (queued_bytes_ + bytes > config_.queue_limit_bytes || queue_count_ == queue_.size()) {
      return false;
    }
    queue_[(queue_head_ + queue_count_) % queue_.size()] = {departure, bytes};
    ++queue_count_;
    queued_bytes_ += bytes;
  }
  tokens_ = std::max(0.0, tokens + static_cast<double>(departure - start) * bytes_per_ns_ -
                              static_cast<double>(bytes));
  last_departure_ns_ = departure;
  *departure_ns = departure;
  return true;
}

uint64_t ImpairmentChain::draw_delay_ns() {
  const double delay = config_.delay_ms;
  const double jitter = config_.jitter_ms;
  double ms = delay;
  if (jitter > 0) {
    if (config_.jitter_distribution == JitterDistribution::kUniform) {
      ms = delay - jitter + 2 * jitter * delay_random_.uniform();
    } else {
      ms = delay + jitter * std::clamp(delay_random_.normal(), -3.0, 3.0);
    }
  }
  return static_cast<uint64_t>(std::max(0.0, ms) * kNsPerMs);
}

Decision ImpairmentChain::on_packet(uint64_t arrival_ns, size_t bytes) {
  ++counters_.packets_in;
  counters_.bytes_in += bytes;
  // Every stage draws for every packet, in the same order, whatever the earlier stages decided:
  // a stage's draws then depend only on the packet's index.
  const bool random_loss = loss_random_.chance(config_.loss_percent);
  bool burst_loss = false;
  if (config_.ge_p > 0) {
    const double transition = burst_random_.uniform();
    ge_bad_ = ge_bad_ ? !(transition < config_.ge_r) : transition < config_.ge_p;
    burst_loss =
        burst_random_.chance(ge_bad_ ? config_.ge_bad_loss_percent : config_.ge_good_loss_percent);
  }
  const bool duplicate = duplicate_random_.chance(config_.duplicate_percent);
  const bool reorder = reorder_random_.chance(config_.reorder_percent);
  const uint64_t delays_ns[2] = {draw_delay_ns(), draw_delay_ns()};  // one per possible copy

  Decision decision;
  if (random_loss || burst_loss) {
    decision.fate = random_loss ? Fate::kDropRandom : Fate::kDropBurst;
    decision.copies = 0;
    ++(random_loss ? counters_.dropped_random : counters_.dropped_burst);
    return decision;
  }
  decision.copies = 0;
  for (int copy = 0; copy < (duplicate ? 2 : 1); ++copy) {
    uint64_t departure = 0;
    if (!rate_depart(arrival_ns, bytes, &departure)) {
      ++counters_.dropped_rate;
      continue;
    }
    uint64_t deliver = departure + delays_ns[copy];
    if (reorder && copy == 0) {
      deliver += static_cast<uint64_t>(config_.reorder_gap_ms * kNsPerMs);
      decision.reordered = true;
      ++counters_.reordered;
    } else if (!config_.allow_reorder) {
      deliver = std::max(deliver, last_delivery_ns_);
      last_delivery_ns_ = deliver;
    }
    decision.deliver_at_ns[decision.copies++] = deliver;
    ++counters_.packets_out;
    counters_.bytes_out += bytes;
  }
  if (decision.copies == 0) {
    decision.fate = Fate::kDropRate;
  } else if (decision.copies == 2) {
    decision.fate = Fate::kDuplicated;
    ++counters_.duplicated;
  }
  return decision;
}

}  // namespace syncd::impair
