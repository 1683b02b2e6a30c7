#!/usr/bin/env bash
# The main job: sets up and builds Legba, starts legba-server on a free
# loopback port and runs legba-probe's protocol round trip against it
# (connect, public/private/presence subscriptions, client events, member
# added/removed, an HTTP API publish). Exits 0 only if every check passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
[ -f build/build.ninja ] || meson setup build
ninja -C build

app_id=demo key=demo-key secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
out=$(mktemp)
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -f "$out"' EXIT
build/tools/legba-server --bind 127.0.0.1 --port 0 \
  --app-id "$app_id" --app-key "$key" --app-secret "$secret" >"$out" &
server=$!

for _ in $(seq 100); do
  grep -q '^legba-server listening on ' "$out" && break
  kill -0 "$server" 2>/dev/null || { echo "demo: legba-server exited" >&2; exit 1; }
  sleep 0.1
done
addr=$(sed -n 's/^legba-server listening on //p' "$out")
[ -n "$addr" ] || { echo "demo: legba-server did not start within 10 s" >&2; exit 1; }
echo "legba-server listening on $addr"

build/tools/legba-probe probe --url "ws://$addr" \
  --app-id "$app_id" --app-key "$key" --app-secret "$secret"
