#!/usr/bin/env bash
# Formats C sources in GStreamer's style (GNU indent with the options of
# GStreamer's gst-indent), in place; with --check, changes nothing and lists
# the files that are not formatted, exiting 1 if there are any.
#   scripts/indent.sh [--check] [FILE...]   (default: every .c file in the tree)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
cd "$here"
if [ $# -eq 0 ]; then
  mapfile -t files < <(git ls-files '*.c')
else
  files=("$@")
fi

opts=(--braces-on-if-line --case-brace-indentation0 --case-indentation2
  --braces-after-struct-decl-line --line-length80 --no-tabs --cuddle-else
  --dont-line-up-parentheses --continuation-indentation4 --honour-newlines
  --tab-size8 --indent-level2 --leave-preprocessor-space)

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
bad=0
for f in "${files[@]}"; do
  # indent is not always stable in one pass: GStreamer runs it twice too
  indent "${opts[@]}" -st "$f" | indent "${opts[@]}" -st >"$tmp"
  cmp -s "$tmp" "$f" && continue
  if [ $check -eq 1 ]; then
    echo "not formatted: $f"
    bad=1
  else
    cat "$tmp" >"$f"
  fi
done
exit $bad
