// A bounded log of per-frame events (which frame, when it arrived, was accepted and was
// published), read by the qualification harness over GET /events/frames while a run goes on.
//
// Fixed capacity, allocated and touched once at construction, so recording is a few stores and
// resident memory never grows. Records are indexed from 0 forever; a reader asks for the ones
// from index K on and learns how many were overwritten before it asked (never silently lost).
// Not thread-safe: the loop thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace syncd::telemetry {

struct FrameEvent {
  uint32_t stream_id;
  uint32_t reserved;
  uint64_t sequence;
  uint64_t receive_start_ns;  // CLOCK_MONOTONIC
  uint64_t accept_ns;
  uint64_t publish_done_ns;
};

class FrameEventLog {
 public:
  explicit FrameEventLog(size_t capacity) : records_(capacity ? capacity : 1) {}

  void record(const FrameEvent& e) {
    records_[next_ % records_.size()] = e;
    ++next_;
  }

  uint64_t next_index() const { return next_; }
  // CSV ("index,stream,sequence,receive_start_ns,accept_ns,publish_done_ns") of the records from
  // since on that are still held, at most max_records of them (a page); lost gets how many of
  // those were already overwritten, next the index to ask for the next page.
  std::string csv_since(uint64_t since, size_t max_records, uint64_t& lost, uint64_t& next) const;

 private:
  std::vector<FrameEvent> records_;  // value-initialised: every page touched at construction
  uint64_t next_ = 0;
};

}  // namespace syncd::telemetry
