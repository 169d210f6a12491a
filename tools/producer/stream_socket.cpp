#include "stream_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tool_error.h"

namespace syncd::producer {

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "E?") + " (" + std::strerror(err) + ")";
}

const char* io_status_name(IoStatus status) {
  switch (status) {
    case IoStatus::kOk:
      return "ok";
    case IoStatus::kPeerClosed:
      return "peer closed";
    case IoStatus::kStalled:
      return "stalled";
    case IoStatus::kError:
      return "error";
  }
  return "?";
}

StreamSocket StreamSocket::connect(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw ToolError(kExitIo, "cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::string failure = "no address";
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      failure = "socket: " + errno_text(errno);
      continue;
    }
    // Ask for the big send buffer before connecting so that the window scale is negotiated for it.
    const int sndbuf = kSendBufferBytes;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      failure = "connect: " + errno_text(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    throw ToolError(kExitIo, "cannot connect to " + host + ":" + service + ": " + failure);

  // Frames are written whole with writev; Nagle would only hold back the small control messages
  // and the tail of each frame.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  return StreamSocket(fd);
}

StreamSocket::StreamSocket(StreamSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      eof_(other.eof_),
      last_error_(std::move(other.last_error_)) {}

StreamSocket& StreamSocket::operator=(StreamSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    eof_ = other.eof_;
    last_error_ = std::move(other.last_error_);
  }
  return *this;
}

StreamSocket::~StreamSocket() {
  close();
}

void StreamSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void StreamSocket::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

int StreamSocket::send_buffer_bytes() const {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &value, &len) != 0) return -1;
  return value;
}

IoStatus StreamSocket::fail(int err, const char* what) {
  last_error_ = std::string(what) + ": " + errno_text(err);
  if (err == EPIPE || err == ECONNRESET) return IoStatus::kPeerClosed;
  return IoStatus::kError;
}

IoStatus StreamSocket::write_all(iovec* iov, int count, ReadableListener* listener,
                                 int stall_timeout_ms) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    // sendmsg rather than writev for MSG_NOSIGNAL: a vanished peer is an EPIPE to report, not a
    // SIGPIPE that kills the process before it can print what it sent.
    const ssize_t sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (sent >= 0) {
      size_t left = static_cast<size_t>(sent);
      while (count > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        ++iov;
        --count;
      }
      if (count > 0) {
        iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
        iov->iov_len -= left;
      }
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return fail(errno, "send");

    pollfd pfd{fd_, static_cast<short>(POLLOUT | (listener ? POLLIN : 0)), 0};
    const int ready = ::poll(&pfd, 1, stall_timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "poll");
    }
    if (ready == 0) {
      last_error_ = "the peer accepted no data for " + std::to_string(stall_timeout_ms) + " ms";
      return IoStatus::kStalled;
    }
    if ((pfd.revents & POLLIN) && listener && !listener->on_readable()) {
      return IoStatus::kPeerClosed;
    }
    // POLLERR / POLLHUP: the next sendmsg reports the actual error.
  }
  return IoStatus::kOk;
}

ssize_t StreamSocket::read_some(uint8_t* out, size_t capacity) {
  for (;;) {
    const ssize_t got = ::recv(fd_, out, capacity, MSG_DONTWAIT);
    if (got > 0) return got;
    if (got == 0) {
      eof_ = true;
      last_error_ = "connection closed by peer";
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) eof_ = true;
    last_error_ = "recv: " + errno_text(errno);
    return -1;
  }
}

bool StreamSocket::wait_readable(int timeout_ms) {
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, timeout_ms) > 0;
}

}  // namespace syncd::producer
