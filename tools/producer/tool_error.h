// Exit codes and the setup-time error type of sync-producer.
//
// Setup (connecting, the HTTP upgrade, the control handshake) throws ToolError and main() catches
// it once, prints it and exits with its code. The per-frame path returns IoStatus instead.
#pragma once

#include <stdexcept>
#include <string>

namespace syncd::producer {

// Process exit codes; scripts such as tools/bench_ingest.py rely on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,    // bad command line
  kExitRefused = 2,  // the server refused the upgrade, the hello or the stream
  kExitIo = 3,       // connection, I/O or protocol failure
};

class ToolError : public std::runtime_error {
 public:
  ToolError(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// "ECONNREFUSED (Connection refused)": the errno's name for grepping, its text for people.
std::string errno_text(int err);

}  // namespace syncd::producer
