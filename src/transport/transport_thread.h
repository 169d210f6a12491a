// The WAN relay's thread: its own libuv loop, the session's one UDP socket, timers, and the
// channels to and from syncd's main loop (docs/wan.md, "The path").
//
// The relay runs beside the main loop rather than on it: the main loop reads 500 MB/s of frames
// in 256 KiB windows and may be busy for a millisecond at a time, while the relay paces packets
// to a fraction of a frame interval and answers NACKs within the latency budget; and its crypto
// (DTLS handshakes, SRTP) then never delays ingest.
//
// What the relay does with datagrams, frames and time is its handler's (TransportHandler, the
// session); this class only carries them. Receives are batched with recvmmsg (libuv's
// UV_UDP_RECVMMSG) into one buffer allocated at start; sends are uv_udp_try_send, never queued
// by libuv: a datagram the kernel cannot take now is dropped and counted, and the pacer keeps
// that from happening.
//
// Threads: construct, start(), send_to_relay(), stop(), and the FromTransport callback: the main
// loop's thread. The handler, send_datagram() and send_to_main(): the relay thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "core/loop_channel.h"
#include "media/frame_pool.h"
#include "secure/certificate.h"
#include "transport/stream_description.h"

namespace syncd::transport {

// A request for the handler that the relay's own kinds do not cover (a WHEP egress adds and
// ends its browser sessions with these). Made on the main loop, owned by the handler from
// delivery on (it deletes it); control plane only.
struct HandlerCommand {
  virtual ~HandlerCommand() = default;
};

// From the main loop to the relay thread.
struct ToTransport {
  enum class Kind : uint8_t {
    kFrame,         // an access unit to send: slot pinned until it comes back as kFrameDone
    kStreamOpened,  // the relayed stream's description (sender)
    kStreamClosed,
    kBufferFree,       // the main loop is done with an incoming frame's buffer (receiver)
    kKeyframeRequest,  // the receiver's decoder waits for an IDR: send the sender a PLI
    kCommand,          // `command` for the handler, which takes ownership of it
  };
  Kind kind = Kind::kFrame;
  media::FrameSlot* slot = nullptr;
  HandlerCommand* command = nullptr;
  uint32_t stream_id = 0;
  uint32_t buffer = 0;
  uint64_t submitted_ns = 0;
  StreamDescription description;  // kStreamOpened
};

// From the relay thread to the main loop.
struct FromTransport {
  enum class Kind : uint8_t {
    kFrameDone,        // a kFrame came back: its slot may be unpinned; sent says whether it went
    kFrameIn,          // a complete access unit in buffer `buffer` (receiver)
    kDescription,      // the peer described its stream (receiver)
    kPeerEnded,        // the peer ended its stream or left
    kKeyframeRequest,  // the receiver asked for an IDR (a PLI): the sender's encoder makes one
    kTargetRate,       // the sender's send-rate target changed (target_bps): the encoder follows
    kHandshakeFailed,  // a handshake failed: failure, alert, fingerprint, address below
    kConnected,        // a handshake completed: the session has keys
  };
  Kind kind = Kind::kFrameDone;
  bool sent = false;
  media::FrameSlot* slot = nullptr;
  uint32_t stream_id = 0;
  uint32_t buffer = 0;
  const uint8_t* data = nullptr;  // kFrameIn: the access unit, valid until kBufferFree
  size_t bytes = 0;
  uint64_t sequence = 0;
  uint64_t content_hash = 0;
  uint64_t capture_time_us = 0;
  uint32_t flags = 0;
  uint64_t sender_accept_ns = 0;
  uint64_t complete_ns = 0;  // relay thread's CLOCK_MONOTONIC when the frame was complete
  uint64_t target_bps = 0;   // kTargetRate
  // kTargetRate: what an encoder may spend of the target, the sender's FEC, retransmissions and
  // packet headers taken off as it measured them (0: not measured; the encoder takes its own
  // configured share).
  uint64_t media_bps = 0;
  // kFrameIn: the relay lost an access unit of this stream since the one before this (the
  // jitter buffer gave one up, or it could not be handed over, or the sender restarted), so a
  // decoder's chain of references is broken. A gap in `sequence` alone is not that: a sender
  // drops raw frames before its encoder, which never sees them.
  bool loss_before = false;
  StreamDescription description;  // kDescription
  // kHandshakeFailed: why (secure::DtlsFailure), the peer's fatal alert (0: none), the
  // certificate fingerprint the peer presented (when fingerprint_seen), where the handshake came
  // from (a receiver's; address_bytes() of its sockaddr), and whether the session is now failed
  // (an identity failure before any keys: RelaySession::State::kFailed).
  uint8_t failure = 0;
  uint8_t alert = 0;
  bool fingerprint_seen = false;
  bool session_failed = false;
  secure::Fingerprint fingerprint{};
  std::array<uint8_t, 32> address{};
  uint8_t address_size = 0;
};

class TransportThread;

// What the relay does; implemented by the session. Every method runs on the relay thread.
class TransportHandler {
 public:
  virtual ~TransportHandler() = default;
  // The relay thread's loop has started; the socket is bound (and connected, for a sender).
  virtual void on_start(TransportThread& thread, uint64_t now_ns) = 0;
  // A datagram arrived; `from` is its source address. The bytes are valid during the call.
  virtual void on_datagram(std::span<uint8_t> datagram, const sockaddr_storage& from,
                           uint64_t now_ns) = 0;
  virtual void on_message(ToTransport& message, uint64_t now_ns) = 0;
  // The handler's timer, armed with TransportThread::arm_timer().
  virtual void on_timer(uint64_t now_ns) = 0;
  // The relay is stopping: give back whatever the main loop lent (kFrameDone for every slot).
  virtual void on_stop(uint64_t now_ns) = 0;
};

struct TransportThreadConfig {
  std::string bind_host = "0.0.0.0";
  uint16_t bind_port = 0;  // 0: any (a sender's)
  std::string peer_host;   // a sender's peer: the socket is connected to it
  uint16_t peer_port = 0;
  int socket_buffer_bytes = 4 << 20;  // SO_SNDBUF and SO_RCVBUF asked of the kernel
};

// Counted on the relay thread, read anywhere (relaxed atomics: figures for /stats).
struct SocketCounters {
  std::atomic<uint64_t> datagrams_received{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> datagrams_sent{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> send_dropped{0};  // the kernel would not take it now (EAGAIN, ENOBUFS)
  std::atomic<uint64_t> send_errors{0};   // any other send error (ECONNREFUSED: no peer yet)
  std::atomic<uint64_t> receive_errors{0};
  std::atomic<uint64_t> receive_batches{0};  // system calls that returned datagrams
  std::atomic<uint64_t> to_main_refused{0};  // the channel to the main loop was full
};

class TransportThread {
 public:
  using FromTransportFn = void (*)(FromTransport& message, void* context);  // main loop thread

  TransportThread(TransportThreadConfig config, std::unique_ptr<TransportHandler> handler,
                  FromTransportFn from_relay, void* context);
  ~TransportThread();
  TransportThread(const TransportThread&) = delete;
  TransportThread& operator=(const TransportThread&) = delete;

  // Main loop: opens the channels, binds (and for a sender connects) the socket, so an address
  // in use is said at start-up, then starts the thread. False with a sentence in error.
  bool start(uv_loop_t* main_loop, std::string& error);
  // Main loop: lets the handler give back what it holds, stops the thread and joins it, then
  // delivers what it sent back. Idempotent.
  void stop();
  // Main loop. False when the channel is full (the caller counts the drop).
  bool send_to_relay(const ToTransport& message) { return to_relay_.send(message); }
  // The port the socket is bound to (after start()).
  uint16_t local_port() const { return local_port_; }
  const SocketCounters& counters() const { return counters_; }

  // ---- relay thread only ----
  // Sends one datagram to the connected peer (to = nullptr) or to `to`. False when dropped.
  bool send_datagram(std::span<const uint8_t> datagram, const sockaddr* to = nullptr);
  // False when the channel to the main loop is full (counted in to_main_refused).
  bool send_to_main(const FromTransport& message);
  // Calls the handler's on_timer() once after delay_ns (rounded up to the loop's millisecond),
  // replacing any earlier arming.
  void arm_timer(uint64_t delay_ns);

  static constexpr size_t kChannelDepth = 256;

 private:
  static void on_to_relay(ToTransport& message, void* self);
  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_receive(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf, const sockaddr* from,
                         unsigned flags);
  static void on_timer(uv_timer_t* timer);
  static void on_stop_async(uv_async_t* async);
  void run();

  TransportThreadConfig config_;
  std::unique_ptr<TransportHandler> handler_;
  FromTransportFn from_relay_;
  void* context_;
  uv_loop_t loop_{};
  bool loop_open_ = false;
  uv_udp_t udp_{};
  uv_timer_t timer_{};
  uv_async_t stop_async_{};
  core::LoopChannel<ToTransport, kChannelDepth> to_relay_;   // received on the relay loop
  core::LoopChannel<FromTransport, kChannelDepth> to_main_;  // received on the main loop
  std::unique_ptr<uint8_t[]> receive_buffer_;  // recvmmsg: kReceiveBatch datagrams of 64 KiB
  bool receive_buffer_lent_ = false;
  uint16_t local_port_ = 0;
  std::thread thread_;
  bool running_ = false;
  SocketCounters counters_;
};

}  // namespace syncd::transport
