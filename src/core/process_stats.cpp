#include "core/process_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace syncd::core {

uint64_t resident_memory_bytes() {
  // statm: "size resident shared text lib data dt", in pages.
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long long size_pages = 0, resident_pages = 0;
  if (std::sscanf(text, "%llu %llu", &size_pages, &resident_pages) != 2) return 0;
  return resident_pages * uint64_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace syncd::core
