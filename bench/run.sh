#!/usr/bin/env bash
# Runs every benchmark suite (BENCHMARKING.md). The signalling server is
# the only suite so far; `bench/run.sh --quick` is a smoke run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$here/server/run.sh" "$@"
