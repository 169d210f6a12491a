#include "telemetry/frame_event_log.h"

#include <algorithm>
#include <charconv>

namespace syncd::telemetry {

namespace {
void append_number(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
}  // namespace

std::string FrameEventLog::csv_since(uint64_t since, size_t max_records, uint64_t& lost,
                                     uint64_t& next) const {
  const uint64_t oldest = next_ > records_.size() ? next_ - records_.size() : 0;
  lost = since < oldest ? oldest - since : 0;
  std::string out = "index,stream,sequence,receive_start_ns,accept_ns,publish_done_ns\n";
  const uint64_t from = since < oldest ? oldest : since;
  const uint64_t to = from < next_ ? std::min<uint64_t>(next_, from + max_records) : from;
  next = std::max(to, since);
  if (from < to) out.reserve(out.size() + size_t(to - from) * 64);
  for (uint64_t i = from; i < to; ++i) {
    const FrameEvent& e = records_[i % records_.size()];
    append_number(out, i);
    out.push_back(',');
    append_number(out, e.stream_id);
    out.push_back(',');
    append_number(out, e.sequence);
    out.push_back(',');
    append_number(out, e.receive_start_ns);
    out.push_back(',');
    append_number(out, e.accept_ns);
    out.push_back(',');
    append_number(out, e.publish_done_ns);
    out.push_back('\n');
  }
  return out;
}

}  // namespace syncd::telemetry
