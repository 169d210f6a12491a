// syncd: the program. Parsing the command line is daemon/options.h's (unit-tested); this prints
// what parsing returned, or starts the server and runs it. Exit status: daemon::ExitStatus.
#include <unistd.h>
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <variant>

#include "daemon/options.h"
#include "relay/relay.h"
#include "secure/certificate.h"
#include "server/server.h"

namespace {

// --print-fingerprint: the relay certificate's fingerprint on stdout, the certificate made first
// if there is none. A certificate that cannot be read or made is a failure to start.
int print_fingerprint(const std::string& relay_cert) {
  syncd::secure::Identity identity;
  const syncd::secure::IdentityResult r = syncd::relay::load_relay_identity(relay_cert, identity);
  if (!r.ok()) {
    std::fprintf(stderr, "syncd: %s\n", r.message.c_str());
    return syncd::daemon::kExitStartFailed;
  }
  std::printf("%s\n", syncd::secure::format_fingerprint(identity.fingerprint).c_str());
  return syncd::daemon::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  using syncd::daemon::DaemonOptions;
  using syncd::daemon::OptionsError;
  syncd::daemon::OptionsResult parsed = syncd::daemon::parse_options(argc, argv);
  if (const OptionsError* stop = std::get_if<OptionsError>(&parsed)) {
    const bool help = stop->kind == syncd::daemon::OptionsStop::kHelp;
    std::fputs(stop->text.c_str(), help ? stdout : stderr);
    return syncd::daemon::exit_status(*stop);
  }
  DaemonOptions& options = std::get<DaemonOptions>(parsed);
  if (options.print_fingerprint) return print_fingerprint(options.relay_cert);

  syncd::server::ServerConfig& cfg = options.server;
  cfg.status_line =
      syncd::daemon::status_line_enabled(options.status_line_mode, ::isatty(STDERR_FILENO));
  // A peer that vanishes must cost an error code, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  syncd::server::Server server(cfg);
  if (const int rc = server.start(); rc < 0) {
    std::fprintf(stderr, "syncd: cannot start on %s:%u: %s\n", cfg.host.c_str(), unsigned(cfg.port),
                 uv_strerror(rc));
    return syncd::daemon::kExitStartFailed;
  }
  server.run();
  return syncd::daemon::kExitOk;
}
