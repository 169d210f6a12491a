#include "net/http_client/http_response.h"

#include <algorithm>
#include <charconv>

namespace syncd::http {

namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
}

bool clean(std::string_view s) {
  return std::none_of(s.begin(), s.end(),
                      [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
}

}  // namespace

bool parse_url(std::string_view text, Url& out, std::string& why) {
  Url url;
  const size_t colon = text.find("://");
  if (colon == std::string_view::npos) {
    why = "not an absolute http:// or https:// URL";
    return false;
  }
  std::string scheme(text.substr(0, colon));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), lower);
  if (scheme != "http" && scheme != "https") {
    why = "scheme '" + scheme + "' is not http or https";
    return false;
  }
  if (!clean(text)) {
    why = "spaces or control bytes in the URL";
    return false;
  }
  std::string_view rest = text.substr(colon + 3);
  if (rest.find('#') != std::string_view::npos) {
    why = "a fragment (#) has no place in a request";
    return false;
  }
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  url.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (url.path[0] == '?') url.path = "/" + url.path;
  if (authority.find('@') != std::string_view::npos) {
    why = "user information in the URL (use a bearer token)";
    return false;
  }
  std::string_view host = authority, port;
  bool has_port = false;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      why = "an unclosed [IPv6] host";
      return false;
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        why = "bytes after the [IPv6] host";
        return false;
      }
      port = after.substr(1);
      has_port = true;
    }
  } else if (const size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
    has_port = true;
  }
  if (host.empty()) {
    why = "no host";
    return false;
  }
  url.port = scheme == "https" ? 443 : 80;
  if (has_port) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      why = "bad port '" + std::string(port) + "'";
      return false;
    }
    url.port = uint16_t(value);
  }
  url.scheme = std::move(scheme);
  url.host = std::string(host);
  out = std::move(url);
  return true;
}

std::string write_request(std::string_view method, const Url& url, const Headers& headers,
                          std::string_view body) {
  std::string r;
  r.reserve(256 + body.size());
  r.append(method).append(" ").append(url.path).append(" HTTP/1.1\r\n");
  const bool v6 = url.host.find(':') != std::string::npos;
  r += "Host: ";
  if (v6) r += '[';
  r += url.host;
  if (v6) r += ']';
  const bool default_port =
      (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
  if (!default_port) r.append(":").append(std::to_string(url.port));
  r += "\r\n";
  for (const auto& [name, value] : headers)
    r.append(name).append(": ").append(value).append("\r\n");
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH")
    r.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  r += "Connection: close\r\n\r\n";
  r.append(body);
  return r;
}

std::string_view Response::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return {};
}

ResponseParser::ResponseParser(size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {
  http_parser_settings_init(&settings_);
  settings_.on_status = &ResponseParser::on_status;
  settings_.on_header_field = &ResponseParser::on_header_field;
  settings_.on_header_value = &ResponseParser::on_header_value;
  settings_.on_headers_complete = &ResponseParser::on_headers_complete;
  settings_.on_body = &ResponseParser::on_body;
  settings_.on_message_complete = &ResponseParser::on_message_complete;
  http_parser_init(&parser_, HTTP_RESPONSE);
  parser_.data = this;
}

int ResponseParser::on_status(http_parser* p, const char*, size_t n) {
  auto* self = static_cast<ResponseParser*>(p->data);
  self->head_bytes_ += n;
  return 0;
}

int ResponseParser::on_header_field(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<ResponseParser*>(p->data);
  self->head_bytes_ += n;
  if (self->head_bytes_ > kMaxHeadBytes) {
    self->limit_error_ = "the response head is over 16 KiB";
    return 1;
  }
  // A chunked body's trailer fields (RFC 9110 6.5.1) are not merged into the header section:
  // their bytes count against the limit and they are dropped.
  if (self->head_done_) return 0;
  if (!self->in_value_ && !self->response_.headers.empty()) {
    self->response_.headers.back().first.append(at, n);
  } else {
    if (self->response_.headers.size() == kMaxHeaders) {
      self->limit_error_ = "more than 64 response headers";
      return 1;
    }
    self->response_.headers.emplace_back(std::string(at, n), std::string());
  }
  self->in_value_ = false;
  return 0;
}

int ResponseParser::on_header_value(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<ResponseParser*>(p->data);
  self->head_bytes_ += n;
  if (self->head_bytes_ > kMaxHeadBytes) {
    self->limit_error_ = "the response head is over 16 KiB";
    return 1;
  }
  if (self->head_done_) return 0;  // a trailer field, dropped (see on_header_field)
  if (self->response_.headers.empty()) return 1;
  self->response_.headers.back().second.append(at, n);
  self->in_value_ = true;
  return 0;
}

int ResponseParser::on_headers_complete(http_parser* p) {
  auto* self = static_cast<ResponseParser*>(p->data);
  self->head_done_ = true;
  self->response_.status = int(p->status_code);
  // RFC 9110 15: three digits, 1xx to 5xx.
  if (p->status_code < 100 || p->status_code > 599) {
    self->limit_error_ = "status code " + std::to_string(p->status_code) + " is not 100-599";
    return -1;
  }
  // An interim response (1xx, RFC 9110 15.2) has no body; the final one follows it.
  if (p->status_code < 200) {
    self->interim_ = true;
    return 0;
  }
  bool has_length = false, has_encoding = false;
  std::string length;
  for (auto& [name, value] : self->response_.headers) {
    std::transform(name.begin(), name.end(), name.begin(), lower);
    if (name == "content-length") {
      // RFC 9112 6.3: differing repeated lengths are unrecoverable.
      if (has_length && value != length) {
        self->limit_error_ = "differing Content-Length headers";
        return -1;
      }
      has_length = true;
      length = value;
    }
    if (name == "transfer-encoding") has_encoding = true;
  }
  if (has_length && has_encoding) {
    self->limit_error_ = "both Content-Length and Transfer-Encoding";
    return -1;
  }
  if (has_length) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    if (ec == std::errc() && end == length.data() + length.size() && n > self->max_body_bytes_) {
      self->limit_error_ = "a body of " + length + " bytes is over the limit";
      return -1;
    }
  }
  return 0;
}

int ResponseParser::on_body(http_parser* p, const char* at, size_t n) {
  auto* self = static_cast<ResponseParser*>(p->data);
  if (self->response_.body.size() + n > self->max_body_bytes_) {
    self->limit_error_ = "the body is over the limit";
    return 1;
  }
  self->response_.body.append(at, n);
  return 0;
}

int ResponseParser::on_message_complete(http_parser* p) {
  auto* self = static_cast<ResponseParser*>(p->data);
  if (self->interim_) {  // read on: the final response comes next
    self->interim_ = false;
    self->head_done_ = false;
    self->in_value_ = false;
    self->response_ = Response{};
    return 0;
  }
  self->complete_ = true;
  http_parser_pause(p, 1);  // one response; what follows is not ours
  return 0;
}

ResponseStatus ResponseParser::fail(std::string why) {
  failed_ = true;
  error_ = std::move(why);
  return ResponseStatus::kError;
}

ResponseStatus ResponseParser::feed(const char* data, size_t size) {
  if (failed_) return ResponseStatus::kError;
  if (complete_) return ResponseStatus::kComplete;
  http_parser_execute(&parser_, &settings_, data, size);
  const http_errno err = HTTP_PARSER_ERRNO(&parser_);
  if (complete_) return ResponseStatus::kComplete;
  if (!limit_error_.empty()) return fail(limit_error_);
  if (err != HPE_OK) return fail(std::string("malformed response: ") + http_errno_description(err));
  if (!head_done_ && head_bytes_ > kMaxHeadBytes) return fail("the response head is over 16 KiB");
  return ResponseStatus::kIncomplete;
}

ResponseStatus ResponseParser::finish() {
  if (failed_) return ResponseStatus::kError;
  if (complete_) return ResponseStatus::kComplete;
  // A zero-length execute tells http-parser the stream ended: it completes a close-framed body.
  http_parser_execute(&parser_, &settings_, nullptr, 0);
  if (complete_) return ResponseStatus::kComplete;
  if (!limit_error_.empty()) return fail(limit_error_);
  return fail(head_done_ ? "the connection closed before the body ended"
                         : "the connection closed before a response");
}

}  // namespace syncd::http
