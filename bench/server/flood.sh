#!/usr/bin/env bash
# A well-behaved client's pusher:ping round trip against legba-server,
# quiet and while other clients flood it with WebSocket pings and never
# read (legba-probe flood; docs/server.md, Limits and abuse): once with
# the default control-frames-per-second (each flooder is closed with 1008
# after 10 pings and connects again) and once with it off (the flood goes
# on, every ping read and answered by one coalesced pong).
#
#   bench/server/flood.sh [--count N] [--flooders N]
#
# Builds legba-server and legba-probe as a release build in build-release/
# (LEGBA_BENCH_BUILD overrides) and refuses any other build type. Writes
# bench/results/server-flood-DATE.json and prints a summary.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${LEGBA_BENCH_BUILD:-$root/build-release}
count=500
flooders=1
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --flooders) flooders=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "flood.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dbuildtype=release -Dintegration=disabled
fi
buildtype=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
if [ "$buildtype" != release ]; then
  echo "flood.sh: $build is a $buildtype build; release builds only" >&2
  exit 1
fi
ninja -C "$build" tools/legba-server tools/legba-probe >/dev/null

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# One run: the server with the given flags, the probe against it.
run() {
  local name=$1; shift
  "$build/tools/legba-server" --port 0 --app-id 1 --app-key key \
    --app-secret secret "$@" >"$tmp/server.out" 2>"$tmp/server.err" &
  server_pid=$!
  for _ in $(seq 100); do
    grep -q listening "$tmp/server.out" && break
    sleep 0.1
  done
  local port
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/server.out")
  "$build/tools/legba-probe" flood --url "ws://127.0.0.1:$port" \
    --app-id 1 --app-key key --app-secret secret --count "$count" \
    --flooders "$flooders" --timeout 300 --json >"$tmp/$name.json"
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

run limited
run unlimited --control-frames-per-second 0

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/bench/results/server-flood-$stamp.json"
/usr/bin/python3 - "$tmp" "$out" "$(git -C "$root" rev-parse --short HEAD)" \
  "$(nproc)" <<'EOF'
import json, sys
tmp, out, commit, cpus = sys.argv[1:]
runs = {name: json.load(open(f"{tmp}/{name}.json"))
        for name in ("limited", "unlimited")}
json.dump({"suite": "server-flood", "commit": commit, "cpus": int(cpus),
           "command": "bench/server/flood.sh", "runs": runs},
          open(out, "w"), indent=1)
for name, r in runs.items():
    q, f = r["quiet_ms"], r["flood_ms"]
    print(f"{name:9}  quiet p50 {q['p50']:.3f} p95 {q['p95']:.3f} "
          f"max {q['max']:.3f} ms | flood p50 {f['p50']:.3f} "
          f"p95 {f['p95']:.3f} max {f['max']:.3f} ms | "
          f"{r['flood_pings_per_s']:.0f} pings/s, "
          f"{r['flooder_connections']} flooder connections")
print(out)
EOF
