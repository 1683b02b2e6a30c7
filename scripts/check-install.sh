#!/usr/bin/env bash
# Installs a plain build into a scratch DESTDIR and uses it from outside the
# tree, as a program or plugin built elsewhere would, through the installed
# .pc files only:
#   - examples/call.c and chat.c against legba-gst-1.0, examples/server.c
#     against legba-server-1.0, built and linked; the server example run;
#   - the plugin's elements built from plugins/legba/ against legba-gst-1.0
#     and found by gst-inspect-1.0;
#   - `from gi.repository import Legba, LegbaServer` from the installed
#     typelibs;
#   - legba-server links no GStreamer library, libgstlegba.so no hiredis;
#   - with -Ddocs=enabled, the references under share/doc/legba-1.0.
# Prints one line per check and exits 1 if any failed.
#   scripts/check-install.sh [BUILD_DIR]     (default: build)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build}
cd "$here"
"$here/scripts/setup.sh" >/dev/null
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --werror -Dintegration=enabled >/dev/null || exit 1
fi
ninja -C "$build" >/dev/null || exit 1

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --quiet >/dev/null || exit 1
prefix=$(meson introspect "$build" --buildoptions |
  /usr/bin/python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
libdir=$(meson introspect "$build" --buildoptions |
  /usr/bin/python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["libdir"])')
case "$libdir" in /*) ;; *) libdir="$prefix/$libdir" ;; esac
out="$dest/out"
mkdir -p "$out/pkgconfig"
# the installed .pc files, with their prefix moved to where DESTDIR put it
for pc in "$dest$libdir"/pkgconfig/legba-*.pc; do
  sed "s|^prefix=.*|prefix=$dest$prefix|" "$pc" >"$out/pkgconfig/${pc##*/}"
done
export PKG_CONFIG_PATH="$out/pkgconfig"
export LD_LIBRARY_PATH="$dest$libdir"

failed=0
check () {
  local what=$1
  shift
  if "$@" >"$out/log" 2>&1; then
    echo "ok: $what"
  else
    echo "FAILED: $what"
    sed 's/^/  /' "$out/log"
    failed=$((failed + 1))
  fi
}

cflags="-Wall -Werror -std=gnu11"
gst_flags=$(pkg-config --cflags --libs legba-gst-1.0)
server_flags=$(pkg-config --cflags --libs legba-server-1.0)
for name in call chat; do
  # shellcheck disable=SC2086
  check "examples/$name.c against legba-gst-1.0" \
    cc $cflags -o "$out/$name" "examples/$name.c" $gst_flags \
    $(pkg-config --cflags --libs gio-unix-2.0)
done
# shellcheck disable=SC2086
check "examples/server.c against legba-server-1.0" \
  cc $cflags -o "$out/server" examples/server.c $server_flags
check "the server example links no GStreamer library" \
  bash -c "! ldd '$out/server' | grep -q libgst"
check "the server example listens" bash -c \
  "timeout 10 '$out/server' key secret | head -n 1 | grep -q '^http://127.0.0.1:'"

plugin_flags=$(pkg-config --cflags --libs legba-gst-1.0 gstreamer-base-1.0 \
  gstreamer-video-1.0 gstreamer-app-1.0)
# shellcheck disable=SC2086
check "the plugin's elements against legba-gst-1.0" \
  cc $cflags -shared -fPIC -DG_LOG_DOMAIN='"Legba"' -DPACKAGE='"legba"' \
  -DVERSION='"outside"' -o "$out/libgstlegba.so" plugins/legba/*.c \
  $plugin_flags
check "gst-inspect-1.0 finds legbaroom in the plugin built outside" \
  env GST_REGISTRY_1_0="$out/registry.bin" GST_PLUGIN_PATH_1_0="$out" \
  GST_PLUGIN_SYSTEM_PATH_1_0="" gst-inspect-1.0 legbaroom
check "the installed libgstlegba.so links no hiredis" \
  bash -c "! ldd '$dest$libdir/gstreamer-1.0/libgstlegba.so' | grep -q hiredis"
check "the installed legba-server links no GStreamer library" \
  bash -c "! ldd '$dest$prefix/bin/legba-server' | grep -q libgst"

if [ -d "$dest$libdir/girepository-1.0" ]; then
  check "Legba and LegbaServer from the installed typelibs" \
    env GI_TYPELIB_PATH="$dest$libdir/girepository-1.0" /usr/bin/python3 -c "
import gi
gi.require_version('Legba', '1.0')
gi.require_version('LegbaServer', '1.0')
from gi.repository import Legba, LegbaServer
assert LegbaServer.Server.new() is not None
assert Legba.Call.new('ws://127.0.0.1:1', 'r', 'i') is not None
"
fi

datadir=$(meson introspect "$build" --buildoptions |
  /usr/bin/python3 -c 'import json,sys; o={o["name"]: o["value"] for o in json.load(sys.stdin)}; print(o["datadir"] if o.get("docs") == "enabled" else "")')
if [ -n "$datadir" ]; then
  case "$datadir" in /*) ;; *) datadir="$prefix/$datadir" ;; esac
  docs="$dest$datadir/doc/legba-1.0"
  check "the API and element references in share/doc/legba-1.0" \
    test -f "$docs/Legba-1.0/class.Room.html" \
    -a -f "$docs/LegbaServer-1.0/class.Server.html" \
    -a -f "$docs/elements/legbaroom.md"
fi

echo "check-install: $failed failed"
[ "$failed" -eq 0 ]
