// The browser client, dashboard and demo pages (web/), embedded in syncd at build time so the
// daemon serves them with no files to install (cmake/embed_web.cmake). Thread-safe (constant).
#pragma once

#include <cstddef>
#include <string_view>

namespace syncd::server {

struct WebAsset {
  const char* path;  // URL path
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// nullptr when no embedded file has that URL path.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace syncd::server
