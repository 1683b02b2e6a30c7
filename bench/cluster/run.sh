#!/usr/bin/env bash
# Scale-out benchmark: fan-out to 1,000 ... 20,000 sockets split over two
# legba-server instances sharing their rooms through one redis-server, and
# the latency Redis adds to a message (docs/scale-out.md).
#
#   bench/cluster/run.sh           full run (about 10 minutes on 2 cores),
#                                  writes bench/results/cluster-DATE.json
#   bench/cluster/run.sh --quick   smoke run: 1,000 and 2,000 sockets, a
#                                  short hop series; results go to
#                                  bench/results/tmp/ (not committed)
#
# Builds legba-server and legba-probe as a release build in build-release/
# (LEGBA_BENCH_BUILD overrides) and refuses any other build type. Loopback
# only; redis-server runs on a Unix socket in a temporary directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
quick=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) extra+=("$arg") ;;
  esac
done

if ! command -v redis-server >/dev/null; then
  echo "bench: redis-server is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
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
  out="$root/bench/results/tmp/cluster-quick-$stamp.json"
  extra=(--sizes 1000,2000 --events 5 --hop-rounds 2 --hop-events 50
    --cost-rounds 2 --cost-events 200 "${extra[@]}")
else
  out="$root/bench/results/cluster-$stamp.json"
fi

# Each run inside is bounded by its own timeouts; this is the backstop.
timeout --signal=TERM 40m /usr/bin/python3 "$here/bench.py" \
  --legba-server "$build/tools/legba-server" \
  --legba-probe "$build/tools/legba-probe" \
  --buildtype "$buildtype" \
  --legba-version "$version" \
  --output "$out" \
  --command "bench/cluster/run.sh $*" \
  "${extra[@]}"
