#include "naud_client.h"

#include <sys/random.h>
#include <time.h>

#include <cstring>

#include "../producer/tool_error.h"
#include "net/ws/frame_encoder.h"
#include "net/ws/unmask.h"

namespace syncd::audio_reader {

namespace {
int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}
uint32_t random_u32() {
  uint32_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != sizeof v) v = uint32_t(now_ms()) * 2654435761u;
  return v;
}
std::string base64_16(const uint8_t* d) {
  static constexpr char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (int i = 0; i < 16; i += 3) {
    const uint32_t a = d[i], b = i + 1 < 16 ? d[i + 1] : 0, c = i + 2 < 16 ? d[i + 2] : 0;
    const uint32_t t = (a << 16) | (b << 8) | c;
    out.push_back(k[(t >> 18) & 63]);
    out.push_back(k[(t >> 12) & 63]);
    out.push_back(i + 1 < 16 ? k[(t >> 6) & 63] : '=');
    out.push_back(i + 2 < 16 ? k[t & 63] : '=');
  }
  return out;
}
}  // namespace

NaudClient::NaudClient(const std::string& host, uint16_t port, const std::string& path,
                       size_t max_message, int timeout_ms)
    : buffer_(max_message + 64 * 1024) {
  using producer::ToolError;
  socket_ = producer::StreamSocket::connect(host, port);
  uint8_t nonce[16];
  for (int i = 0; i < 16; i += 4) {
    const uint32_t r = random_u32();
    std::memcpy(nonce + i, &r, 4);
  }
  const std::string key = base64_16(nonce);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
                    "\r\nSec-WebSocket-Version: 13\r\n\r\n";
  iovec iov{req.data(), req.size()};
  if (socket_.write_all(&iov, 1, nullptr, timeout_ms) != producer::IoStatus::kOk)
    throw ToolError(producer::kExitIo, "sending the upgrade failed: " + socket_.last_error());
  const int64_t deadline = now_ms() + timeout_ms;
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    if (!fill(int(std::max<int64_t>(1, deadline - now_ms()))) || now_ms() > deadline)
      throw ToolError(producer::kExitIo, "no upgrade response: " + failure_);
    head_end = std::string_view(reinterpret_cast<char*>(buffer_.data()), end_).find("\r\n\r\n");
  }
  const std::string head(reinterpret_cast<char*>(buffer_.data()), head_end);
  if (head.compare(0, 12, "HTTP/1.1 101") != 0)
    throw ToolError(producer::kExitRefused, "upgrade refused: " + head.substr(0, head.find('\r')));
  if (head.find(ws::accept_key(key)) == std::string::npos)
    throw ToolError(producer::kExitIo, "wrong Sec-WebSocket-Accept");
  begin_ = head_end + 4;
}

bool NaudClient::fill(int timeout_ms) {
  if (begin_ > 0 && begin_ == end_) begin_ = end_ = 0;
  if (end_ == buffer_.size()) {
    if (begin_ == 0) {
      failure_ = "message larger than the read buffer";
      return false;
    }
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  for (;;) {
    const ssize_t got = socket_.read_some(buffer_.data() + end_, buffer_.size() - end_);
    if (got > 0) {
      end_ += size_t(got);
      return true;
    }
    if (got < 0) {
      failure_ = socket_.eof() ? "server closed the connection" : socket_.last_error();
      return false;
    }
    if (!socket_.wait_readable(timeout_ms)) {
      failure_ = "timed out";
      return false;
    }
  }
}

bool NaudClient::next_message(int timeout_ms, ws::Opcode& opcode, const uint8_t*& payload,
                              size_t& size) {
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    const size_t avail = end_ - begin_;
    const uint8_t* f = buffer_.data() + begin_;
    if (avail >= 2) {
      uint64_t len = f[1] & 0x7F;
      size_t hdr = 2;
      if (len == 126) hdr = 4;
      if (len == 127) hdr = 10;
      if (avail >= hdr) {
        if (hdr > 2) {
          len = 0;
          for (size_t i = 2; i < hdr; ++i) len = (len << 8) | f[i];
        }
        if (len + hdr > buffer_.size()) {
          failure_ = "server message of " + std::to_string(len) + " bytes is too large";
          return false;
        }
        if (avail >= hdr + len) {
          const auto op = ws::Opcode(f[0] & 0x0F);
          begin_ += hdr + size_t(len);
          if (op == ws::Opcode::kPing) {
            send_frame(ws::Opcode::kPong,
                       std::string_view(reinterpret_cast<const char*>(f + hdr), size_t(len)));
            continue;
          }
          if (op == ws::Opcode::kPong) continue;
          if (op == ws::Opcode::kClose) {
            failure_ = "server sent Close";
            return false;
          }
          opcode = op;
          payload = f + hdr;
          size = size_t(len);
          return true;
        }
        // Make room for the rest of a large message at the front of the buffer.
        if (begin_ > 0 && buffer_.size() - begin_ < hdr + len) {
          std::memmove(buffer_.data(), buffer_.data() + begin_, avail);
          end_ = avail;
          begin_ = 0;
        }
      }
    }
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      failure_ = "timed out waiting for the server";
      return false;
    }
    if (!fill(int(left))) return false;
  }
}

void NaudClient::send_frame(ws::Opcode opcode, std::string_view payload) {
  const uint32_t key = random_u32();
  uint8_t header[ws::kMaxClientHeaderBytes];
  const size_t h = ws::encode_client_header(header, opcode, payload.size(), key);
  std::string masked(payload);
  ws::unmask(reinterpret_cast<uint8_t*>(masked.data()), masked.size(), key, 0);
  iovec iov[2] = {{header, h}, {masked.data(), masked.size()}};
  if (socket_.write_all(iov, 2, nullptr, producer::kStallTimeoutMs) != producer::IoStatus::kOk)
    failure_ = "send failed: " + socket_.last_error();
}

void NaudClient::send_text(std::string_view text) {
  send_frame(ws::Opcode::kText, text);
}

void NaudClient::close() {
  send_frame(ws::Opcode::kClose, ws::close_payload(1000, ""));
  socket_.close();
}

}  // namespace syncd::audio_reader
