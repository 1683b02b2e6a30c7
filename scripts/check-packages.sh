#!/usr/bin/env bash
# Installs the Debian packages scripts/package.sh built into a fresh root
# and uses them from there, as someone who installed them would:
#   - the root: an overlay over this machine's / (its upper layer in a
#     temporary directory, so / is never written), chrooted into, with
#     fresh /proc, /sys, /tmp and /run, in a mount namespace of its own;
#     no Legba there before (checked: the machine must not have it
#     installed), every dependency there already (`dpkg -i` installs the
#     packages, and refuses one whose dependency is missing);
#   - there: the files in place (unit, configuration readable by root
#     only, demo page); the unit passes systemd-analyze verify and reads
#     /etc/legba/legba-server.conf; gst-inspect-1.0 finds legbaroom; legba-server
#     refuses the default configuration's empty secret, and with a secret
#     serves the demo page and a call in which two legba-call processes
#     (one with the app secret, one with a token from legba-token)
#     receive video, audio and data from each other; Legba and
#     LegbaServer import in Python from the typelibs; a C program built
#     with `pkg-config --cflags --libs legba-gst-1.0 legba-server-1.0`
#     links and runs.
# Needs root (mount, chroot). Prints one line a check, appends them to
# OUT/testlog.json (scripts/package.sh) and exits 1 if any failed.
#   scripts/check-packages.sh OUT
set -uo pipefail

out=${1:?usage: scripts/check-packages.sh OUT (the folder of scripts/package.sh)}
out=$(cd "$out" && pwd) || exit 1
if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "$@"
fi
# Everything mounted here lives in a mount namespace of its own: nothing
# reaches the machine's mounts, and it all goes when the script ends.
if [ -z "${LEGBA_CHECK_PACKAGES_NS:-}" ]; then
  LEGBA_CHECK_PACKAGES_NS=1 exec unshare --mount --propagation private \
    "$0" "$@"
fi

begin=$SECONDS
failed=0
record () {
  printf '{"name": "%s", "suite": ["package"], "result": "%s", "duration": %s}\n' \
    "$1" "$2" "$3" >>"$out/testlog.json"
}
# check NAME COMMAND...: runs COMMAND, says ok or FAILED with its output
check () {
  local name=$1 start=$SECONDS
  shift
  if "$@" >"$tmp/log" 2>&1; then
    echo "ok: $name"
    record "package/$name" OK $((SECONDS - start))
  else
    echo "FAILED: $name"
    sed 's/^/  /' "$tmp/log"
    record "package/$name" FAIL $((SECONDS - start))
    failed=$((failed + 1))
  fi
}

tmp=$(mktemp -d /tmp/legba-root.XXXXXX)
root="$tmp/root"
pids=()
mounts=()
cleanup () {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[$i]}" || umount -l "${mounts[$i]}"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$tmp/upper" "$tmp/work" "$root"
mount_at () {
  local where=$1
  shift
  mount "$@" "$where" || { echo "check-packages: cannot mount $where" >&2; exit 1; }
  mounts+=("$where")
}
mount_at "$root" -t overlay legba-root \
  -o "lowerdir=/,upperdir=$tmp/upper,workdir=$tmp/work"
mount_at "$root/proc" -t proc proc
mount_at "$root/sys" --bind /sys
mount_at "$root/dev" --bind /dev
mount_at "$root/tmp" -t tmpfs tmpfs
mount_at "$root/run" -t tmpfs tmpfs

# "${in_root[@]}" COMMAND...: runs COMMAND in the root, with a clean
# environment (an array, not a function: `"${in_root[@]}" X &` leaves $!
# the process of X itself, which is what a kill must reach)
in_root=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/home
  LANG=C.UTF-8 GST_REGISTRY_1_0=/tmp/gst-registry.bin
  DEBIAN_FRONTEND=noninteractive chroot "$root")

# The root must not have Legba before: CI's machine only builds it, never
# installs it. A leftover would let the checks pass on it instead.
absent () {
  local found
  found=$("${in_root[@]}" ldconfig -p | grep legba)
  [ -z "$found" ] || { echo "ldconfig -p finds: $found"; return 1; }
  found=$(cd "$root" && ls -d usr/lib/*/liblegba* usr/local/lib/liblegba* \
    usr/local/lib/*/liblegba* usr/lib/*/gstreamer-1.0/libgstlegba.so \
    usr/local/lib/*/gstreamer-1.0/libgstlegba.so usr/bin/legba-* \
    usr/local/bin/legba-* usr/lib/*/girepository-1.0/Legba* 2>/dev/null)
  [ -z "$found" ] || { echo "already there: $found"; return 1; }
  found=$("${in_root[@]}" dpkg-query -W 'liblegba*' 'legba-*' \
    'gstreamer1.0-legba' 2>/dev/null)
  [ -z "$found" ] || { echo "dpkg has: $found"; return 1; }
}
check "no-legba-before" absent
if [ $failed -gt 0 ]; then
  echo "check-packages: this machine has Legba installed (above): the fresh root would not be fresh; remove it first"
  exit 1
fi

mkdir -p "$root/tmp/debs" "$root/tmp/home" "$root/tmp/t"
debs=()
for f in "$out"/*.deb; do
  case "$f" in *-dbgsym_*) continue ;; esac
  cp "$f" "$root/tmp/debs/"
  debs+=("/tmp/debs/${f##*/}")
done
# dpkg, not apt: nothing may be fetched, and dpkg refuses a package
# whose dependencies the root lacks
check install "${in_root[@]}" dpkg -i "${debs[@]}"

# (no `COMMAND | grep -q` here: with pipefail, grep leaving early fails it)
files () {
  local conf list
  list=$("${in_root[@]}" dpkg -L legba-server) || return 1
  grep -qx /lib/systemd/system/legba-server.service <<<"$list" &&
    [ -f "$root/lib/systemd/system/legba-server.service" ] &&
    [ -f "$root/usr/share/legba/demo/index.html" ] &&
    [ -f "$root/usr/share/legba/demo/room-peer.js" ] &&
    [ -f "$root/usr/share/legba/demo/room-sfu.js" ] || return 1
  conf=$(stat -c '%a %U' "$root/etc/legba/legba-server.conf") || return 1
  [ "$conf" = "600 root" ] || { echo "legba-server.conf: $conf"; return 1; }
  list=$("${in_root[@]}" dpkg-query -W -f='${Conffiles}\n' legba-server)
  grep -q /etc/legba/legba-server.conf <<<"$list" ||
    { echo "not a conffile"; return 1; }
  for tool in legba-call legba-probe legba-token legba-bench legba-encoders \
      legba-demo legba-server; do
    "${in_root[@]}" "$tool" --help >/dev/null 2>&1 ||
      { echo "$tool --help failed"; return 1; }
  done
  list=$("${in_root[@]}" ldconfig -p)
  grep -q 'liblegba-gst-1.0.so.0 ' <<<"$list" &&
    grep -q 'liblegba-server-1.0.so.0 ' <<<"$list" ||
    { echo "ldconfig -p does not find both libraries"; return 1; }
}
check files files

# The unit as installed: systemd-analyze verify accepts it (its ExecStart=
# exists here), and it reads the configuration the package ships.
unit () {
  local unit=/lib/systemd/system/legba-server.service err
  grep -qx 'LoadCredential=legba-server.conf:/etc/legba/legba-server.conf' \
    "$root$unit" || { echo "$unit: no credential from /etc/legba"; return 1; }
  grep -q '^ExecStart=/usr/bin/legba-server ' "$root$unit" ||
    { echo "$unit: ExecStart= is not /usr/bin/legba-server"; return 1; }
  err=$("${in_root[@]}" systemd-analyze verify "$unit" 2>&1) || { echo "$err"; return 1; }
  [ -z "$err" ] || { echo "$err"; return 1; }
}
check unit unit
check gst-inspect "${in_root[@]}" gst-inspect-1.0 legbaroom

# The package's configuration as shipped: the secret is the operator's.
refused () {
  local rc=0
  timeout 30 "${in_root[@]}" legba-server \
    --config /etc/legba/legba-server.conf >"$tmp/refused" 2>&1 || rc=$?
  cat "$tmp/refused"
  [ $rc -eq 1 ] && grep -q 'secret: not set yet' "$tmp/refused"
}
check default-config-refused refused

# wait_for DEADLINE_SECONDS WHAT COMMAND...: until COMMAND succeeds
wait_for () {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      echo "gave up waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

# The server of the checks below: the shipped configuration with a
# secret and a free port (0: the kernel's choice, printed at start).
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
port=
server () {
  sed -e "s/^secret =.*/secret = $secret/" -e 's/^port = .*/port = 0/' \
    "$root/etc/legba/legba-server.conf" >"$root/tmp/t/legba-server.conf"
  "${in_root[@]}" legba-server --config /tmp/t/legba-server.conf \
    --web-dir /usr/share/legba/demo >"$tmp/server.out" 2>"$tmp/server.err" &
  pids+=($!)
  wait_for 30 "legba-server listening" grep -q 'listening on' \
    "$tmp/server.out" || { cat "$tmp/server.out" "$tmp/server.err"; return 1; }
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/server.out")
  [ -n "$port" ]
}
check server-starts server
if [ -z "$port" ]; then
  echo "check-packages: $failed failed ($((SECONDS - begin))s)"
  exit 1
fi

demo () {
  "${in_root[@]}" /usr/bin/python3 -c "
import urllib.request
page = urllib.request.urlopen('http://127.0.0.1:$port/demo/').read().decode()
assert 'room-peer.js' in page, page
"
}
check demo-page demo

# received FILE WHO: FILE (legba-call's stderr) shows a data message from
# WHO and a --stats line with video frames and audio buffers from WHO
received () {
  grep -q "data from $2:" "$1" &&
    grep -Eq " \| $2 [1-9][0-9]* frames [1-9][0-9]* audio" "$1"
}
both_received () {
  received "$tmp/alice.err" bob && received "$tmp/bob.err" alice
}
call () {
  local token a b rc=0
  token=$("${in_root[@]}" legba-token --secret "$secret" --room packaged \
    --identity bob) || return 1
  local common=(--server "ws://127.0.0.1:$port" --room packaged --key app-key
    --width 160 --height 120 --fps 15 --bitrate 200
    --encoder-proof-timeout 30000 --duration 600 --stats
    --expect-participants 1 --json)
  "${in_root[@]}" legba-call "${common[@]}" --identity alice --secret "$secret" \
    --send-data '{"from": "alice"}' >"$tmp/alice.out" 2>"$tmp/alice.err" &
  a=$!
  "${in_root[@]}" legba-call "${common[@]}" --identity bob --app-id 1 \
    --token "$token" --send-data '{"from": "bob"}' \
    >"$tmp/bob.out" 2>"$tmp/bob.err" &
  b=$!
  pids+=("$a" "$b")
  # a busy machine: up to 3 minutes for both to receive everything
  if ! wait_for 180 "media and data both ways" both_received; then
    kill "$a" "$b"
    rc=1
  else
    kill -TERM "$a" "$b"
  fi
  wait "$a" || rc=1
  wait "$b" || rc=1
  grep -q '"identity" *: *"bob"' "$tmp/alice.out" &&
    grep -q '"identity" *: *"alice"' "$tmp/bob.out" || rc=1
  if [ $rc -ne 0 ]; then
    for who in alice bob; do
      echo "--- $who:"
      cat "$tmp/$who.out" "$tmp/$who.err"
    done
  fi
  return $rc
}
check legba-call call

python () {
  "${in_root[@]}" /usr/bin/python3 -c '
import gi
gi.require_version("Legba", "1.0")
gi.require_version("LegbaServer", "1.0")
gi.require_version("Gst", "1.0")
from gi.repository import Gst, Legba, LegbaServer
Gst.init(None)
assert LegbaServer.Server.new() is not None
assert Legba.Call.new("ws://127.0.0.1:1", "r", "i") is not None
'
}
check python-gi python

program () {
  cat >"$root/tmp/t/program.c" <<'EOF'
#include <legba/legba.h>
#include <legba/server/server.h>

int
main (int argc, char **argv)
{
  LegbaServer *server;
  LegbaCall *call;

  gst_init (&argc, &argv);
  server = legba_server_new ();
  call = legba_call_new ("ws://127.0.0.1:1", "room", "ada");
  if (server == NULL || call == NULL)
    return 1;
  g_print ("legba %s\n", LEGBA_VERSION);
  g_object_unref (call);
  g_object_unref (server);
  return 0;
}
EOF
  local libs
  "${in_root[@]}" sh -c 'cc -Wall -Werror -o /tmp/t/program /tmp/t/program.c \
      $(pkg-config --cflags --libs legba-gst-1.0 legba-server-1.0)' || return 1
  libs=$("${in_root[@]}" ldd /tmp/t/program) || return 1
  grep -Eq 'liblegba-gst-1.0.so.0 => (/usr)?/lib/' <<<"$libs" &&
    grep -Eq 'liblegba-server-1.0.so.0 => (/usr)?/lib/' <<<"$libs" ||
    { echo "$libs"; return 1; }
  "${in_root[@]}" /tmp/t/program
}
check pkg-config-program program

echo "check-packages: $failed failed ($((SECONDS - begin))s)"
[ $failed -eq 0 ]
