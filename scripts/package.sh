#!/usr/bin/env bash
# Builds Legba's Debian packages (debian/, docs/packaging.md) from a clean
# export of HEAD (`git archive`: what is committed, never a build directory
# of the working tree), with `dpkg-buildpackage -b -us -uc`, and checks them
# with lintian: no error, and no warning but those docs/packaging.md lists
# with its reason.
#   scripts/package.sh [--check] [--test] [OUT]      (default OUT: build-deb)
#     --check   run the test suite in the package build (without it the
#               build has DEB_BUILD_OPTIONS=nocheck: CI runs the suite in
#               its own stages)
#     --test    then install the packages in a fresh root and use them from
#               there (scripts/check-packages.sh)
# OUT receives the .deb files, the .changes and .buildinfo, build.log,
# lintian.txt, and testlog.json: one line a check in the format of meson's
# testlog.json ("name", "result": OK or FAIL, "duration"), which .ci/run
# counts. Exits 1 if a check failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
test=0
out=
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    --test) test=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "package.sh: unknown argument $arg" >&2; exit 2 ;;
    *) out=$arg ;;
  esac
done
out=${out:-build-deb}
case "$out" in /*) ;; *) out="$here/$out" ;; esac

# The lintian warnings docs/packaging.md explains; any other fails.
allowed_warnings=(initial-upload-closes-no-bugs no-manual-page)

"$here/scripts/setup.sh" >/dev/null || exit 1
rm -rf "$out"
mkdir -p "$out"
: >"$out/testlog.json"

# one line of testlog.json: name, OK or FAIL, seconds
record () {
  printf '{"name": "%s", "suite": ["package"], "result": "%s", "duration": %s}\n' \
    "$1" "$2" "$3" >>"$out/testlog.json"
  if [ "$2" = OK ]; then echo "ok: $1 (${3}s)"; else echo "FAILED: $1 (${3}s)"; fi
}

work=$(mktemp -d /tmp/legba-package.XXXXXX)
trap 'rm -rf "$work"' EXIT

version=$(cd "$here" && dpkg-parsechangelog -S Version) || exit 1
upstream=${version%-*}
meson_version=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$here/meson.build")
if [ "$upstream" != "$meson_version" ]; then
  echo "package.sh: debian/changelog says $version, meson.build $meson_version" >&2
  record package/version FAIL 0
  exit 1
fi

src="$work/legba-$upstream"
mkdir -p "$src"
git -C "$here" archive --format=tar HEAD | tar -x -C "$src" || exit 1
if ! git -C "$here" diff --quiet HEAD -- 2>/dev/null; then
  echo "package.sh: uncommitted changes are not packaged (git archive HEAD)"
fi

start=$SECONDS
opts="parallel=$(nproc)"
profiles=
if [ $check -eq 0 ]; then
  opts="$opts nocheck"
  profiles=nocheck
fi
echo "package.sh: dpkg-buildpackage -b -us -uc on $(git -C "$here" rev-parse --short HEAD) (log: $out/build.log)"
if (cd "$src" && DEB_BUILD_OPTIONS="$opts" DEB_BUILD_PROFILES="$profiles" \
      dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
  record package/build OK $((SECONDS - start))
else
  tail -n 40 "$out/build.log"
  record package/build FAIL $((SECONDS - start))
  exit 1
fi
changes=legba_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).changes
sed -n '/^Files:/,$p' "$work/$changes" | awk 'NF == 5 { print $5 }' |
  while read -r f; do mv "$work/$f" "$out/"; done
mv "$work/$changes" "$out/"

start=$SECONDS
# exit 1: an error, which the tags below show; anything else: lintian failed
lintian --info "$out/$changes" >"$out/lintian.txt" 2>&1
lintian_rc=$?
tags=$(grep -E '^[EW]: ' "$out/lintian.txt" | awk '{ print $1 " " $3 }' |
  sort | uniq -c)
echo "lintian:"
echo "${tags:-  no error, no warning}"
bad=$(grep -E '^[EW]: ' "$out/lintian.txt" | awk '{ print $1 " " $3 }' | sort -u |
  while read -r level tag; do
    if [ "$level" = E: ]; then echo "$tag"; continue; fi
    allowed=0
    for w in "${allowed_warnings[@]}"; do [ "$tag" = "$w" ] && allowed=1; done
    [ $allowed -eq 1 ] || echo "$tag"
  done)
if [ $lintian_rc -gt 1 ]; then
  tail -n 20 "$out/lintian.txt"
  echo "lintian: exit $lintian_rc"
  record package/lintian FAIL $((SECONDS - start))
elif [ -z "$bad" ] && ! grep -q '^E: ' "$out/lintian.txt"; then
  record package/lintian OK $((SECONDS - start))
else
  echo "lintian: errors, or warnings docs/packaging.md does not list: $bad"
  record package/lintian FAIL $((SECONDS - start))
fi

echo "packages in $out:"
(cd "$out" && for f in *.deb; do
  printf '  %-48s %6s KiB\n' "$f" $(( $(stat -c %s "$f") / 1024 ))
done)

if [ $test -eq 1 ]; then
  "$here/scripts/check-packages.sh" "$out"
fi
! grep -q '"result": "FAIL"' "$out/testlog.json"
