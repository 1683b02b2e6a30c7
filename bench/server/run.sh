#!/usr/bin/env bash
# Signalling-server benchmark: legba-server against soketi 1.6.1, same
# generator (legba-probe), same run, alternating order (docs/benchmarks.md,
# "Runs").
#
#   bench/server/run.sh           full run (15–30 minutes), writes
#                                 bench/results/server-DATE.json and
#                                 regenerates bench/server/RESULTS.md
#   bench/server/run.sh --quick   smoke run (1–2 minutes): small sizes,
#                                 one round; results and report go to
#                                 bench/results/tmp/ (not committed)
#   bench/server/run.sh --rounds N --sizes A,B
#                                 fewer rounds or sizes (bench/run.sh's
#                                 signalling suite): the results are kept,
#                                 the report goes to bench/results/tmp/, so
#                                 that bench/server/RESULTS.md stays the
#                                 last full run's
#
# Builds legba-server and legba-probe as a release build in build-release/
# (LEGBA_BENCH_BUILD overrides) and refuses any other build type.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
quick=0
partial=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1; extra+=(--quick) ;;
    --rounds|--sizes) partial=1; extra+=("$arg") ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) extra+=("$arg") ;;
  esac
done

"$root/bench/setup.sh"

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbuildtype=release -Dintegration=disabled
fi
buildtype=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
if [ "$buildtype" != release ]; then
  echo "bench: $build is a $buildtype build; the benchmark measures release" \
    "builds only (meson configure $build -Dbuildtype=release)" >&2
  exit 1
fi
ninja -C "$build" tools/legba-server tools/legba-probe >/dev/null
version=$(meson introspect --projectinfo "$build" | /usr/bin/python3 -c '
import json, sys
print(json.load(sys.stdin)["version"])')

stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ $quick -eq 1 ]; then
  out="$root/bench/results/tmp/server-quick-$stamp.json"
  report="$root/bench/results/tmp/RESULTS-quick.md"
elif [ $partial -eq 1 ]; then
  out="$root/bench/results/server-$stamp.json"
  report="$root/bench/results/tmp/RESULTS-server-$stamp.md"
else
  out="$root/bench/results/server-$stamp.json"
  report="$root/bench/server/RESULTS.md"
fi

# The whole suite is bounded: each run inside is bounded by its own
# timeouts, and this is the backstop. A stopped run still writes what it
# measured, and the report says it stopped.
status=0
timeout --signal=TERM 50m /usr/bin/python3 "$here/bench.py" \
  --legba-server "$build/tools/legba-server" \
  --legba-probe "$build/tools/legba-probe" \
  --buildtype "$buildtype" \
  --legba-version "$version" \
  --soketi "$root/bench/peers/soketi" \
  --source "$root" \
  --output "$out" \
  --logs "$root/bench/results/tmp/logs-$stamp" \
  --command "bench/server/run.sh $*" \
  "${extra[@]}" || status=$?

if [ -f "$out" ]; then
  /usr/bin/python3 "$root/bench/analyze.py" "$out" --output "$report"
fi
exit $status
