// The HTTP stream publisher: frames of a stream written to receivers (other pages, native tools)
// as one long HTTP response each, under credit-based flow control (docs/protocol.md, "HTTP
// stream to receivers").
//
// Zero copy: a record is a 64-byte header plus the pool slot's pixels, handed to the
// connection's writer (SocketWriter::send_frame), which pins the slot until the write completes.
// A receiver without credit, or with its frames in flight, keeps one pending frame (pinned too),
// the newest: a newer frame replaces it and the older is counted as dropped. A frame the writer
// or the pool's pin cap refuses is dropped as consumer_slow: a receiver that stops reading holds
// at most its writer's slot cap, and the producer's ingest goes on. Every frame offered to a
// receiver is sent, dropped by stage or reason, or still pending; nothing queues without bound
// and nothing is allocated per frame (write contexts are per receiver, made when it is admitted).
//
// Thread: the loop thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "media/publisher.h"
#include "telemetry/stage_stats.h"

namespace syncd::server {

class Connection;
class ControlRouter;

inline constexpr uint32_t kRecordMagic = 0x534E5953;  // "SYNS"
inline constexpr size_t kRecordHeaderBytes = 64;

class StreamReceivers final : public media::Publisher {
 public:
  static constexpr size_t kMaxWritesInFlight = 4;  // per receiver; the byte limit binds first
  static constexpr size_t kSlowestKept = 8;
  // A receiver of a stream that closed gets this long to take the frames in flight; then its
  // connection is closed, so a receiver that stopped reading cannot keep the pool mapped.
  static constexpr uint64_t kFinishGraceNs = 1'000'000'000;

  // max_frames_in_flight: the source byte limit, in frames of the stream (default 2).
  explicit StreamReceivers(uint32_t max_frames_in_flight = 2);
  ~StreamReceivers() override;

  // Admits a receiver on a connection about to send its 200 head. Returns its id.
  uint64_t add(Connection& connection, const media::Stream& stream, uint32_t initial_credit);
  // The connection is closing (its handle's close callback): forgets the receiver. Write
  // callbacks have all run by then (libuv cancels pending writes before closing).
  void remove(Connection& connection);
  // Credit from the receiver; false when no such receiver.
  bool grant(uint64_t receiver_id, uint32_t frames, uint64_t now_ns);
  size_t count() const { return receivers_.size(); }
  // Whether any receiver takes the stream now (the decoded twin runs its decoder for one).
  bool receiving(uint32_t stream_id) const;
  // Closes receivers whose stream ended more than kFinishGraceNs ago and that still have
  // frames in flight (counted: "cut_at_close"). Called from the loop's periodic tick.
  void end_overdue(uint64_t now_ns);
  // Routes credit (the WebSocket form of POST /streams/NAME/credit) to this publisher.
  void register_control(ControlRouter& router);

  std::string_view name() const override { return "http"; }
  void on_stream_open(const media::Stream&) override {}
  void on_stream_close(const media::Stream& stream) override;
  void on_stream_forget(uint32_t stream_id) override;
  void on_frame(const media::Stream& stream, media::FrameSlot& slot) override;
  void write_stream_stats(uint32_t stream_id, nlohmann::json& out) const override;
  void write_metrics(telemetry::PrometheusText& out,
                     const std::vector<const media::Stream*>& streams) const override;

 private:
  // Where a frame offered to a receiver was dropped: before credit, waiting to be sent, lost
  // with the connection, or refused by the output limits (the receiver reads too slowly).
  enum DropStage { kAdmission, kPreSend, kPostSend, kConsumerSlow, kDropStages };

  struct Receiver;
  struct Write {
    Receiver* receiver = nullptr;
    uint64_t sequence = 0;
    uint64_t offered_ns = 0;
    uint64_t submit_ns = 0;
    bool busy = false;
  };
  struct SlowRecord {
    uint64_t sequence = 0;
    uint64_t wait_ns = 0;   // offered to submitted (credit or byte limit)
    uint64_t write_ns = 0;  // submitted to completed
    uint64_t total_ns = 0;
  };
  struct Stages {
    telemetry::StageStats ingest_gap, tap, publish, write_submit, write_complete, ack;
  };
  struct Receiver {
    StreamReceivers* owner = nullptr;
    uint64_t id = 0;
    Connection* connection = nullptr;
    uint32_t stream_id = 0;
    size_t record_bytes = 0;
    uint32_t credit = 0;
    size_t bytes_in_flight = 0;
    bool finishing = false;  // stream ended: close once the writes in flight complete
    uint64_t finishing_since_ns = 0;
    bool cut_at_close = false;  // closed with frames in flight, kFinishGraceNs after its stream
    media::FrameSlot* pending = nullptr;
    uint64_t pending_offered_ns = 0;
    DropStage pending_stage = kAdmission;
    uint32_t dropped_since_sent = 0;
    uint64_t last_receive_start_ns = 0;
    uint64_t offered = 0, sent = 0, completed = 0;
    std::array<uint64_t, kDropStages> dropped{};
    // Completion times awaiting credit. Credit is capped at 64 and at most 16 writes complete
    // uncredited beyond it, so 128 entries never overflow; an overflow would be counted.
    std::array<uint64_t, 128> unacked_ns{};
    uint64_t ack_untimed = 0;
    size_t unacked_head = 0, unacked_count = 0;
    Stages stages;
    std::array<SlowRecord, kSlowestKept> slowest{};
    size_t slowest_count = 0;
    uint64_t slow_not_kept = 0;
    std::array<Write, kMaxWritesInFlight> writes;
  };

  bool can_send(const Receiver& r) const;
  void send(Receiver& r, media::FrameSlot* slot, uint64_t offered_ns, uint64_t now_ns);
  void send_pending(Receiver& r, uint64_t now_ns);
  void drop_pending(Receiver& r);
  void finish_if_idle(Receiver& r);
  void keep_if_slow(Receiver& r, const SlowRecord& rec);
  static void on_written(void* write, int status);
  nlohmann::json receiver_json(const Receiver& r) const;

  uint32_t max_frames_in_flight_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Receiver>> receivers_;
  std::unordered_map<const Connection*, uint64_t> by_connection_;
  // Accounts of receivers that left, per stream (bounded), so their figures stay in /stats.
  std::deque<std::pair<uint32_t, nlohmann::json>> departed_;
};

}  // namespace syncd::server
