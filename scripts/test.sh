#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (meson test).
#   scripts/test.sh              plain build in build/, with the references
#                                (-Ddocs=enabled, docs/reference.md)
#   scripts/test.sh --sanitize   AddressSanitizer + UBSan build in build-sanitize/
# Extra arguments after -- go to `meson test` (e.g. -- --suite unit).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=build
# a sanitized build has no introspection data to make the references from
opts=(-Ddocs=enabled)
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) dir=build-sanitize; opts=(-Dsanitize=true) ;;
    --) shift; break ;;
    *) echo "test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

"$here/scripts/setup.sh"

cd "$here"
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror -Dintegration=enabled "${opts[@]}"
fi
ninja -C "$dir"
meson test -C "$dir" --print-errorlogs "$@"
