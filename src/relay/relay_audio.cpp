#include "relay/relay_audio.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "rtp/rtp_packet.h"

namespace syncd::relay {

namespace {
constexpr uint32_t kGatherFrames = 256;
constexpr size_t kAudioPacketBytes = 1200;
}  // namespace

// ---------------------------------------------------------------------------------------------
// Sender

AudioSender::AudioSender(const AudioSendConfig& config, uint32_t ssrc)
    : config_(config), ssrc_(ssrc), sequence_(uint16_t(ssrc ^ (ssrc >> 16))) {
  if (!config_.ring || config_.channels == 0 || config_.channels > kMaxAudioChannels ||
      (config_.frame_ms != 10 && config_.frame_ms != 20))
    return;
  for (uint32_t i = 0; i < config_.channels; ++i)
    if (config_.channel_map[i] >= config_.ring->channels()) return;
  plan_ = audio_codec::plan_groups(
      config_.channels,
      audio_codec::channels_per_group(config_.bitrate_per_channel, config_.frame_ms));
  if (plan_.count == 0) return;
  encoders_ = std::make_unique<audio_codec::OpusMultistreamEncoder[]>(plan_.count);
  for (uint32_t g = 0; g < plan_.count; ++g) {
    audio_codec::EncoderConfig c;
    c.input_channels = config_.channels;
    c.group = plan_.groups[g];
    c.frame_ms = config_.frame_ms;
    c.bitrate_per_channel = config_.bitrate_per_channel;
    c.expected_loss_percent = kMinExpectedLoss;  // until the receiver's first report
    if (encoders_[g].open(c) != audio_codec::EncoderStatus::kOk) return;
  }
  counters_.expected_loss_percent = kMinExpectedLoss;
  const uint32_t frame_samples = audio_codec::kSampleRate / 1000 * config_.frame_ms;
  accumulator_ = std::make_unique<audio_codec::FrameAccumulator>(config_.channels, frame_samples);
  gather_.resize(size_t(kGatherFrames) * config_.channels);
  packet_.resize(kAudioPacketBytes);
  ok_ = true;
}

void AudioSender::describe(AudioDescription& d) const {
  d.ssrc = ssrc_;
  d.channels = uint8_t(config_.channels);
  d.groups = plan_.count;
  d.payload_type = kAudioPayloadType;
  d.frame_samples = uint16_t(audio_codec::kSampleRate / 1000 * config_.frame_ms);
  d.source_channels = uint16_t(config_.ring ? config_.ring->channels() : 0);
  d.bitrate_per_channel = config_.bitrate_per_channel;
  std::memcpy(d.channel_map, config_.channel_map, config_.channels);
}

void AudioSender::on_path_loss(uint8_t fraction_lost) {
  const uint32_t percent =
      std::clamp((uint32_t(fraction_lost) * 100 + 255) / 256, kMinExpectedLoss, kMaxExpectedLoss);
  if (!ok_ || percent == counters_.expected_loss_percent) return;
  for (uint32_t g = 0; g < plan_.count; ++g) encoders_[g].set_expected_loss(percent);
  counters_.expected_loss_percent = percent;
}

uint32_t AudioSender::rtp_time(uint64_t now_ns) const {
  const uint64_t elapsed = now_ns > clock_ns_ ? now_ns - clock_ns_ : 0;
  return uint32_t(clock_index_ + elapsed * audio_codec::kSampleRate / 1'000'000'000ull);
}

void AudioSender::poll(AudioPacketSink& sink, bool send, uint64_t (*monotonic_ns)()) {
  if (!ok_) return;
  audio::CaptureRing& ring = *config_.ring;
  const uint32_t width = ring.channels();
  for (;;) {
    const audio::ReadRun run = ring.peek(1u << 20);
    if (run.samples.total() == 0) break;
    if (expected_next_ != UINT64_MAX && run.first_frame != expected_next_) ++counters_.capture_gaps;
    clock_index_ = run.first_frame;
    clock_ns_ = run.timestamp_ns;
    uint64_t index = run.first_frame;
    for (int part = 0; part < 2; ++part) {
      const float* in = run.samples.part[part];
      uint32_t left = run.samples.frames[part];
      while (left > 0) {
        // Gathers the selected channels out of the capture's full frame (a selection such as
        // 0-7,16 is not a contiguous group the encoder could read in place).
        const uint32_t n = std::min(left, kGatherFrames);
        float* out = gather_.data();
        for (uint32_t f = 0; f < n; ++f, in += width)
          for (uint32_t c = 0; c < config_.channels; ++c) *out++ = in[config_.channel_map[c]];
        uint32_t done = 0;
        while (done < n) {
          const size_t taken = accumulator_->append(
              gather_.data() + size_t(done) * config_.channels, n - done, index + done);
          done += uint32_t(taken);
          if (accumulator_->full()) {
            encode_frame(sink, send, monotonic_ns);
            accumulator_->clear();
          }
        }
        index += n;
        left -= n;
      }
    }
    counters_.frames_read += run.samples.total();
    expected_next_ = index;
    ring.consume(run.samples.total());
  }
}

void AudioSender::encode_frame(AudioPacketSink& sink, bool send, uint64_t (*monotonic_ns)()) {
  const uint64_t t0 = monotonic_ns();
  rtp::RtpHeader header;
  header.payload_type = kAudioPayloadType;
  header.timestamp = uint32_t(accumulator_->frame_index());
  header.ssrc = ssrc_;
  header.marker = false;
  for (uint32_t g = 0; g < plan_.count; ++g) {
    header.sequence = sequence_;
    const size_t head = rtp::write_rtp_header(header, packet_);
    if (head == 0) {
      ++counters_.encode_errors;
      continue;
    }
    audio_codec::GroupHeader gh;
    gh.group_index = uint8_t(g);
    gh.group_count = plan_.count;
    gh.group = plan_.groups[g];
    audio_codec::write_group_header(gh, std::span<uint8_t>(packet_).subspan(head));
    const size_t opus_at = head + audio_codec::kGroupHeaderBytes;
    const audio_codec::EncodeResult r =
        encoders_[g].encode(accumulator_->frame(), accumulator_->frame_samples(),
                            std::span<uint8_t>(packet_).subspan(opus_at));
    if (r.status != audio_codec::EncoderStatus::kOk) {
      ++counters_.encode_errors;
      continue;
    }
    if (!send) continue;
    ++sequence_;
    ++counters_.packets;
    counters_.bytes += opus_at + r.bytes - head;
    sink.on_audio_packet(std::span<uint8_t>(packet_).first(opus_at + r.bytes));
  }
  ++counters_.frames_encoded;
  if (send) ++counters_.frames_sent;
  counters_.encode_ns += monotonic_ns() - t0;
}

// ---------------------------------------------------------------------------------------------
// Receiver

AudioReceiver::AudioReceiver(const AudioReceiveConfig& config) : config_(config) {}

bool AudioReceiver::on_description(const AudioDescription& d) {
  if (described_ && d.ssrc == description_.ssrc && d.channels == description_.channels &&
      d.groups == description_.groups && d.frame_samples == description_.frame_samples &&
      std::memcmp(d.channel_map, description_.channel_map, d.channels) == 0)
    return true;
  audio_codec::GroupPlan plan =
      audio_codec::plan_groups(d.channels, (d.channels + d.groups - 1) / d.groups);
  if (plan.count != d.groups) {
    ++counters_.packets_refused;
    return false;
  }
  auto decoders = std::make_unique<audio_codec::OpusMultistreamDecoder[]>(plan.count);
  for (uint32_t g = 0; g < plan.count; ++g) {
    audio_codec::DecoderConfig c;
    c.output_channels = d.channels;
    c.group = plan.groups[g];
    c.max_frame_samples = d.frame_samples;
    if (!decoders[g].open(c)) {
      ++counters_.packets_refused;
      return false;
    }
  }
  audio_codec::PlayoutConfig pc;
  pc.groups = plan.count;
  pc.frame_samples = d.frame_samples;
  pc.target_ns = config_.target_ns;
  pc.capacity_frames = 64;
  // A new stream's counters continue the old one's: the totals stay one account.
  const audio_codec::PlayoutCounters before = counters_.playout;
  playout_ = std::make_unique<audio_codec::PlayoutBuffer>(pc);
  base_playout_ = before;
  base_lbrr_ = counters_.recovered_lbrr;
  decoders_ = std::move(decoders);
  plan_ = plan;
  description_ = d;
  described_ = true;
  frame_.assign(size_t(d.frame_samples) * d.channels, 0.0f);
  counters_.channels = d.channels;
  ++counters_.descriptions;
  return true;
}

void AudioReceiver::on_sender_report(uint64_t ntp_ns, uint32_t rtp_timestamp) {
  sr_ntp_ns_ = ntp_ns;
  sr_rtp_ = rtp_timestamp;
  have_sr_ = true;
}

void AudioReceiver::on_packet(uint32_t rtp_timestamp, std::span<const uint8_t> payload,
                              uint64_t now_ns) {
  audio_codec::GroupHeader header;
  std::span<const uint8_t> opus;
  if (!described_ ||
      audio_codec::parse_group_header(payload, header, opus) != audio_codec::HeaderStatus::kOk ||
      !audio_codec::header_matches_plan(header, plan_)) {
    ++counters_.packets_refused;
    return;
  }
  playout_->insert(rtp_timestamp, header.group_index, opus, now_ns);
  sync_counters();
}

uint64_t AudioReceiver::next_wakeup_ns() const {
  return playout_ ? playout_->next_due_ns() : UINT64_MAX;
}

void AudioReceiver::poll(uint64_t now_ns, uint64_t realtime_ns) {
  if (!playout_) return;
  audio::CaptureRing* ring = config_.ring;
  audio_codec::PlayoutFrame out;
  const uint32_t frames = description_.frame_samples;
  const uint32_t width = ring ? ring->channels() : 0;
  while (playout_->pop(now_ns, out)) {
    const uint64_t t0 = core::monotonic_ns();
    for (uint32_t g = 0; g < plan_.count; ++g) {
      audio_codec::DecodeResult r;
      switch (out.action[g]) {
        case audio_codec::GroupAction::kDecode:
          r = decoders_[g].decode(out.packet[g], frame_.data(), frames);
          break;
        case audio_codec::GroupAction::kRecover:
          r = decoders_[g].recover_from_next(out.packet[g], frames, frame_.data(), frames);
          break;
        case audio_codec::GroupAction::kConceal:
          r = decoders_[g].conceal(frames, frame_.data(), frames);
          break;
      }
      if (!r.ok() || r.frames != frames) {
        // A packet libopus refused: concealed in its place, so the frame keeps its length.
        ++counters_.decode_errors;
        decoders_[g].conceal(frames, frame_.data(), frames);
      }
    }
    counters_.decode_ns += core::monotonic_ns() - t0;
    if (!ring) continue;
    if (!aligned_) {
      // The ring's absolute index starts at the sender's capture index, so a reader at this end
      // sees the capture's own numbering (and the latency of every sample is measurable).
      ring->mark_gap(out.capture_index);
      ring_next_ = out.capture_index;
      aligned_ = true;
    } else if (out.capture_index > ring_next_ && out.capture_index - ring_next_ < (1ull << 32)) {
      // Playout restarted after a stall: the frames nobody sent are a gap to the reader.
      ring->mark_gap(out.capture_index - ring_next_);
      ring_next_ = out.capture_index;
    }
    ring_next_ += frames;
    const audio::RingSpan span = ring->begin_write(frames);
    if (span.total() == 0) {
      ring->drop(frames);
      counters_.ring_overflow_frames += frames;
      continue;
    }
    // Stream channel c goes to column c of the ring; columns past the stream stay silent and
    // stream channels past the ring's width are left out.
    const uint32_t channels = description_.channels;
    const uint32_t copy = std::min(channels, width);
    const float* in = frame_.data();
    for (int part = 0; part < 2; ++part) {
      float* o = span.part[part];
      for (uint32_t f = 0; f < span.frames[part]; ++f, in += channels, o += width) {
        std::memcpy(o, in, copy * sizeof(float));
        if (width > copy) std::memset(o + copy, 0, (width - copy) * sizeof(float));
      }
    }
    ring->commit(frames, now_ns);
    counters_.frames_written += frames;
    if (have_sr_) {
      const int64_t ticks = int64_t(int32_t(uint32_t(out.capture_index) - sr_rtp_));
      const int64_t capture_ns = int64_t(sr_ntp_ns_) + ticks * 1'000'000'000 / 48000;
      const int64_t us = (int64_t(realtime_ns) - capture_ns) / 1000;
      counters_.latency_last_us = us;
      if (counters_.latency_samples == 0 || us < counters_.latency_min_us)
        counters_.latency_min_us = us;
      if (counters_.latency_samples == 0 || us > counters_.latency_max_us)
        counters_.latency_max_us = us;
      counters_.latency_sum_us += us;
      ++counters_.latency_samples;
    }
  }
  sync_counters();
}

void AudioReceiver::sync_counters() {
  if (!playout_) return;
  const audio_codec::PlayoutCounters& now = playout_->counters();
  audio_codec::PlayoutCounters& sum = counters_.playout;
  sum.packets_in = base_playout_.packets_in + now.packets_in;
  sum.packets_late = base_playout_.packets_late + now.packets_late;
  sum.packets_duplicate = base_playout_.packets_duplicate + now.packets_duplicate;
  sum.packets_overflow = base_playout_.packets_overflow + now.packets_overflow;
  sum.packets_refused = base_playout_.packets_refused + now.packets_refused;
  sum.packets_misaligned = base_playout_.packets_misaligned + now.packets_misaligned;
  sum.frames_played = base_playout_.frames_played + now.frames_played;
  sum.frames_recovered = base_playout_.frames_recovered + now.frames_recovered;
  sum.frames_concealed_lost = base_playout_.frames_concealed_lost + now.frames_concealed_lost;
  sum.frames_concealed_underflow =
      base_playout_.frames_concealed_underflow + now.frames_concealed_underflow;
  sum.underflows = base_playout_.underflows + now.underflows;
  uint64_t lbrr = 0;
  for (uint32_t g = 0; g < plan_.count; ++g)
    lbrr += decoders_[g].counters().recovered_from_silk_or_hybrid;
  counters_.recovered_lbrr = base_lbrr_ + lbrr;
  sum.stalls = base_playout_.stalls + now.stalls;
  sum.restarts = base_playout_.restarts + now.restarts;
}

}  // namespace syncd::relay
