// printf("%.9g") for the JSON telemetry's numbers, byte for byte, without printf's cost.
//
// The JSON datagram's consumers read the upstream serializer's exact text (docs/headtracker.md),
// so the bytes may not change; std::to_chars(general, 9) gives them but costs ~40 ns a number
// (libstdc++ formats fixed precision through Ryu-printf's tables), two thirds of the
// per-packet work. For the magnitudes a head tracker produces (1e-11 <= |v| < 1e9) the value is
// rounded here exactly, in integer arithmetic: v = m * 2^q, so v * 10^k = m * 10^k >> -q, with
// m * 10^k < 2^117 in one unsigned __int128 and ties broken to even on the exact remainder, as
// printf and to_chars do. Everything else (zero excepted) goes to std::to_chars.
//
// Pure and thread-safe; any thread.
#pragma once

#include <charconv>

namespace syncd::headtrack {

// Same contract as std::to_chars(first, last, v, std::chars_format::general, 9): on success
// {end, errc{}}, with no room {last, errc::value_too_large}. v must be finite (the callers write
// null for NaN and infinities, as JSON has no such numbers).
std::to_chars_result to_chars_g9(char* first, char* last, double v);

}  // namespace syncd::headtrack
