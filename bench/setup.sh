#!/usr/bin/env bash
# Installs what the benchmarks need on top of building and testing:
#   the WebRTC peers Legba is compared with, from Debian: aiortc
#   (python3-aiortc), Pion (golang-github-pion-webrtc.v3-dev, built
#   offline with golang-go by bench/run.sh), gnuplot for the charts and
#   valgrind (callgrind counts the data path's instructions);
#   soketi 1.6.1 (the peer Pusher-protocol server) from npm, into
#   bench/peers/soketi/node_modules, at the versions pinned by
#   bench/peers/soketi/package-lock.json.
# soketi's uWebSockets.js dependency points at a git host; package.json
# overrides it with the npm package @trufflesuite/uws-js-unofficial, which
# ships the same native binaries. No install scripts run: soketi needs
# none (the native modules are prebuilt).
# Idempotent: when the lock file has not changed since the last install,
# this is a file comparison.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
soketi="$here/peers/soketi"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench/setup.sh: $tool is missing (scripts/setup.sh installs it)" >&2
    exit 1
  fi
done

packages=(python3-aiortc golang-go golang-github-pion-webrtc.v3-dev gnuplot-nox
  valgrind)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench/setup.sh: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

stamp="$soketi/node_modules/.legba-lock"
if ! cmp -s "$soketi/package-lock.json" "$stamp" 2>/dev/null; then
  echo "bench/setup.sh: installing soketi (bench/peers/soketi/package-lock.json)"
  npm ci --prefix "$soketi" --no-audit --no-fund --ignore-scripts \
    --loglevel=error
  cp "$soketi/package-lock.json" "$stamp"
fi

# The server entry point and the native WebSocket module for this Node.
node -e '
  const dir = process.argv[1] + "/node_modules/";
  const v = require(dir + "@soketi/soketi/package.json").version;
  if (v !== "1.6.1") throw new Error("soketi " + v + ", expected 1.6.1");
  require(dir + "uWebSockets.js");
' "$soketi"
echo "bench/setup.sh: aiortc, Pion, gnuplot, valgrind and soketi 1.6.1 ready"
