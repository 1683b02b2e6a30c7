#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for
# SECONDS (default 60) from the seed corpus in tests/fuzz/corpus/, as meson
# tests: a crash, leak or sanitizer report fails the test and leaves the
# input in build-fuzz/tests/fuzz/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
"$here/scripts/setup.sh"
cd "$here"
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz --werror -Dfuzzing=true -Dsanitize=true \
    -Db_lundef=false \
    -Dintegration=disabled -Dfuzz_seconds="$seconds"
else
  meson configure build-fuzz -Dfuzz_seconds="$seconds"
fi
ninja -C build-fuzz tests/fuzz/fuzz-frame tests/fuzz/fuzz-http-api tests/fuzz/fuzz-json \
  tests/fuzz/fuzz-signal tests/fuzz/fuzz-ws-input tests/fuzz/fuzz-bwe
meson test -C build-fuzz --suite fuzz --no-rebuild --print-errorlogs
