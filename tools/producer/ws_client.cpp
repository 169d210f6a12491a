#include "ws_client.h"

#include <sys/random.h>
#include <time.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "net/ws/frame_encoder.h"
#include "net/ws/unmask.h"
#include "tool_error.h"

namespace syncd::producer {
namespace {

constexpr size_t kMaxHandshakeResponseBytes = 16 << 10;
constexpr size_t kMaxControlPayload = 125;  // RFC 6455 section 5.5

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

void fill_random(void* out, size_t size) {
  auto* p = static_cast<uint8_t*>(out);
  while (size > 0) {
    const ssize_t got = ::getrandom(p, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw ToolError(kExitIo, "getrandom: " + errno_text(errno));
    }
    p += got;
    size -= static_cast<size_t>(got);
  }
}

uint32_t random_u32() {
  uint32_t value;
  fill_random(&value, sizeof value);
  return value;
}

std::string base64(const uint8_t* data, size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t a = data[i];
    const uint32_t b = i + 1 < size ? data[i + 1] : 0;
    const uint32_t c = i + 2 < size ? data[i + 2] : 0;
    const uint32_t triple = (a << 16) | (b << 8) | c;
    out.push_back(kAlphabet[(triple >> 18) & 63]);
    out.push_back(kAlphabet[(triple >> 12) & 63]);
    out.push_back(i + 1 < size ? kAlphabet[(triple >> 6) & 63] : '=');
    out.push_back(i + 2 < size ? kAlphabet[triple & 63] : '=');
  }
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

WsClient::Url WsClient::parse_url(std::string_view url) {
  constexpr std::string_view kScheme = "ws://";
  if (url.substr(0, 6) == "wss://") {
    throw ToolError(kExitUsage, "wss:// is not supported (syncd serves plain ws:// on loopback)");
  }
  if (url.substr(0, kScheme.size()) != kScheme) {
    throw ToolError(kExitUsage,
                    "--url must look like ws://HOST:PORT/PATH, got " + std::string(url));
  }
  std::string_view rest = url.substr(kScheme.size());
  Url out;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));

  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw ToolError(kExitUsage, "unterminated [ in --url");
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw ToolError(kExitUsage, "bad host in --url");
      port_text = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) throw ToolError(kExitUsage, "--url has no host");
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      throw ToolError(kExitUsage, "bad port in --url: " + std::string(port_text));
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

WsClient::WsClient(const Url& url, int timeout_ms) : input_(kInputBufferBytes) {
  pending_pong_.reserve(kMaxControlPayload);
  socket_ = StreamSocket::connect(url.host, url.port);
  data_mask_key_ = random_u32();

  std::array<uint8_t, 16> nonce;
  fill_random(nonce.data(), nonce.size());
  const std::string client_key = base64(nonce.data(), nonce.size());
  const bool ipv6_literal = url.host.find(':') != std::string::npos;
  const std::string host_header =
      (ipv6_literal ? "[" + url.host + "]" : url.host) + ":" + std::to_string(url.port);
  // No Origin header: syncd refuses foreign origins, and a native client has none to claim.
  std::string request = "GET " + url.path + " HTTP/1.1\r\n" + "Host: " + host_header + "\r\n" +
                        "Upgrade: websocket\r\n" + "Connection: Upgrade\r\n" +
                        "Sec-WebSocket-Key: " + client_key + "\r\n" +
                        "Sec-WebSocket-Version: 13\r\n\r\n";
  iovec iov{request.data(), request.size()};
  if (IoStatus status = socket_.write_all(&iov, 1, nullptr, timeout_ms); status != IoStatus::kOk) {
    throw ToolError(kExitIo, "sending the upgrade request failed: " + socket_.last_error());
  }
  read_handshake_response(client_key, timeout_ms);
}

void WsClient::read_handshake_response(const std::string& client_key, int timeout_ms) {
  const int64_t deadline = monotonic_ms() + timeout_ms;
  size_t header_end = std::string_view::npos;
  while (header_end == std::string_view::npos) {
    const std::string_view seen(reinterpret_cast<const char*>(input_.data()), input_bytes_);
    header_end = seen.find("\r\n\r\n");
    if (header_end != std::string_view::npos) break;
    if (input_bytes_ >= kMaxHandshakeResponseBytes) {
      throw ToolError(kExitIo, "the server's upgrade response has no end of headers");
    }
    const int64_t left = deadline - monotonic_ms();
    if (left <= 0) throw ToolError(kExitIo, "timed out waiting for the upgrade response");
    socket_.wait_readable(static_cast<int>(left));
    const ssize_t got =
        socket_.read_some(input_.data() + input_bytes_, kMaxHandshakeResponseBytes - input_bytes_);
    if (got < 0) throw ToolError(kExitIo, "during the upgrade: " + socket_.last_error());
    input_bytes_ += static_cast<size_t>(got);
  }

  const std::string_view head(reinterpret_cast<const char*>(input_.data()), header_end);
  const size_t status_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, status_end);
  // "HTTP/1.1 101 Switching Protocols"
  const size_t space = status_line.find(' ');
  const std::string_view code =
      space == std::string_view::npos ? std::string_view{} : status_line.substr(space + 1, 3);
  if (status_line.substr(0, 5) != "HTTP/" || code != "101") {
    throw ToolError(kExitRefused,
                    "the server refused the WebSocket upgrade: " + std::string(status_line));
  }

  std::string upgrade, accept;
  size_t pos = status_end == std::string_view::npos ? head.size() : status_end + 2;
  while (pos < head.size()) {
    size_t eol = head.find("\r\n", pos);
    if (eol == std::string_view::npos) eol = head.size();
    const std::string_view line = head.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      const std::string name = lowercase(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      if (name == "upgrade") upgrade = lowercase(value);
      if (name == "sec-websocket-accept") accept = std::string(value);
    }
    pos = eol + 2;
  }
  if (upgrade != "websocket") {
    throw ToolError(kExitIo, "the 101 response lacks 'Upgrade: websocket'");
  }
  const std::string expected = ws::accept_key(client_key);
  if (expected.empty() || accept != expected) {
    throw ToolError(kExitIo, "wrong Sec-WebSocket-Accept in the upgrade response ('" + accept +
                                 "', expected '" + expected + "')");
  }

  // Whatever followed the headers already belongs to the WebSocket stream.
  const size_t consumed = header_end + 4;
  std::memmove(input_.data(), input_.data() + consumed, input_bytes_ - consumed);
  input_bytes_ -= consumed;
  parse_frames();
}

void WsClient::fail(std::string reason) {
  if (failure_.empty()) failure_ = std::move(reason);
}

std::string WsClient::end_description() const {
  if (peer_closed_) {
    std::string text =
        "the server closed the connection with code " + std::to_string(peer_close_code_);
    if (!peer_close_reason_.empty()) text += " (" + peer_close_reason_ + ")";
    return text;
  }
  if (!failure_.empty()) return failure_;
  return "the connection ended";
}

bool WsClient::read_available() {
  while (!peer_closed_ && failure_.empty()) {
    // parse_frames() fails any frame larger than the buffer, so a full buffer cannot happen here;
    // the check keeps a zero-length recv from being mistaken for EOF all the same.
    if (input_bytes_ == input_.size()) {
      fail("input buffer full");
      break;
    }
    const ssize_t got =
        socket_.read_some(input_.data() + input_bytes_, input_.size() - input_bytes_);
    if (got == 0) break;
    if (got < 0) {
      // A server that closes properly sends its Close frame first; parse_frames() saw it.
      fail(socket_.eof() ? "the server dropped the connection without a Close frame"
                         : socket_.last_error());
      break;
    }
    input_bytes_ += static_cast<size_t>(got);
    parse_frames();
  }
  return !peer_closed_ && failure_.empty();
}

void WsClient::parse_frames() {
  size_t pos = 0;
  while (!peer_closed_ && failure_.empty()) {
    const uint8_t* frame = input_.data() + pos;
    const size_t available = input_bytes_ - pos;
    if (available < 2) break;
    // RFC 6455 section 5.2: FIN RSV1-3 opcode | MASK payload-len [extended length]
    const bool fin = (frame[0] & 0x80) != 0;
    const uint8_t rsv = frame[0] & 0x70;
    const auto opcode = static_cast<ws::Opcode>(frame[0] & 0x0F);
    const bool masked = (frame[1] & 0x80) != 0;
    uint64_t payload_bytes = frame[1] & 0x7F;
    size_t header_bytes = 2;
    if (payload_bytes == 126) header_bytes = 4;
    if (payload_bytes == 127) header_bytes = 10;
    if (available < header_bytes) break;
    if (header_bytes > 2) {
      payload_bytes = 0;
      for (size_t i = 2; i < header_bytes; ++i) payload_bytes = (payload_bytes << 8) | frame[i];
    }
    if (masked || rsv != 0) {
      fail("protocol error: the server sent a masked frame or set RSV bits");
      break;
    }
    if (!fin || opcode == ws::Opcode::kContinuation) {
      fail("protocol error: the server fragmented a message, which this client does not expect");
      break;
    }
    if (payload_bytes > input_.size() - header_bytes) {
      fail("the server sent a " + std::to_string(payload_bytes) +
           "-byte message; this client reads at most " + std::to_string(input_.size()));
      break;
    }
    if (available < header_bytes + payload_bytes) break;
    dispatch(opcode, frame + header_bytes, static_cast<size_t>(payload_bytes));
    pos += header_bytes + static_cast<size_t>(payload_bytes);
  }
  if (pos > 0) {
    std::memmove(input_.data(), input_.data() + pos, input_bytes_ - pos);
    input_bytes_ -= pos;
  }
}

void WsClient::dispatch(ws::Opcode opcode, const uint8_t* payload, size_t size) {
  switch (opcode) {
    case ws::Opcode::kText:
      texts_.emplace_back(reinterpret_cast<const char*>(payload), size);
      return;
    case ws::Opcode::kBinary:
      return;  // syncd sends producers no binary messages; ignore any
    case ws::Opcode::kPing:
      pending_pong_.assign(reinterpret_cast<const char*>(payload), size);
      pong_due_ = true;
      return;
    case ws::Opcode::kPong:
      return;
    case ws::Opcode::kClose:
      peer_closed_ = true;
      if (size >= 2) {
        peer_close_code_ = static_cast<uint16_t>((payload[0] << 8) | payload[1]);
        peer_close_reason_.assign(reinterpret_cast<const char*>(payload) + 2, size - 2);
      }
      return;
    case ws::Opcode::kContinuation:
      break;
  }
  fail("protocol error: unknown opcode " + std::to_string(static_cast<int>(opcode)));
}

IoStatus WsClient::send_small(ws::Opcode opcode, std::string_view payload) {
  // Control and text frames get their own fresh key, as RFC 6455 section 5.3 asks; only the bulk
  // frames share the connection key (see data_mask_key()).
  const uint32_t key = random_u32();
  uint8_t header[ws::kMaxClientHeaderBytes];
  const size_t header_bytes = ws::encode_client_header(header, opcode, payload.size(), key);
  // Reused scratch: a receiver sends a credit message per frame, which must not allocate.
  std::string& masked = masked_scratch_;
  masked.assign(payload.data(), payload.size());
  ws::unmask(reinterpret_cast<uint8_t*>(masked.data()), masked.size(), key, 0);
  iovec iov[2] = {{header, header_bytes}, {masked.data(), masked.size()}};
  return socket_.write_all(iov, 2, this, kStallTimeoutMs);
}

bool WsClient::answer_ping() {
  if (!pong_due_) return true;
  pong_due_ = false;
  if (send_small(ws::Opcode::kPong, pending_pong_) != IoStatus::kOk) {
    fail("sending a pong failed: " + socket_.last_error());
    return false;
  }
  return true;
}

void WsClient::send_text(std::string_view text) {
  if (send_small(ws::Opcode::kText, text) != IoStatus::kOk) {
    throw ToolError(kExitIo, "sending a control message failed: " +
                                 (failure_.empty() ? socket_.last_error() : end_description()));
  }
}

std::string WsClient::wait_for_text(int timeout_ms) {
  const int64_t deadline = monotonic_ms() + timeout_ms;
  for (;;) {
    if (!texts_.empty()) {
      std::string text = std::move(texts_.front());
      texts_.pop_front();
      return text;
    }
    if (peer_closed_) throw ToolError(kExitRefused, end_description());
    if (!failure_.empty()) throw ToolError(kExitIo, failure_);
    const int64_t left = deadline - monotonic_ms();
    if (left <= 0) throw ToolError(kExitIo, "timed out waiting for the server's reply");
    socket_.wait_readable(static_cast<int>(left));
    read_available();
    answer_ping();
  }
}

IoStatus WsClient::send_frame(iovec* iov, int count) {
  const IoStatus status = socket_.write_all(iov, count, this, kStallTimeoutMs);
  if (status != IoStatus::kOk) {
    frame_abandoned_ = true;
    if (failure_.empty() && !peer_closed_) fail(socket_.last_error());
  }
  return status;
}

bool WsClient::service() {
  return read_available() && answer_ping();
}

bool WsClient::next_text(std::string& out) {
  if (texts_.empty()) return false;
  out = std::move(texts_.front());
  texts_.pop_front();
  return true;
}

bool WsClient::close(uint16_t code, int wait_ms) {
  if (failure_.empty() && !frame_abandoned_) {
    // Also when the server closed first: RFC 6455 section 5.5.1 asks the other end to echo it.
    if (send_small(ws::Opcode::kClose, ws::close_payload(code, "")) != IoStatus::kOk &&
        !peer_closed_) {
      fail("sending Close failed: " + socket_.last_error());
    }
  }
  const int64_t deadline = monotonic_ms() + wait_ms;
  while (!peer_closed_ && failure_.empty()) {
    const int64_t left = deadline - monotonic_ms();
    if (left <= 0) break;
    socket_.wait_readable(static_cast<int>(left));
    read_available();
  }
  socket_.close();
  return peer_closed_;
}

}  // namespace syncd::producer
