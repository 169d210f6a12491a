// A connected TCP socket tuned for pushing large frames, shared by the WebSocket and raw-TCP paths
// of sync-producer. Owned and used by the producer's single thread.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace syncd::producer {

enum class IoStatus {
  kOk,
  kPeerClosed,  // EOF, reset, or a listener asked to stop (e.g. a WebSocket Close arrived)
  kStalled,     // the peer took no bytes for the whole stall timeout
  kError,       // any other socket error; see StreamSocket::last_error()
};
const char* io_status_name(IoStatus status);

// How long a send may make no progress before the peer is declared stuck. Generous: a healthy
// syncd drains a frame in milliseconds, and a stuck one should fail the run, not hang it.
inline constexpr int kStallTimeoutMs = 10'000;

// Told when the socket turns readable while StreamSocket::write_all() waits for buffer space, so
// that a peer that talks while we send (pings, errors) is never left unread.
class ReadableListener {
 public:
  virtual ~ReadableListener() = default;
  // Consume what is readable. Return false to abandon the write (the peer is closing).
  virtual bool on_readable() = 0;
};

class StreamSocket {
 public:
  // The send buffer we ask for. Linux caps it at net.core.wmem_max (4 MiB here); half an 8 MB
  // frame in flight keeps loopback busy while we return to user space for the next writev.
  static constexpr int kSendBufferBytes = 4 << 20;

  // Resolves host (numeric or name), connects (blocking, so a refused port fails at once), then
  // switches to non-blocking with TCP_NODELAY and a large SO_SNDBUF. Throws ToolError(kExitIo).
  static StreamSocket connect(const std::string& host, uint16_t port);

  StreamSocket() = default;
  StreamSocket(StreamSocket&& other) noexcept;
  StreamSocket& operator=(StreamSocket&& other) noexcept;
  StreamSocket(const StreamSocket&) = delete;
  StreamSocket& operator=(const StreamSocket&) = delete;
  ~StreamSocket();

  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }

  // Writes every byte of iov[0..count) with sendmsg, resuming after partial writes by advancing
  // the iovecs in place (the caller's array is consumed). While the kernel buffer is full it
  // polls for writability, and for readability too when a listener is given. Never allocates.
  IoStatus write_all(iovec* iov, int count, ReadableListener* listener, int stall_timeout_ms);

  // Non-blocking read. Returns bytes read (> 0), 0 when nothing is available, or -1 on EOF or
  // error (then eof() tells which, and last_error() says why).
  ssize_t read_some(uint8_t* out, size_t capacity);

  // Blocks up to timeout_ms for readability; false on timeout. EINTR counts as a timeout so the
  // caller can look at its stop flag.
  bool wait_readable(int timeout_ms);

  void shutdown_write();
  void close();

  bool eof() const { return eof_; }
  const std::string& last_error() const { return last_error_; }
  // What the kernel granted for SO_SNDBUF (it reports double the usable amount on Linux).
  int send_buffer_bytes() const;

 private:
  explicit StreamSocket(int fd) : fd_(fd) {}
  IoStatus fail(int err, const char* what);

  int fd_ = -1;
  bool eof_ = false;
  std::string last_error_;
};

}  // namespace syncd::producer
