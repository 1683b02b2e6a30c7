#!/usr/bin/env bash
# Runs the benchmark suites of docs/benchmarks.md, Legba beside its peers
# (plain webrtcbin, aiortc, Pion, soketi), then regenerates
# bench/RESULTS.md and its charts from bench/results/.
#
#   bench/run.sh                 every suite, full (39 to 53 minutes on 2
#                                quiet cores, by host, the waits for a
#                                quiet machine included)
#   bench/run.sh SUITE...        only those suites
#   bench/run.sh --quick [SUITE...]
#                                smoke run (a few minutes); results go to
#                                bench/results/tmp/ (not committed)
#   bench/run.sh --list          the suites
#   bench/run.sh --scale-rounds N scale
#                                the scale suite N rounds (alternating
#                                order) instead of one: about 15 minutes
#                                a round
#
# Suites: setup datachannel data video-send video-receive video-call
# first-frame mesh mesh-loss audio scale signalling footprint netlab.
# first-frame: a call's connect to its first decoded frame, Legba against
# plain webrtcbin; mesh: CPU per participant of a 4-way 640x360 mesh, one
# process each, Legba beside plain webrtcbin and aiortc (about 5 and 10
# minutes); mesh-loss: the same mesh, Legba and plain webrtcbin, each
# participant dropping 5% of the RTP packets it sends (about 5 minutes).
# data is Legba's own data path: the library's CPU per message (timed,
# and counted with callgrind) against
# plain webrtcbin with json-glib, then bulk, round trip and heap per pair
# through a legba-server process, against plain webrtcbin (about 10
# minutes). video-send is bench/encoders/run.sh, signalling is
# bench/server/run.sh (fewer rounds and sizes than its own
# full run, to keep the whole run within the hour; run it alone for the
# full series). netlab is bench/netlab/netlab.py: Legba calls through the
# network lab's scenarios (bottlenecks, loss, delay, a capacity step, a
# competing TCP flow), Legba beside headless Chromium, as root; not in
# the default list (about 30 minutes, and it needs root). Every suite is
# bounded by a timeout.
#
# Builds Legba and the C peers as a release build in build-release/
# (LEGBA_BENCH_BUILD overrides) and refuses any other build type; builds
# the Pion peer with Debian's Go and Pion sources, offline. The peers come
# from scripts/setup.sh --bench (bench/setup.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
all=(setup datachannel data video-send video-receive video-call first-frame
  mesh mesh-loss audio scale signalling footprint)
# run only when named
extra_suites=(netlab)
quick=0
scale_rounds=1
suites=()
while [ $# -gt 0 ]; do
  arg=$1; shift
  case "$arg" in
    --quick) quick=1 ;;
    --scale-rounds)
      scale_rounds=${1:-}
      [[ "$scale_rounds" =~ ^[1-9][0-9]*$ ]] || {
        echo "bench: --scale-rounds takes a number of rounds" >&2; exit 2; }
      shift ;;
    --list) printf '%s\n' "${all[@]}" "${extra_suites[@]}"; exit 0 ;;
    -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
    -*) echo "bench: unknown option $arg" >&2; exit 2 ;;
    *)
      if [[ " ${all[*]} ${extra_suites[*]} " != *" $arg "* ]]; then
        echo "bench: unknown suite $arg (bench/run.sh --list)" >&2; exit 2
      fi
      suites+=("$arg") ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || suites=("${all[@]}")

# the peers (Pion, aiortc) are for every suite but netlab
peers=0
for suite in "${suites[@]}"; do
  [ "$suite" = netlab ] || peers=1
done
needs=(gnuplot)
[ $peers -eq 0 ] || needs+=(go valgrind)
for need in "${needs[@]}"; do
  command -v "$need" >/dev/null || {
    echo "bench: $need is missing: scripts/setup.sh --bench" >&2; exit 1; }
done
[ $peers -eq 0 ] || /usr/bin/python3 -c 'import aiortc' 2>/dev/null || {
  echo "bench: python3-aiortc is missing: scripts/setup.sh --bench" >&2
  exit 1; }

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbuildtype=release >/dev/null
fi
buildtype=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
if [ "$buildtype" != release ]; then
  echo "bench: $build is a $buildtype build; the benchmarks measure release" \
    "builds only (meson configure $build -Dbuildtype=release)" >&2
  exit 1
fi
ninja -C "$build" >/dev/null

# Pion: GOPATH mode over Debian's sources, no network.
pion="$build/bench/pion-peer"
[ $peers -eq 0 ] || "$here/peers/pion/build.sh" "$pion"

stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ $quick -eq 1 ]; then
  outdir="$root/bench/results/tmp"
  qflag=(--quick)
else
  outdir="$root/bench/results"
  qflag=()
fi
mkdir -p "$outdir"

# A suite that loads the machine (mesh, mesh-loss and scale by design,
# audio's 50 encoders, the build above) leaves the load average high for
# a minute or more after it ends; every suite waits (up to 6 minutes) for
# the one-minute load average to fall to 1, so that it starts on a quiet
# machine (bench/report.py marks a suite that did not provisional).
settle() {
  local waited=0
  while awk '{ exit !($1 > 1.0) }' /proc/loadavg && [ $waited -lt 360 ]; do
    sleep 10
    waited=$((waited + 10))
  done
  [ $waited -eq 0 ] ||
    echo "bench: waited $waited s for the load average to fall"
}

status=0
for suite in "${suites[@]}"; do
  [ $quick -eq 1 ] || settle
  echo "bench: $suite ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  case "$suite" in
    video-send)
      if [ $quick -eq 1 ]; then
        "$here/encoders/run.sh" --quick || status=1
      else
        "$here/encoders/run.sh" --sweep || status=1
      fi ;;
    netlab)
      timeout --signal=TERM 50m /usr/bin/python3 "$here/netlab/netlab.py" \
        --build "$build" "${qflag[@]}" \
        --command "bench/run.sh${qflag[*]:+ ${qflag[*]}} netlab" \
        --output "$outdir/netlab-$stamp.json" || status=1 ;;
    signalling)
      if [ $quick -eq 1 ]; then
        "$here/server/run.sh" --quick || status=1
      else
        "$here/server/run.sh" --rounds 1 --sizes 1000,5000 || status=1
      fi ;;
    *)
      # scale sets up to 1,500 pairs per peer, each run up to 10 minutes
      bound=20m; extra=()
      if [ "$suite" = scale ]; then
        bound=$((90 * scale_rounds))m
        [ "$scale_rounds" -eq 1 ] ||
          extra=(--scale-rounds "$scale_rounds")
      fi
      timeout --signal=TERM $bound /usr/bin/python3 "$here/suites.py" "$suite" \
        --build "$build" --pion "$pion" "${qflag[@]}" "${extra[@]}" \
        --command "bench/run.sh${qflag[*]:+ ${qflag[*]}}${extra[*]:+ ${extra[*]}} $suite" \
        --output "$outdir/$suite-$stamp.json" || status=1 ;;
  esac
done

if [ $quick -eq 1 ]; then
  /usr/bin/python3 "$here/report.py" --results "$outdir" \
    --output "$outdir/RESULTS.md"
else
  /usr/bin/python3 "$here/report.py"
  # what no report or doc names any more (docs/benchmarks.md, "Which
  # results are kept"): the bench-results-kept test fails until it goes
  drop=$(/usr/bin/python3 "$here/prune-results.py")
  if [ -n "$drop" ]; then
    echo "Kept by no rule (bench/prune-results.py --remove drops them):"
    echo "$drop"
  fi
fi
exit $status
