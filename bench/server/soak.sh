#!/usr/bin/env bash
# legba-server soak (docs/benchmarks.md, "The soak"): one server process
# under a mixed load for a bounded time, watched each second, its round
# trips timed beside those of an idle control server, the servers and the
# probe on one CPU and the load on the others; see bench/server/soak.py
# for the load, the placement and the verdict.
#
#   bench/server/soak.sh                  10 minutes of load (about 11 in
#                                         all, with the quiet round trips)
#   bench/server/soak.sh --seconds 120    a shorter run
#
# Other options reach bench/server/soak.py (--help). Writes
# bench/results/tmp/soak-DATE.json, a summary beside it (.txt) and the
# server's log under bench/results/tmp/soak-DATE/; exits 1 when a check
# fails. Builds legba-server and legba-probe as a release build in
# build-release/ (LEGBA_BENCH_BUILD picks another build directory, of any
# type; the result records which).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
seconds=600
prev=
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,17p' "$0"; exec /usr/bin/python3 "$here/soak.py" --help ;;
    --seconds=*) seconds=${arg#--seconds=} ;;
  esac
  [ "$prev" = --seconds ] && seconds=$arg
  prev=$arg
done

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbuildtype=release -Dintegration=disabled
fi
ninja -C "$build" tools/legba-server tools/legba-probe >/dev/null
buildtype=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(opts["buildtype"] + (" sanitize" if opts.get("sanitize") else ""))')

# Bounded whatever happens: the load's own length, plus the quiet round
# trips, the drain and the checks (a few minutes at most).
limit=$(/usr/bin/python3 -c "import sys; print(int(float(sys.argv[1])) + 300)" \
  "$seconds")
exec timeout --signal=TERM "$limit" /usr/bin/python3 "$here/soak.py" \
  --legba-server "$build/tools/legba-server" \
  --legba-probe "$build/tools/legba-probe" --buildtype "$buildtype" "$@"
