// syncd's command line: every option, its default and its help text, turned into the daemon's
// configuration or into a refusal that says why. Kept apart from main() so that the unit tests
// (tests/unit/daemon/daemon_options_test.cpp) can parse any command line without starting a server.
//
// Pure: parse_options opens no socket and no file, reads no clock, prints nothing and never exits;
// main() prints what it returns and picks the exit status (ExitStatus, README.md "Exit status").
//
// Thread: any thread; parse_options keeps no state between calls.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "server/server_config.h"

namespace syncd::daemon {

// syncd's exit status: one code per class of outcome, so that scripts can tell a command line to
// fix from a machine that would not let syncd start (README.md, "Exit status").
enum ExitStatus : int {
  // Stopped by SIGINT/SIGTERM after running; --help; --print-fingerprint printed.
  kExitOk = 0,
  // The command line was accepted but syncd could not start: it cannot listen (address in use or
  // not local, a --host that is no address), the head tracker's replay file, the relay's socket
  // or certificate (also --print-fingerprint's), the audio source's channels for
  // --whep-audio-channels: whatever only the machine can judge.
  kExitStartFailed = 1,
  // The command line was refused: an unknown option, a value that does not parse or is out of
  // range, a bad HOST:PORT, an unknown publisher, flags that cannot go together.
  kExitUsage = 2,
};

// --status-line: whether the live status line goes to stderr.
enum class StatusLineMode : uint8_t { kAuto, kOn, kOff };

// What the command line asked for, checked.
struct DaemonOptions {
  // Everything the server takes (--publisher, --source, --relay-*, --whep-*, the limits, ...),
  // except status_line, which is left false: main() decides it from status_line_mode (below),
  // since "auto" depends on whether stderr is a terminal and parsing looks at no descriptor.
  server::ServerConfig server;
  StatusLineMode status_line_mode = StatusLineMode::kAuto;  // --status-line
  // --print-fingerprint: print the fingerprint of the relay certificate at relay_cert (made if
  // needed) and exit instead of serving. As syncd always has, such a command line is checked by
  // CLI11 alone (unknown options, ranges): the checks after it (relay, publishers, --source, ...)
  // are skipped, and `server` holds the values as parsed but not combined.
  bool print_fingerprint = false;
  // --relay-cert as given; empty: relay::default_identity_path(). Also in server.relay when a
  // relay is configured.
  std::string relay_cert;
};

// Why parse_options returned no options. Each kind has its exit status (exit_status()).
enum class OptionsStop : uint8_t {
  kHelp,   // --help or --help-all: `text` is the help, for stdout; syncd then exits 0
  kUsage,  // the command line was refused: `text` says why, for stderr; syncd then exits 2
};

struct OptionsError {
  OptionsStop kind = OptionsStop::kUsage;
  // What main() prints, verbatim and ending in a newline: CLI11's own text for its refusals and
  // for help ("--shm-slots: Value 1 not in range 2 to 64", then "Run with --help for more
  // information."), "syncd: ..." for the checks that come after CLI11's.
  std::string text;
};

using OptionsResult = std::variant<DaemonOptions, OptionsError>;

// Parses syncd's command line (argv[0] is the program name, as main() receives it). Returns the
// options, or the help text, or the refusal, in the order syncd always checked them: CLI11's
// checks (unknown option, conversion, ranges, choices) first, then --print-fingerprint, the
// relay's, WHIP's and WHEP's, the audio source's, the publishers', and --source's. Any thread.
OptionsResult parse_options(int argc, const char* const* argv);

// The exit status of a stop: kExitOk for help, kExitUsage for a refusal. Any thread.
int exit_status(const OptionsError& error);

// Whether to show the status line: kOn, or kAuto with stderr on a terminal. Any thread.
bool status_line_enabled(StatusLineMode mode, bool stderr_is_terminal);

}  // namespace syncd::daemon
