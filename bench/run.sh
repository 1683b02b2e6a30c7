#!/usr/bin/env bash
# Runs every benchmark suite (BENCHMARKING.md): each bench/SUITE/run.sh in
# turn, with the same arguments (`--quick` for a smoke run).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for suite in "$here"/*/run.sh; do
  echo "bench: $(basename "$(dirname "$suite")")"
  "$suite" "$@"
done
