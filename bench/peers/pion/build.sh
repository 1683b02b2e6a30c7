#!/usr/bin/env bash
# Builds the benchmarks' Pion peer with Debian's Go over Debian's Pion
# sources (golang-github-pion-webrtc.v3-dev, from bench/setup.sh), in
# GOPATH mode, offline; again only when main.go is newer than OUTPUT.
#
#   bench/peers/pion/build.sh OUTPUT
#
# The GOPATH and Go's build cache go beside OUTPUT (OUTPUT's directory,
# gopath/).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTPUT" >&2; exit 2; }
out=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$out" ] && [ ! "$here/main.go" -nt "$out" ] && exit 0
gopath=$(dirname "$out")/gopath
mkdir -p "$gopath/src"
ln -sfn "$here" "$gopath/src/pion-peer"
cd "$gopath/src/pion-peer"
GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOPROXY=off \
  GOCACHE="$gopath/cache" GOFLAGS= go build -o "$out" .
