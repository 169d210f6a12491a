// libFuzzer target for syncd::rtp::parse_rtcp (compound RTCP).
//
// Each input is parsed as is (compound rules) and with reduced-size allowed. The sink checks the
// event contract (sizes within their limits, strings inside the input); a refused packet must
// report no event. An accepted compound is then written back with RtcpWriter from its events and
// parsed again: the events must come back the same (NACK numbers as a set, since packing may
// regroup them).
#include "rtp/rtcp.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_check.h"

namespace {

using namespace syncd::rtp;

// FNV-1a over the events, in order.
struct Digest {
  uint64_t value = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) value = (value ^ bytes[i]) * 1099511628211ull;
  }
  void add_u64(uint64_t v) { add(&v, sizeof v); }
};

struct Events {
  struct Sr {
    uint32_t ssrc;
    SenderInfo info;
    std::vector<ReportBlock> blocks;
  };
  struct Rr {
    uint32_t ssrc;
    std::vector<ReportBlock> blocks;
  };
  std::vector<int> order;  // 0 SR, 1 RR, 2 CNAME, 3 BYE, 5 PLI, 6 REMB (NACK kept apart)
  std::vector<Sr> srs;
  std::vector<Rr> rrs;
  std::vector<std::pair<uint32_t, std::string>> cnames;
  std::vector<std::pair<std::vector<uint32_t>, std::string>> byes;
  std::vector<std::pair<uint32_t, uint32_t>> plis;
  std::vector<std::pair<uint64_t, std::vector<uint32_t>>> rembs;
  std::vector<uint32_t> remb_senders;
  std::vector<std::pair<uint32_t, uint32_t>> nack_keys;  // (sender, media) per event
  std::set<std::tuple<uint32_t, uint32_t, uint16_t>> nacked;
};

class CheckingSink : public RtcpSink {
 public:
  CheckingSink(std::span<const uint8_t> input, Events* events) : input_(input), events_(events) {}
  size_t count = 0;

  void on_sender_report(const SenderReport& r) override {
    FUZZ_CHECK(r.blocks.size() <= kMaxReportBlocks);
    ++count;
    for (const auto& b : r.blocks) check_block(b);
    if (events_) {
      events_->order.push_back(0);
      events_->srs.push_back({r.sender_ssrc, r.info, {r.blocks.begin(), r.blocks.end()}});
    }
  }
  void on_receiver_report(const ReceiverReport& r) override {
    FUZZ_CHECK(r.blocks.size() <= kMaxReportBlocks);
    ++count;
    for (const auto& b : r.blocks) check_block(b);
    if (events_) {
      events_->order.push_back(1);
      events_->rrs.push_back({r.sender_ssrc, {r.blocks.begin(), r.blocks.end()}});
    }
  }
  void on_cname(uint32_t ssrc, std::string_view cname) override {
    FUZZ_CHECK(cname.size() <= 255);
    check_inside(cname);
    ++count;
    if (events_) {
      events_->order.push_back(2);
      events_->cnames.emplace_back(ssrc, std::string(cname));
    }
  }
  void on_goodbye(const Goodbye& b) override {
    FUZZ_CHECK(b.ssrcs.size() <= kMaxByeSources);
    FUZZ_CHECK(b.reason.size() <= 255);
    check_inside(b.reason);
    ++count;
    if (events_) {
      events_->order.push_back(3);
      events_->byes.emplace_back(std::vector<uint32_t>(b.ssrcs.begin(), b.ssrcs.end()),
                                 std::string(b.reason));
    }
  }
  void on_nack(const Nack& n) override {
    FUZZ_CHECK(!n.lost.empty());
    FUZZ_CHECK(n.lost.size() <= kNackEventCapacity);
    ++count;
    if (events_) {
      events_->nack_keys.emplace_back(n.sender_ssrc, n.media_ssrc);
      for (uint16_t s : n.lost) events_->nacked.insert({n.sender_ssrc, n.media_ssrc, s});
    }
  }
  void on_pli(uint32_t sender, uint32_t media) override {
    ++count;
    if (events_) {
      events_->order.push_back(5);
      events_->plis.emplace_back(sender, media);
    }
  }
  void on_remb(const Remb& r) override {
    FUZZ_CHECK(r.ssrcs.size() <= kMaxRembSsrcs);
    ++count;
    if (events_) {
      events_->order.push_back(6);
      events_->rembs.emplace_back(r.bitrate_bps,
                                  std::vector<uint32_t>(r.ssrcs.begin(), r.ssrcs.end()));
      events_->remb_senders.push_back(r.sender_ssrc);
    }
  }

 private:
  void check_block(const ReportBlock& b) {
    FUZZ_CHECK(b.cumulative_lost >= kMinCumulativeLost && b.cumulative_lost <= kMaxCumulativeLost);
  }
  void check_inside(std::string_view s) {
    if (s.empty()) return;
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    FUZZ_CHECK(p >= input_.data() && p + s.size() <= input_.data() + input_.size());
  }
  std::span<const uint8_t> input_;
  Events* events_;
};

bool same_blocks(const std::vector<ReportBlock>& a, const std::vector<ReportBlock>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].source_ssrc != b[i].source_ssrc || a[i].fraction_lost != b[i].fraction_lost ||
        a[i].cumulative_lost != b[i].cumulative_lost ||
        a[i].extended_highest_sequence != b[i].extended_highest_sequence ||
        a[i].jitter != b[i].jitter || a[i].last_sr != b[i].last_sr ||
        a[i].delay_since_last_sr != b[i].delay_since_last_sr) {
      return false;
    }
  }
  return true;
}

// Writes the events back as a compound packet in the same order.
// Each event takes at most 8 times the bytes it was read from (a 2-byte CNAME item becomes a
// 12-byte SDES packet); regrouped NACKs take at most twice the FCIs they came in (each 17-number
// window of the original meets at most two of the greedy packing), so 32x is ample.
std::vector<uint8_t> rewrite(const Events& e, size_t input_size) {
  std::vector<uint8_t> out(input_size * 32 + 4096);
  RtcpWriter writer(out);
  size_t sr = 0, rr = 0, cname = 0, bye = 0, pli = 0, remb = 0;
  for (int type : e.order) {
    switch (type) {
      case 0:
        FUZZ_CHECK(writer.add_sender_report(e.srs[sr].ssrc, e.srs[sr].info, e.srs[sr].blocks));
        ++sr;
        break;
      case 1:
        FUZZ_CHECK(writer.add_receiver_report(e.rrs[rr].ssrc, e.rrs[rr].blocks));
        ++rr;
        break;
      case 2:
        FUZZ_CHECK(writer.add_cname(e.cnames[cname].first, e.cnames[cname].second));
        ++cname;
        break;
      case 3:
        FUZZ_CHECK(writer.add_goodbye(e.byes[bye].first, e.byes[bye].second));
        ++bye;
        break;
      case 5:
        FUZZ_CHECK(writer.add_pli(e.plis[pli].first, e.plis[pli].second));
        ++pli;
        break;
      case 6:
        FUZZ_CHECK(
            writer.add_remb(e.remb_senders[remb], e.rembs[remb].first, e.rembs[remb].second));
        ++remb;
        break;
    }
  }
  // NACKs at the end, one packet per (sender, media), the numbers in ascending order.
  std::vector<uint16_t> lost;
  auto it = e.nacked.begin();
  while (it != e.nacked.end()) {
    const uint32_t sender = std::get<0>(*it);
    const uint32_t media = std::get<1>(*it);
    lost.clear();
    while (it != e.nacked.end() && std::get<0>(*it) == sender && std::get<1>(*it) == media &&
           lost.size() < kNackEventCapacity) {
      lost.push_back(std::get<2>(*it));
      ++it;
    }
    FUZZ_CHECK(writer.add_nack(sender, media, lost));
  }
  out.resize(writer.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> input(data, data + size);
  for (bool reduced : {false, true}) {
    Events events;
    CheckingSink sink(input, &events);
    uint32_t skipped = 0;
    const RtcpParseError error = parse_rtcp(input, sink, RtcpParseOptions{reduced}, &skipped);
    if (error != RtcpParseError::kOk) {
      FUZZ_CHECK(sink.count == 0);
      continue;
    }
    if (reduced || events.order.empty()) continue;
    // A compound whose first event is a report can be rebuilt from its events alone. (The first
    // packet is SR or RR, but an SR/RR with an unread trailing part still leads.)
    if (events.order[0] != 0 && events.order[0] != 1) continue;
    const std::vector<uint8_t> again = rewrite(events, input.size());
    Events reparsed;
    CheckingSink sink2(again, &reparsed);
    FUZZ_CHECK(parse_rtcp(again, sink2) == RtcpParseError::kOk);
    FUZZ_CHECK(reparsed.order == events.order);
    for (size_t i = 0; i < events.srs.size(); ++i) {
      FUZZ_CHECK(reparsed.srs[i].ssrc == events.srs[i].ssrc);
      FUZZ_CHECK(reparsed.srs[i].info.ntp_timestamp == events.srs[i].info.ntp_timestamp);
      FUZZ_CHECK(reparsed.srs[i].info.octet_count == events.srs[i].info.octet_count);
      FUZZ_CHECK(same_blocks(reparsed.srs[i].blocks, events.srs[i].blocks));
    }
    for (size_t i = 0; i < events.rrs.size(); ++i) {
      FUZZ_CHECK(reparsed.rrs[i].ssrc == events.rrs[i].ssrc);
      FUZZ_CHECK(same_blocks(reparsed.rrs[i].blocks, events.rrs[i].blocks));
    }
    FUZZ_CHECK(reparsed.cnames == events.cnames);
    FUZZ_CHECK(reparsed.byes == events.byes);
    FUZZ_CHECK(reparsed.plis == events.plis);
    for (size_t i = 0; i < events.rembs.size(); ++i) {
      // A saturated bitrate cannot be re-encoded; any other decodes to the same value.
      if (events.rembs[i].first != UINT64_MAX) {
        FUZZ_CHECK(reparsed.rembs[i].first == events.rembs[i].first);
      }
      FUZZ_CHECK(reparsed.rembs[i].second == events.rembs[i].second);
    }
    FUZZ_CHECK(reparsed.nacked == events.nacked);
  }
  return 0;
}
