#!/usr/bin/env bash
# The main job: build syncd (release) and run it with the built-in 1080p60 test pattern verified
# by the test publisher. Extra arguments go to syncd (e.g. --port 0, --source pattern:1280x720@30).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --run-only
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target syncd
exec build/release/src/daemon/syncd --source pattern --publisher test "$@"
