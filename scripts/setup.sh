#!/usr/bin/env bash
# Installs what Legba needs on Debian 12, in parts:
#   scripts/setup.sh           building and testing (Debian packages, the npm
#                              test clients pinned in tests/integration)
#   scripts/setup.sh --bench   the above, plus the benchmark peers (bench/setup.sh)
# Idempotent: when everything is present it only checks, in about a second.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=0
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

# Building: compiler, meson, GLib, libsoup 3, json-glib, GStreamer 1.22.
# Testing: Node.js for the real pusher-js/pusher clients, openssl for test
# certificates, clang for the fuzzers and sanitizer runtimes, Chromium for
# the browser interop tests (driven headless through playwright-core);
# GObject introspection and PyGObject for Legba-1.0.typelib and its test;
# Xvfb and GStreamer's X sinks for legba-call's windows in the tests;
# iproute2 (ip, tc) for the network lab's namespaces (bench/netlab);
# libsystemd for legba-server's readiness notification (Type=notify) and
# systemd's systemd-analyze for the checks of its unit; gi-docgen for the
# API references (docs/reference.md); debhelper, dpkg-dev, fakeroot and
# lintian for the Debian packages (scripts/package.sh); Janus (its
# VideoRoom plugin and WebSocket transport) for the SFU rooms' tests;
# curl for tests/common/start-janus.sh.
packages=(
  build-essential meson ninja-build pkg-config
  libglib2.0-dev libsoup-3.0-dev libjson-glib-dev glib-networking zlib1g-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  gstreamer1.0-nice gstreamer1.0-tools libnice-dev libssl-dev
  nodejs npm openssl ca-certificates chromium
  clang libclang-rt-14-dev indent
  libhiredis-dev redis-server
  coturn
  janus curl
  gobject-introspection libgirepository1.0-dev python3-gi
  gir1.2-glib-2.0 gir1.2-gstreamer-1.0 gir1.2-json-1.0
  xvfb gstreamer1.0-x libxcb1-dev
  iproute2
  libsystemd-dev systemd
  gi-docgen
  debhelper dpkg-dev fakeroot lintian
)

missing=()
for p in "${packages[@]}"; do
  # node and npm may come from elsewhere than Debian's packages
  if [ "$p" = nodejs ] && command -v node >/dev/null; then continue; fi
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

# npm test clients, at the versions pinned by the lock file. The stamp keeps
# this to a file comparison when nothing changed.
npm_dir="$here/tests/integration"
stamp="$npm_dir/node_modules/.legba-lock"
if [ -f "$npm_dir/package-lock.json" ] && \
   ! cmp -s "$npm_dir/package-lock.json" "$stamp" 2>/dev/null; then
  echo "setup: installing npm test clients (tests/integration/package-lock.json)"
  npm ci --prefix "$npm_dir" --no-audit --no-fund --loglevel=error
  cp "$npm_dir/package-lock.json" "$stamp"
fi

if [ $bench -eq 1 ]; then
  "$here/bench/setup.sh"
fi
echo "setup: ready"
