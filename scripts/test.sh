#!/usr/bin/env bash
# Every test: unit and integration tests on the release build, the same under ASan+UBSan (less
# the timing-bound qualification arms), the threaded code's tests under TSan, and a bounded smoke
# run of each libFuzzer target. Installs what is missing first; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, printed as a table when the script ends (passed or not): the budget is
# 40 minutes on a 2-core machine, and this shows where it goes.
stage_names=()
stage_seconds=()
stage_started=$SECONDS
stage() {
  local now=$SECONDS
  if ((${#stage_names[@]})); then stage_seconds+=($((now - stage_started))); fi
  stage_names+=("$1")
  stage_started=$now
  echo "== $1"
}
stage_table() {
  local status=$? i total=0
  stage_seconds+=($((SECONDS - stage_started)))
  echo "-- stage times"
  for i in "${!stage_names[@]}"; do
    printf '%-34s %5d s\n' "${stage_names[$i]}" "${stage_seconds[$i]}"
    total=$((total + stage_seconds[i]))
  done
  printf '%-34s %5d s (%d min)\n' "total" "$total" $((total / 60))
  if command -v ccache >/dev/null; then ccache --show-stats | grep -iE 'hits|misses' || true; fi
  return "$status"
}
trap stage_table EXIT

stage "install dependencies"
scripts/install-deps.sh

jobs=$(nproc)
fuzz_seconds=${SYNC_FUZZ_SECONDS:-20}
# The four builds go through ccache (~/.cache/ccache), so a run after an earlier one recompiles
# only what changed instead of every object four times over. A first run fills the cache.
configure=(-DSYNC_WERROR=ON)
if command -v ccache >/dev/null; then
  configure+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to the clone and the working directory left out of the hash, so a clone
  # elsewhere (CI's) still hits; debug info then names the first clone's directory.
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  ccache --zero-stats >/dev/null
fi

stage "release build"
cmake --preset release "${configure[@]}" >/dev/null
cmake --build --preset release -j"$jobs"
# playwright-core for the browser tests, and for test_camera_chromium (Chromium as the camera's
# consumer) among the integration tests.
(cd tests/browser && npm ci --no-audit --no-fund)
stage "release tests"
# Every test must pass the first time, except the timing-contract tests (label "timing": paced
# 60 fps, audio continuity and RTT under video load), which measure a shared 2-core machine: one
# of those that fails is run once more, and both runs stay in the log.
ctest --test-dir build/release --output-on-failure -j1 -LE timing
ctest --test-dir build/release --output-on-failure -j1 -L timing --repeat until-pass:2

stage "browser tests"  # Debian chromium + playwright-core: web/sync.js, pages, tickets, credit
(cd tests/browser && SYNCD=$PWD/../../build/release/src/daemon/syncd npm test)

# -O1 -g1 (CMakePresets.json): ASan's advice, and half the compile time of -O2 -g here.
stage "asan-ubsan build"
cmake --preset asan-ubsan "${configure[@]}" >/dev/null
cmake --build --preset asan-ubsan -j"$jobs"
stage "asan-ubsan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan-ubsan --output-on-failure -j1 -LE qualification

stage "tsan build and tests"  # the threaded code's
tsan_targets=(headtrack_tests handoff_tests camera_tests transport_tests egress_tests relay_tests decode_tests whep_tests http_client_tests)
[[ -f tests/unit/audio/tests.cmake ]] && tsan_targets+=(audio_tests)
cmake --preset tsan "${configure[@]}" >/dev/null
cmake --build --preset tsan -j"$jobs" --target "${tsan_targets[@]}"
for t in "${tsan_targets[@]}"; do
  TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/unit/"$t" --gtest_brief=1
done

stage "fuzz build and smoke (${fuzz_seconds} s a target)"
fuzz_targets=(ws_frame_decoder http_request http_authority control_message hid_descriptor hid_report
              audio_control frame_header shm_reader relay_wire rtp rtcp fec_decoder jitter_buffer
              congestion srtp_unprotect opus_decode dtls_routing h264_decode webrtc_sdp
              webrtc_stun http_response decode_twin)
cmake --preset fuzz "${configure[@]}" >/dev/null
cmake --build --preset fuzz -j"$jobs" --target "${fuzz_targets[@]/#/fuzz_}"
# Two fuzzers at a time, one per core (each is single-threaded): the same time per target in half
# the wall time. Each one's output is printed when it ends: its last lines, or all of its report
# when it fails, and a failure fails the stage (xargs exits non-zero).
fuzz_one() {
  local target=$1 corpus log status=0
  corpus=$(mktemp -d)
  log=$(mktemp)
  cp -r fuzz/corpus/"$target"/. "$corpus"/ 2>/dev/null || true
  build/fuzz/fuzz/fuzz_"$target" -max_total_time="$fuzz_seconds" -print_final_stats=0 \
    "$corpus" >"$log" 2>&1 || status=$?
  echo "-- fuzz_$target"
  if [[ $status -eq 0 ]]; then tail -n 2 "$log"; else cat "$log"; fi
  rm -rf "$corpus" "$log"
  return "$status"
}
export -f fuzz_one
export fuzz_seconds
printf '%s\n' "${fuzz_targets[@]}" | xargs -P 2 -I{} bash -c 'fuzz_one "$1"' _ {}
echo "all test stages passed"
