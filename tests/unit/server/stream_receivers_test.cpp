// server::StreamReceivers: HTTP stream receivers of a real Server, fed by a WebSocket producer.
// Checks the record format, credit-based flow control (newest frame wins, credit over the
// WebSocket and over POST), the per-receiver account in /stats, and how a receiver ends.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "live_server.h"

using namespace syncd;
using namespace syncd::test;
using nlohmann::json;

namespace {

constexpr int kSide = 16;
constexpr size_t kFrameBytes = kSide * kSide * 4;  // rgba8
constexpr size_t kRecordBytes = 64 + kFrameBytes;

template <typename T>
T field(const std::string& record, size_t offset) {
  T v;
  std::memcpy(&v, record.data() + offset, sizeof v);
  return v;
}

// One receiver: GET /streams/NAME on its own socket; records read off the response body.
class Receiver {
 public:
  Receiver(LiveServer& live, const std::string& target) : live_(live) {
    fd_ = connect_to(live);
    send_all(live, fd_, request_text("GET", target));
    live.pump_until([&] {
      open_ = read_available(fd_, bytes_) && open_;
      return bytes_.find("\r\n\r\n") != std::string::npos || !open_;
    });
    response_ = parse_response(bytes_);
    const size_t end = bytes_.find("\r\n\r\n");
    if (end != std::string::npos) bytes_.erase(0, end + 4);
  }
  ~Receiver() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const HttpResponse& response() const { return response_; }
  uint64_t id() const { return std::stoull(response_.header("x-sync-receiver")); }
  // The next whole record, or "" when none comes within `ms`.
  std::string next_record(int ms = kWaitMs) {
    std::string out;
    live_.pump_until(
        [&] {
          open_ = read_available(fd_, bytes_) && open_;
          if (bytes_.size() < kRecordBytes) return !open_;
          out = bytes_.substr(0, kRecordBytes);
          bytes_.erase(0, kRecordBytes);
          return true;
        },
        ms);
    return out;
  }
  // Whether the server ended the response (within `ms`).
  bool ended(int ms = kWaitMs) {
    live_.pump_until(
        [&] {
          open_ = read_available(fd_, bytes_) && open_;
          return !open_;
        },
        ms);
    return !open_;
  }
  size_t buffered() const { return bytes_.size(); }

 private:
  LiveServer& live_;
  int fd_ = -1;
  bool open_ = true;
  std::string bytes_;
  HttpResponse response_;
};

struct StreamReceiversTest : OneStreamFixture {
  void start(server::ServerConfig cfg = test_config()) {
    OneStreamFixture::start(std::move(cfg), kSide);
  }
  std::string ticket(int uses = 1) {
    return producer->request({{"type", "ticket.create"}, {"stream", stream}, {"uses", uses}})
        .value("ticket", "");
  }
  void send_frame(uint64_t seq, char fill = 'p') {
    ASSERT_TRUE(producer->send_binary(frame_message(stream, seq, std::string(kFrameBytes, fill))));
  }
  // The stream's receivers in /stats (live and departed).
  json receivers() {
    const json s = live->stream_stats("main");
    return s["publishers"]["http"].value("receivers", json::array());
  }
  json receiver_stats(uint64_t id) {
    for (const auto& r : receivers())
      if (r["receiver"] == id) return r;
    return nullptr;
  }
  // offered = completed + dropped (all stages) + pending + in flight (docs/protocol.md, "Credit").
  static void expect_accounted(const json& r) {
    uint64_t dropped = 0;
    for (const auto& [stage, count] : r["dropped"].items()) dropped += count.get<uint64_t>();
    EXPECT_EQ(r["dropped_total"], dropped);
    EXPECT_EQ(r["offered"].get<uint64_t>(), r["completed"].get<uint64_t>() + dropped +
                                                r["pending"].get<uint64_t>() +
                                                r["in_flight"].get<uint64_t>())
        << r.dump();
  }
};

TEST_F(StreamReceiversTest, ARecordCarriesTheFramesHeaderAndPixels) {
  start();
  Receiver rx(*live, "/streams/main?ticket=" + ticket());
  ASSERT_EQ(rx.response().status, 200);
  EXPECT_EQ(rx.response().header("cache-control"), "no-store");
  EXPECT_FALSE(rx.response().has_header("Content-Length"));
  send_frame(7, 'q');
  const std::string record = rx.next_record();
  ASSERT_EQ(record.size(), kRecordBytes);
  EXPECT_EQ(field<uint32_t>(record, 0), server::kRecordMagic);
  EXPECT_EQ(field<uint16_t>(record, 4), 1);
  EXPECT_EQ(field<uint16_t>(record, 6), 64);
  EXPECT_EQ(field<uint64_t>(record, 8), 7u);      // the producer's sequence
  EXPECT_EQ(field<uint64_t>(record, 16), 7000u);  // its capture time
  EXPECT_GT(field<uint64_t>(record, 24), 0u);     // accept time
  EXPECT_EQ(field<uint32_t>(record, 32), 16u);
  EXPECT_EQ(field<uint32_t>(record, 36), 16u);
  EXPECT_EQ(field<uint32_t>(record, 40), 1u);  // rgba8
  EXPECT_EQ(field<uint32_t>(record, 56), kFrameBytes);
  EXPECT_EQ(field<uint32_t>(record, 60), 0u);  // nothing dropped before it
  EXPECT_EQ(record.substr(64), std::string(kFrameBytes, 'q'));
}

TEST_F(StreamReceiversTest, WithoutCreditOnlyTheNewestFrameWaitsAndCreditReleasesIt) {
  start();
  Receiver rx(*live, "/streams/main?ticket=" + ticket() + "&credit=1");
  ASSERT_EQ(rx.response().status, 200);
  send_frame(1);
  ASSERT_EQ(field<uint64_t>(rx.next_record(), 8), 1u);
  // Credit spent: frame 2 waits, 3 replaces it, 4 replaces 3.
  for (uint64_t seq = 2; seq <= 4; ++seq) send_frame(seq);
  ASSERT_TRUE(live->pump_until([&] { return receiver_stats(rx.id())["offered"] == 4; }));
  EXPECT_TRUE(rx.next_record(300).empty());  // nothing is sent without credit
  json r = receiver_stats(rx.id());
  EXPECT_EQ(r["credit"], 0);
  EXPECT_EQ(r["pending"], 1);
  EXPECT_EQ(r["dropped"]["admission"], 2);
  expect_accounted(r);
  // A credit message on any control connection sends the pending frame, saying what was lost.
  WsClient control(*live);
  control.hello();
  control.send_text(json({{"type", "credit"}, {"receiver", rx.id()}, {"frames", 1}}).dump());
  const std::string record = rx.next_record();
  ASSERT_EQ(record.size(), kRecordBytes);
  EXPECT_EQ(field<uint64_t>(record, 8), 4u);
  EXPECT_EQ(field<uint32_t>(record, 60), 2u);
  ASSERT_TRUE(live->pump_until([&] { return receiver_stats(rx.id())["completed"] == 2; }));
  r = receiver_stats(rx.id());
  EXPECT_EQ(r["pending"], 0);
  expect_accounted(r);
}

TEST_F(StreamReceiversTest, CreditPostedOverHttpReleasesThePendingFrame) {
  start();
  Receiver rx(*live, "/streams/main?ticket=" + ticket() + "&credit=1");
  send_frame(1);
  ASSERT_FALSE(rx.next_record().empty());
  send_frame(2);
  ASSERT_TRUE(live->pump_until([&] { return receiver_stats(rx.id())["pending"] == 1; }));
  const HttpResponse granted = http_exchange(
      *live,
      request_text("POST", "/streams/main/credit?receiver=" + std::to_string(rx.id()) + "&frames=1",
                   "Sync-Client: 1\r\n"));
  EXPECT_EQ(granted.status, 204);
  EXPECT_EQ(field<uint64_t>(rx.next_record(), 8), 2u);
}

TEST_F(StreamReceiversTest, CreditForNoReceiverIsUnknownReceiver) {
  start();
  const json error = producer->request({{"type", "credit"}, {"receiver", 4242}, {"frames", 1}});
  EXPECT_EQ(error["code"], "unknown_receiver");
}

TEST_F(StreamReceiversTest, EveryFrameOfferedIsAccountedForUnderABurst) {
  server::ServerConfig cfg = test_config();
  cfg.receiver_max_frames = 1;  // one frame's bytes in flight at most
  start(cfg);
  Receiver rx(*live, "/streams/main?ticket=" + ticket() + "&credit=16");
  for (uint64_t seq = 1; seq <= 40; ++seq) send_frame(seq);
  ASSERT_TRUE(live->pump_until([&] { return receiver_stats(rx.id())["offered"] == 40; }));
  // Read what was sent until nothing is in flight, then what is left in the socket.
  size_t records = 0;
  ASSERT_TRUE(live->pump_until([&] {
    while (!rx.next_record(1).empty()) ++records;
    return receiver_stats(rx.id())["in_flight"] == 0;
  }));
  while (!rx.next_record(300).empty()) ++records;
  const json r = receiver_stats(rx.id());
  expect_accounted(r);
  EXPECT_EQ(r["completed"].get<uint64_t>(), records);
  EXPECT_LE(r["pending"].get<uint64_t>(), 1u);
  EXPECT_LE(r["completed"].get<uint64_t>(), 16u);  // never past the credit granted
  EXPECT_GE(r["completed"].get<uint64_t>(), 1u);
}

TEST_F(StreamReceiversTest, OneTicketWithTwoUsesAdmitsTwoReceiversThatEachGetTheFrame) {
  start();
  const std::string two = ticket(2);
  Receiver a(*live, "/streams/main?ticket=" + two);
  Receiver b(*live, "/streams/main?ticket=" + two);
  ASSERT_EQ(a.response().status, 200);
  ASSERT_EQ(b.response().status, 200);
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(live->stats()["server"]["receivers"], 2u);
  send_frame(11);
  EXPECT_EQ(field<uint64_t>(a.next_record(), 8), 11u);
  EXPECT_EQ(field<uint64_t>(b.next_record(), 8), 11u);
}

TEST_F(StreamReceiversTest, ClosingTheStreamEndsTheResponseAndKeepsTheAccount) {
  start();
  Receiver rx(*live, "/streams/main?ticket=" + ticket());
  const uint64_t id = rx.id();
  send_frame(1);
  ASSERT_FALSE(rx.next_record().empty());
  producer->request({{"type", "stream.close"}, {"stream", stream}});
  EXPECT_TRUE(rx.ended());
  ASSERT_TRUE(live->pump_until([&] { return live->stats()["server"]["receivers"] == 0u; }));
  // The departed receiver's figures stay with the (closed) stream.
  const json r = receiver_stats(id);
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["live"], false);
  EXPECT_EQ(r["completed"], 1);
  EXPECT_EQ(r["cut_at_close"], false);
  expect_accounted(r);
}

TEST_F(StreamReceiversTest, AReceiverThatLeavesIsForgottenAndFramesGoOn) {
  start();
  auto rx = std::make_unique<Receiver>(*live, "/streams/main?ticket=" + ticket());
  ASSERT_EQ(live->stats()["server"]["receivers"], 1u);
  rx.reset();
  ASSERT_TRUE(live->pump_until([&] { return live->stats()["server"]["receivers"] == 0u; }));
  send_frame(1);
  ASSERT_TRUE(live->pump_until([&] { return live->stream_stats("main")["frames_accepted"] == 1; }));
  EXPECT_EQ(receivers()[0]["live"], false);
}

TEST_F(StreamReceiversTest, TheGetsCreditIsClampedToOneThroughSixteen) {
  start();
  const std::string three = ticket(3);
  Receiver high(*live, "/streams/main?ticket=" + three + "&credit=99999999999");
  Receiver zero(*live, "/streams/main?ticket=" + three + "&credit=0");
  Receiver empty(*live, "/streams/main?ticket=" + three + "&credit=");
  ASSERT_EQ(high.response().status, 200);
  ASSERT_EQ(zero.response().status, 200);
  ASSERT_EQ(empty.response().status, 200);
  EXPECT_EQ(receiver_stats(high.id())["credit"], 16);
  EXPECT_EQ(receiver_stats(zero.id())["credit"], 1);
  EXPECT_EQ(receiver_stats(empty.id())["credit"], 2);  // empty is the default
}

}  // namespace
