#include "whep/whep_audio.h"

#include <algorithm>

namespace syncd::whep {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.fetch_add(by, kRelaxed);
}

audio_codec::EncoderConfig encoder_config(bool stereo) {
  audio_codec::EncoderConfig c;
  c.input_channels = audio::AudioTap::kChannels;
  // Mono: both tap channels carry the same capture channel; one mono stream reads the first.
  c.group = stereo ? audio_codec::ChannelGroup{0, 2} : audio_codec::ChannelGroup{0, 1};
  c.stereo_pair = stereo;
  c.frame_ms = WhepAudioEncoder::kFrameMs;
  c.bitrate_per_channel = WhepAudioEncoder::kBitratePerChannel;
  c.max_packet_bytes = WhepAudioEncoder::kMaxOpusBytes;
  // Browsers repair loss with in-band FEC and PLC (no NACK for audio): let the encoder add LBRR
  // where its mode carries it.
  c.inband_fec = true;
  c.expected_loss_percent = WhepAudioEncoder::kMinExpectedLoss;
  return c;
}

}  // namespace

WhepAudioEncoder::WhepAudioEncoder(std::shared_ptr<audio::AudioTap> tap)
    : tap_(std::move(tap)), accumulator_(audio::AudioTap::kChannels, kFrameSamples) {
  encoder_.open(encoder_config(!tap_->mono()));
  counters_.expected_loss_percent.store(expected_loss_, kRelaxed);
}

void WhepAudioEncoder::set_expected_loss(uint32_t percent) {
  percent = std::clamp(percent, kMinExpectedLoss, kMaxExpectedLoss);
  if (percent == expected_loss_ || !ok()) return;
  if (encoder_.set_expected_loss(percent) == audio_codec::EncoderStatus::kOk) {
    expected_loss_ = percent;
    counters_.expected_loss_percent.store(percent, kRelaxed);
  }
}

void WhepAudioEncoder::set_wanted(bool wanted) {
  if (wanted == wanted_) return;
  wanted_ = wanted;
  tap_->set_wanted(wanted);
  if (!wanted) {
    // What the tap still holds is stale by the time anyone wants audio again.
    release_run();
    tap_->ring().consume_all();
    accumulator_.clear();
    expected_next_ = UINT64_MAX;
  }
}

void WhepAudioEncoder::release_run() {
  if (run_.samples.total() != 0) tap_->ring().consume(run_.samples.total());
  run_ = {};
  run_done_ = 0;
}

bool WhepAudioEncoder::next(EncodedAudio& out, uint64_t (*monotonic_ns)()) {
  if (!ok() || !wanted_) return false;
  audio::CaptureRing& ring = tap_->ring();
  for (;;) {
    if (run_done_ == run_.samples.total()) {
      release_run();
      run_ = ring.peek(1u << 20);
      if (run_.samples.total() == 0) return false;
      if (expected_next_ != UINT64_MAX && run_.first_frame != expected_next_)
        bump(counters_.capture_gaps);
      expected_next_ = run_.first_frame + run_.samples.total();
      clock_index_ = run_.first_frame;
      clock_ns_ = run_.timestamp_ns;
      bump(counters_.frames_read, run_.samples.total());
    }
    // The contiguous piece holding the next frame to append.
    const bool second = run_done_ >= run_.samples.frames[0];
    const uint32_t at = second ? run_done_ - run_.samples.frames[0] : run_done_;
    const uint32_t left = (second ? run_.samples.frames[1] : run_.samples.frames[0]) - at;
    const float* samples =
        run_.samples.part[second ? 1 : 0] + size_t(at) * audio::AudioTap::kChannels;
    run_done_ += uint32_t(accumulator_.append(samples, left, run_.first_frame + run_done_));
    if (!accumulator_.full()) continue;

    const uint64_t t0 = monotonic_ns();
    const audio_codec::EncodeResult r =
        encoder_.encode(accumulator_.frame(), kFrameSamples, std::span<uint8_t>(packet_));
    const uint64_t index = accumulator_.frame_index();
    accumulator_.clear();
    bump(counters_.encode_ns, monotonic_ns() - t0);
    if (r.status != audio_codec::EncoderStatus::kOk) {
      bump(counters_.encode_errors);
      continue;
    }
    bump(counters_.frames_encoded);
    bump(counters_.bytes, r.bytes);
    out.opus = std::span<const uint8_t>(packet_, r.bytes);
    out.capture_index = index;
    out.discontinuity =
        last_frame_index_ == UINT64_MAX || index != last_frame_index_ + kFrameSamples;
    last_frame_index_ = index;
    return true;
  }
}

uint64_t WhepAudioEncoder::capture_index_at(uint64_t now_ns) const {
  const uint64_t elapsed = now_ns > clock_ns_ ? now_ns - clock_ns_ : 0;
  return clock_index_ + elapsed * tap_->ring().rate() / 1'000'000'000ull;
}

}  // namespace syncd::whep
