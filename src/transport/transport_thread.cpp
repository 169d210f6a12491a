#include "transport/transport_thread.h"

#include <netdb.h>
#include <pthread.h>

#include <cstring>

#include "core/clock.h"

namespace syncd::transport {

namespace {

// libuv hands recvmmsg one 64 KiB slot per datagram (UV__UDP_DGRAM_MAXSIZE); 16 of them take
// up to 16 datagrams a system call, about 8 ms of a 20 Mbit/s stream at once.
constexpr size_t kDatagramSlot = 64 * 1024;
constexpr size_t kReceiveBatch = 16;

bool resolve(const std::string& host, uint16_t port, sockaddr_storage& out, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || !found) {
    error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  return true;
}

}  // namespace

TransportThread::TransportThread(TransportThreadConfig config,
                             std::unique_ptr<TransportHandler> handler, FromTransportFn from_relay,
                             void* context)
    : config_(std::move(config)),
      handler_(std::move(handler)),
      from_relay_(from_relay),
      context_(context) {}

TransportThread::~TransportThread() {
  stop();
}

bool TransportThread::start(uv_loop_t* main_loop, std::string& error) {
  sockaddr_storage bind_addr{};
  if (!resolve(config_.bind_host, config_.bind_port, bind_addr, error)) return false;
  sockaddr_storage peer{};
  const bool connect = !config_.peer_host.empty();
  if (connect && !resolve(config_.peer_host, config_.peer_port, peer, error)) return false;
  if (connect && peer.ss_family != bind_addr.ss_family) {
    // A sender binds the peer's family: "0.0.0.0" cannot reach an IPv6 peer.
    if (!resolve(peer.ss_family == AF_INET6 ? "::" : "0.0.0.0", config_.bind_port, bind_addr,
                 error))
      return false;
  }
  if (int rc = uv_loop_init(&loop_); rc != 0) {
    error = std::string("relay loop: ") + uv_strerror(rc);
    return false;
  }
  loop_open_ = true;
  auto fail = [&](const char* what, int rc) {
    error = std::string(what) + ": " + uv_strerror(rc);
    // Nothing runs yet: close what was opened and let the loop finish closing it.
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    loop_open_ = false;
    return false;
  };
  int rc = uv_udp_init_ex(&loop_, &udp_, bind_addr.ss_family | UV_UDP_RECVMMSG);
  if (rc != 0) return fail("relay socket", rc);
  udp_.data = this;
  rc = uv_udp_bind(&udp_, reinterpret_cast<const sockaddr*>(&bind_addr), 0);
  if (rc != 0) return fail("relay socket bind", rc);
  if (connect) {
    rc = uv_udp_connect(&udp_, reinterpret_cast<const sockaddr*>(&peer));
    if (rc != 0) return fail("relay socket connect", rc);
  }
  int size = config_.socket_buffer_bytes;
  uv_send_buffer_size(reinterpret_cast<uv_handle_t*>(&udp_), &size);
  size = config_.socket_buffer_bytes;
  uv_recv_buffer_size(reinterpret_cast<uv_handle_t*>(&udp_), &size);
  sockaddr_storage local{};
  int local_len = sizeof(local);
  uv_udp_getsockname(&udp_, reinterpret_cast<sockaddr*>(&local), &local_len);
  local_port_ =
      ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  receive_buffer_ = std::make_unique<uint8_t[]>(kDatagramSlot * kReceiveBatch);
  rc = uv_udp_recv_start(&udp_, &TransportThread::on_alloc, &TransportThread::on_receive);
  if (rc != 0) return fail("relay socket receive", rc);
  uv_timer_init(&loop_, &timer_);
  timer_.data = this;
  uv_async_init(&loop_, &stop_async_, &TransportThread::on_stop_async);
  stop_async_.data = this;
  if ((rc = to_relay_.open(&loop_, &TransportThread::on_to_relay, this)) != 0)
    return fail("relay channel", rc);
  if ((rc = to_main_.open(
           main_loop,
           [](FromTransport& m, void* self) {
             auto* t = static_cast<TransportThread*>(self);
             t->from_relay_(m, t->context_);
           },
           this)) != 0)
    return fail("relay channel", rc);
  running_ = true;
  thread_ = std::thread([this] { run(); });
  return true;
}

void TransportThread::run() {
  // Named so that top -H, perf and the qualification harness (which reads this thread's CPU
  // time from /proc/PID/task/TID/stat) can tell it apart from the loop.
  pthread_setname_np(pthread_self(), "sync-relay");
  handler_->on_start(*this, core::monotonic_ns());
  uv_run(&loop_, UV_RUN_DEFAULT);
}

void TransportThread::stop() {
  if (running_) {
    uv_async_send(&stop_async_);
    thread_.join();
    running_ = false;
    to_main_.close();  // delivers what the relay sent back, the handler's kFrameDone included
  }
  if (loop_open_) {
    uv_loop_close(&loop_);
    loop_open_ = false;
  }
}

void TransportThread::on_stop_async(uv_async_t* async) {
  auto* self = static_cast<TransportThread*>(async->data);
  const uint64_t now = core::monotonic_ns();
  // What the main loop sent before stopping is handled first, then the handler returns it all.
  self->to_relay_.close();
  self->handler_->on_stop(now);
  uv_udp_recv_stop(&self->udp_);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->udp_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_async_), nullptr);
}

void TransportThread::on_to_relay(ToTransport& message, void* self) {
  auto* t = static_cast<TransportThread*>(self);
  t->handler_->on_message(message, core::monotonic_ns());
}

void TransportThread::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<TransportThread*>(handle->data);
  // One buffer, lent for one batch at a time: libuv hands every datagram of a batch to
  // on_receive before it asks for a buffer again.
  self->receive_buffer_lent_ = true;
  *buf = uv_buf_init(reinterpret_cast<char*>(self->receive_buffer_.get()),
                     unsigned(kDatagramSlot * kReceiveBatch));
}

void TransportThread::on_receive(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf,
                                 const sockaddr* from, unsigned flags) {
  auto* self = static_cast<TransportThread*>(udp->data);
  if (flags & UV_UDP_MMSG_FREE) {  // a recvmmsg batch is over
    self->receive_buffer_lent_ = false;
    self->counters_.receive_batches.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (nread < 0) {
    self->counters_.receive_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (nread == 0 || from == nullptr) return;  // nothing more to read now
  if (!(flags & UV_UDP_MMSG_CHUNK))           // read alone, without recvmmsg: a batch of one
    self->counters_.receive_batches.fetch_add(1, std::memory_order_relaxed);
  self->counters_.datagrams_received.fetch_add(1, std::memory_order_relaxed);
  self->counters_.bytes_received.fetch_add(uint64_t(nread), std::memory_order_relaxed);
  sockaddr_storage source{};
  std::memcpy(&source, from,
              from->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  self->handler_->on_datagram({reinterpret_cast<uint8_t*>(buf->base), size_t(nread)}, source,
                              core::monotonic_ns());
}

bool TransportThread::send_datagram(std::span<const uint8_t> datagram, const sockaddr* to) {
  uv_buf_t b = uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(datagram.data())),
                           unsigned(datagram.size()));
  const int rc = uv_udp_try_send(&udp_, &b, 1, to);
  if (rc >= 0) {
    counters_.datagrams_sent.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_sent.fetch_add(datagram.size(), std::memory_order_relaxed);
    return true;
  }
  if (rc == UV_EAGAIN || rc == UV_ENOBUFS)
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
  else
    counters_.send_errors.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool TransportThread::send_to_main(const FromTransport& message) {
  if (to_main_.send(message)) return true;
  counters_.to_main_refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void TransportThread::arm_timer(uint64_t delay_ns) {
  uv_timer_start(&timer_, &TransportThread::on_timer, (delay_ns + 999'999) / 1'000'000, 0);
}

void TransportThread::on_timer(uv_timer_t* timer) {
  auto* self = static_cast<TransportThread*>(timer->data);
  self->handler_->on_timer(core::monotonic_ns());
}

}  // namespace syncd::transport
