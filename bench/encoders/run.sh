#!/usr/bin/env bash
# Video-send benchmark (suite 3 of docs/benchmarks.md): CPU per frame of each
# encoder legbavideoenc can use here at 360p, 720p, 1080p and 2160p under a
# 1.5 Mbit/s cap, the bitrate over the cap and the frame rate over the
# source, side by side with aiortc's own VP8 and H.264 encoders on the
# same frames.
#
#   bench/encoders/run.sh           full run (about 25 minutes): 3 rounds of
#                                   300 frames; writes
#                                   bench/results/encoders-DATE.json and
#                                   bench/encoders/RESULTS.md
#   bench/encoders/run.sh --sweep   the cap sweep (15-30 minutes;
#                                   bench/run.sh video-send runs this):
#                                   caps 0.5, 1, 2.5 and 5 Mbit/s at 360p,
#                                   720p and 1080p, 2.5 and 5 at 2160p, 2
#                                   rounds of 150 frames; writes
#                                   bench/results/encoders-DATE.json and
#                                   bench/encoders/RESULTS.md
#   bench/encoders/run.sh --quick   smoke run (about 1 minute): 360p and
#                                   720p, 1 round of 60 frames; results go
#                                   to bench/results/tmp/ (not committed)
#   Other options go to bench.py, e.g. --encoders openh264enc,vp8enc
#   (legbavideoenc with these encoders only), --no-aiortc, --caps LIST,
#   --carry EARLIER.json (the configurations not run again copied from an
#   earlier results file, marked in the report).
#
# Builds the plugin as a release build in build-release/ (LEGBA_BENCH_BUILD
# overrides) and refuses any other build type. Installs python3-aiortc
# (Debian) when it is missing and this runs as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
quick=0
sweep=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --sweep) sweep=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) extra+=("$arg") ;;
  esac
done

if ! /usr/bin/python3 -c 'import aiortc' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3-aiortc >/dev/null
  else
    echo "bench: python3-aiortc is missing: apt-get install python3-aiortc" >&2
    exit 1
  fi
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbuildtype=release
fi
buildtype=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
if [ "$buildtype" != release ]; then
  echo "bench: $build is a $buildtype build; the benchmark measures release" \
    "builds only (meson configure $build -Dbuildtype=release)" >&2
  exit 1
fi
ninja -C "$build" plugins/legba/libgstlegba.so >/dev/null

stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ $quick -eq 1 ]; then
  out="$root/bench/results/tmp/encoders-quick-$stamp.json"
  report="$root/bench/results/tmp/RESULTS-encoders-quick.md"
  extra=(--sizes 360p,720p --rounds 1 --frames 60 "${extra[@]}")
elif [ $sweep -eq 1 ]; then
  out="$root/bench/results/encoders-$stamp.json"
  report="$here/RESULTS.md"
  extra=(--caps 500000,1000000,2500000,5000000 --caps-2160p 2500000,5000000
    --rounds 2 --frames 150 "${extra[@]}")
else
  out="$root/bench/results/encoders-$stamp.json"
  report="$here/RESULTS.md"
fi

# Each run inside is bounded by its own timeout; this is the backstop.
timeout --signal=TERM 90m /usr/bin/python3 "$here/bench.py" \
  --plugin-path "$build/plugins/legba" \
  --buildtype "$buildtype" \
  --output "$out" \
  --command "bench/encoders/run.sh $*" \
  "${extra[@]}"

/usr/bin/python3 "$here/analyze.py" "$out" --output "$report"
echo "bench: wrote $report"
