#include "net/http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace syncd::http {

std::string_view Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

bool Request::has_header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return true;
  return false;
}

std::string_view Request::path() const {
  std::string_view t = target;
  const size_t q = t.find('?');
  return q == std::string_view::npos ? t : t.substr(0, q);
}

RequestParser::RequestParser(RequestLimits limits) : limits_(limits) {
  http_parser_settings_init(&settings_);
  settings_.on_url = &RequestParser::on_url;
  settings_.on_header_field = &RequestParser::on_header_field;
  settings_.on_header_value = &RequestParser::on_header_value;
  settings_.on_headers_complete = &RequestParser::on_headers_complete;
  settings_.on_body = &RequestParser::on_body;
  settings_.on_message_complete = &RequestParser::on_message_complete;
  reset();
}

void RequestParser::reset() {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  request_ = Request{};
  head_bytes_ = 0;
  consumed_ = 0;
  in_value_ = false;
  complete_ = false;
  too_large_ = false;
  has_body_ = false;
  body_too_large_ = false;
  head_done_ = false;
  scan_part_ = ScanPart::kBeforeRequestLine;
  after_cr_ = false;
  line_start_ = false;
  in_name_ = false;
  std::memset(line_tail_, 0, sizeof line_tail_);
  line_bytes_ = 0;
  error_reason_ = "";
}

ParseStatus RequestParser::scan_head(const char* data, size_t size) {
  for (size_t i = 0; i < size && scan_part_ != ScanPart::kDone; ++i) {
    const char c = data[i];
    if (after_cr_) {
      after_cr_ = false;
      if (c != '\n') {
        error_reason_ = "bare CR in request head";
        return ParseStatus::kAmbiguousFraming;
      }
    }
    if (c == '\r') {
      after_cr_ = true;
      continue;
    }
    if (scan_part_ == ScanPart::kBeforeRequestLine) {
      // Empty lines before the request line are ignored (RFC 9112 section 2.2).
      if (c == '\n') continue;
      scan_part_ = ScanPart::kRequestLine;
    }
    if (scan_part_ == ScanPart::kRequestLine) {
      if (c != '\n') {
        std::memmove(line_tail_, line_tail_ + 1, sizeof line_tail_ - 1);
        line_tail_[sizeof line_tail_ - 1] = c;
        ++line_bytes_;
        continue;
      }
      // The request line must end in its version, or its end is not where it seems.
      const char* t = line_tail_;
      if (line_bytes_ < sizeof line_tail_ || std::memcmp(t, " HTTP/", 6) != 0 || t[6] < '0' ||
          t[6] > '9' || t[7] != '.' || t[8] < '0' || t[8] > '9') {
        error_reason_ = "malformed request line";
        return ParseStatus::kBadRequest;
      }
      scan_part_ = ScanPart::kHeaders;
      line_start_ = true;
      in_name_ = true;
      continue;
    }
    if (c == '\n') {
      if (line_start_) {
        scan_part_ = ScanPart::kDone;  // the empty line: what follows is not head
      } else {
        line_start_ = true;
        in_name_ = true;
      }
      continue;
    }
    if (line_start_ && (c == ' ' || c == '\t')) {
      error_reason_ = "obs-fold line in request head";
      return ParseStatus::kAmbiguousFraming;
    }
    line_start_ = false;
    if (in_name_) {
      if (c == ':') {
        in_name_ = false;
      } else if (c == ' ' || c == '\t') {
        error_reason_ = "whitespace in a header name";
        return ParseStatus::kAmbiguousFraming;
      }
    }
  }
  return ParseStatus::kComplete;
}

ParseStatus RequestParser::feed(const char* data, size_t size) {
  if (complete_) return ParseStatus::kComplete;
  // Never hand the parser more than the head may still take: a head that has not ended within
  // the limit is refused with 431, and bytes past a complete head (an Upgrade's WebSocket
  // frames) are never counted against it. A body (bounded by its Content-Length, which
  // on_headers_complete checked) is not head: once the head is done the rest goes in whole.
  const size_t allowance = head_done_ ? size : limits_.max_header_bytes - head_bytes_;
  const size_t offered = size < allowance ? size : allowance;
  // First, so that a smuggling attempt is named as one even where http-parser would refuse the
  // same byte with a generic error. The scan stops by itself at the end of the head.
  if (const ParseStatus s = scan_head(data, offered); s != ParseStatus::kComplete) return s;
  size_t parsed = http_parser_execute(&parser_, &settings_, data, offered);
  if (!head_done_) head_bytes_ += parsed;
  if (head_done_ && !complete_ && parsed == offered && offered < size &&
      HTTP_PARSER_ERRNO(&parser_) == HPE_OK)
    parsed += http_parser_execute(&parser_, &settings_, data + offered, size - offered);
  consumed_ += parsed;
  if (too_large_) {
    error_reason_ = "too many headers";
    return ParseStatus::kHeadersTooLarge;
  }
  if (body_too_large_) {
    error_reason_ = "request body too large";
    return ParseStatus::kBodyTooLarge;
  }
  if (has_body_) {
    error_reason_ = "request body not accepted";
    return ParseStatus::kBodyNotAllowed;
  }
  if (complete_) return ParseStatus::kComplete;
  const http_errno err = HTTP_PARSER_ERRNO(&parser_);
  if (err == HPE_UNEXPECTED_CONTENT_LENGTH || err == HPE_INVALID_TRANSFER_ENCODING) {
    // Content-Length twice, or with Transfer-Encoding: http-parser refuses these itself.
    error_reason_ = http_errno_description(err);
    return ParseStatus::kAmbiguousFraming;
  }
  if (err != HPE_OK && err != HPE_PAUSED) {
    error_reason_ = http_errno_description(err);
    return ParseStatus::kBadRequest;
  }
  if (!head_done_ && head_bytes_ >= limits_.max_header_bytes) {
    error_reason_ = "request head too large";
    return ParseStatus::kHeadersTooLarge;
  }
  return ParseStatus::kIncomplete;
}

int RequestParser::on_url(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<RequestParser*>(p->data);
  self->request_.target.append(at, n);
  return 0;
}

int RequestParser::on_header_field(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<RequestParser*>(p->data);
  auto& headers = self->request_.headers;
  if (self->in_value_ || headers.empty()) {
    if (headers.size() >= self->limits_.max_headers) {
      self->too_large_ = true;
      return 1;
    }
    headers.emplace_back();
    self->in_value_ = false;
  }
  std::string& name = headers.back().first;
  for (size_t i = 0; i < n; ++i)
    name.push_back(char(std::tolower(static_cast<unsigned char>(at[i]))));
  return 0;
}

int RequestParser::on_header_value(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<RequestParser*>(p->data);
  self->in_value_ = true;
  self->request_.headers.back().second.append(at, n);
  return 0;
}

int RequestParser::on_headers_complete(http_parser* p) {
  auto* self = static_cast<RequestParser*>(p->data);
  Request& r = self->request_;
  r.method = http_method_str(static_cast<http_method>(p->method));
  r.http_major = p->http_major;
  r.http_minor = p->http_minor;
  r.keep_alive = http_should_keep_alive(p) != 0;
  // Upgrade needs both the Upgrade header and the "upgrade" token in Connection; http-parser
  // sets p->upgrade from exactly that.
  r.upgrade = p->upgrade != 0;
  // Only a POST may carry a body, framed by Content-Length, within max_body_bytes; any other
  // framing of one is refused before its bytes are awaited: a GET with Content-Length would
  // otherwise sit until the handshake timeout. Content-Length: 0 is a body of nothing.
  const bool has_length = (p->flags & F_CONTENTLENGTH) != 0 && p->content_length != 0;
  if (r.has_header("transfer-encoding") ||
      (has_length && (p->method != HTTP_POST || self->limits_.max_body_bytes == 0))) {
    self->has_body_ = true;
    return 1;
  }
  if (has_length && p->content_length > self->limits_.max_body_bytes) {
    self->body_too_large_ = true;
    return 1;
  }
  if (has_length) r.body.reserve(size_t(p->content_length));
  self->head_done_ = true;
  if (r.upgrade) {
    // Returning 2 tells http-parser there is no body; the rest of the input is not HTTP.
    return 2;
  }
  return 0;
}

int RequestParser::on_body(http_parser* p, const char* at, size_t n) {
  // Bounded: on_headers_complete admitted only a Content-Length within max_body_bytes.
  static_cast<RequestParser*>(p->data)->request_.body.append(at, n);
  return 0;
}

int RequestParser::on_message_complete(http_parser* p) {
  auto* self = static_cast<RequestParser*>(p->data);
  self->complete_ = true;
  // Stop here: a pipelined second request is not ours to parse yet.
  http_parser_pause(p, 1);
  return 0;
}

}  // namespace syncd::http
