#!/bin/sh
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Starts a Janus 1.1 of its own for a test: a configuration folder generated
# into DIR (janus.jcfg with only janus.plugin.videoroom,
# janus.transport.http and janus.transport.websockets, on free ports, with
# an API secret and the VideoRoom's admin_key, ICE on loopback), Janus in
# the background, and waits until its HTTP API answers `info`. Then prints,
# one per line, what a test needs, in shell syntax:
#
#   JANUS_PID=1234
#   JANUS_HTTP_URL=http://127.0.0.1:PORT/janus
#   JANUS_WS_URL=ws://127.0.0.1:PORT/
#   JANUS_API_SECRET=...
#   JANUS_ADMIN_KEY=...
#
# and exits 0; Janus keeps running until `kill JANUS_PID` (or
# `start-janus.sh --stop DIR`). Its log is DIR/janus.log. Exit status 77
# when janus is not installed (the caller skips), 1 when it does not start.
#
#   eval "$(tests/common/start-janus.sh "$tmp")" && ... ; kill "$JANUS_PID"
#
# JANUS_RTP_PORTS (default 100) is how many ports its RTP range holds:
# one per peer connection, and an SFU room of N participants that all
# publish holds N publishers and N * (N - 1) subscribers (a viewer, which
# publishes nothing, adds one subscriber per publisher only).
# JANUS_API_SECRET and JANUS_ADMIN_KEY in the environment choose the
# secrets (random otherwise); JANUS_API_SECRET set but empty starts Janus
# without an API secret, as one that clients reach directly runs (a client
# holding a room's pin and token opens its own session).
# JANUS_ADMIN_SECRET set opens Janus's admin API (HTTP, on 127.0.0.1)
# with that admin_secret, and prints its url too (JANUS_ADMIN_URL=...).
set -eu

if [ "${1:-}" = "--stop" ]; then
  dir=$2
  if [ -f "$dir/janus.pid" ]; then
    pid=$(cat "$dir/janus.pid")
    kill "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/janus.pid"
  fi
  exit 0
fi

dir=${1:?usage: start-janus.sh DIR | start-janus.sh --stop DIR}
janus=$(command -v janus || true)
if [ -z "$janus" ]; then
  echo "start-janus.sh: janus is not installed (Debian: apt-get install janus)" >&2
  exit 77
fi
libdir=$(dirname "$(dpkg -L janus 2>/dev/null | grep '/janus/plugins/libjanus_videoroom.so$' | head -n 1)" 2>/dev/null || true)
libdir=${libdir%/plugins}
if [ -z "$libdir" ] || [ ! -d "$libdir/plugins" ]; then
  libdir=$(ls -d /usr/lib/*/janus 2>/dev/null | head -n 1)
fi

mkdir -p "$dir/conf"
rtp_ports=${JANUS_RTP_PORTS:-100}
case $rtp_ports in
  ''|*[!0-9]*) echo "start-janus.sh: JANUS_RTP_PORTS is not a number" >&2; exit 1 ;;
esac
if [ "$rtp_ports" -lt 1 ] || [ "$rtp_ports" -gt 5000 ]; then
  echo "start-janus.sh: JANUS_RTP_PORTS is not within 1..5000" >&2
  exit 1
fi
secret=${JANUS_API_SECRET-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
admin_key=${JANUS_ADMIN_KEY:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}

# Every other plugin and transport installed is disabled by name.
others () {
  keep=$2
  ls "$libdir/$1" | grep '\.so$' | grep -v "^$keep" | tr '\n' ',' | sed 's/,$//'
}

free_port () {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

if [ -n "$secret" ]; then
  api_secret_line="	api_secret = \"$secret\""
else
  api_secret_line=""
fi

write_config () {
  if [ -n "${JANUS_ADMIN_SECRET:-}" ]; then
    admin_secret_line="	admin_secret = \"$JANUS_ADMIN_SECRET\""
    admin_http_lines="	admin_http = true
	admin_port = $admin_port
	admin_ip = \"127.0.0.1\"
	admin_base_path = \"/admin\""
  else
    admin_secret_line=""
    admin_http_lines="	admin_http = false"
  fi
  cat > "$dir/conf/janus.jcfg" <<EOF
general: {
	configs_folder = "$dir/conf"
	plugins_folder = "$libdir/plugins"
	transports_folder = "$libdir/transports"
	events_folder = "$libdir/events"
	loggers_folder = "$libdir/loggers"
	debug_level = 4
$api_secret_line
$admin_secret_line
	session_timeout = 60
	protected_folders = [ "/bin", "/boot", "/dev", "/etc", "/lib", "/proc", "/sbin", "/sys", "/usr", "/var" ]
}
certificates: {
}
media: {
	rtp_port_range = "$rtp_min-$rtp_max"
}
nat: {
	nice_debug = false
	ice_enforce_list = "lo"
	ignore_mdns = true
}
plugins: {
	disable = "$(others plugins libjanus_videoroom.so)"
}
transports: {
	disable = "$(others transports 'libjanus_\(http\|websockets\)\.so')"
}
loggers: {
	disable = "$(ls "$libdir/loggers" 2>/dev/null | grep '\.so$' | tr '\n' ',' | sed 's/,$//')"
}
events: {
	broadcast = false
}
EOF
  cat > "$dir/conf/janus.transport.http.jcfg" <<EOF
general: {
	json = "compact"
	base_path = "/janus"
	http = true
	port = $http_port
	interface = "lo"
	ip = "127.0.0.1"
	https = false
}
admin: {
$admin_http_lines
}
EOF
  cat > "$dir/conf/janus.transport.websockets.jcfg" <<EOF
general: {
	json = "compact"
	ws = true
	ws_port = $ws_port
	ws_ip = "127.0.0.1"
	wss = false
}
admin: {
	admin_ws = false
}
EOF
  cat > "$dir/conf/janus.plugin.videoroom.jcfg" <<EOF
general: {
	admin_key = "$admin_key"
	lock_rtp_forward = true
}
EOF
}

# Answers once the HTTP API does: {"janus": "server_info", ...}.
answers () {
  curl -s -m 2 "http://127.0.0.1:$http_port/janus/info" 2>/dev/null |
    grep -q '"server_info"'
}

attempt=0
while [ $attempt -lt 3 ]; do
  attempt=$((attempt + 1))
  http_port=$(free_port)
  ws_port=$(free_port)
  admin_port=$(free_port)
  rtp_min=$(( 20000 + ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 400) * 100 ))
  rtp_max=$((rtp_min + rtp_ports - 1))
  write_config
  setsid "$janus" -F "$dir/conf" -C "$dir/conf/janus.jcfg" -o -N \
    -L "$dir/janus.log" </dev/null >/dev/null 2>&1 &
  pid=$!
  echo "$pid" > "$dir/janus.pid"
  i=0
  while [ $i -lt 200 ] && kill -0 "$pid" 2>/dev/null; do
    if answers; then
      echo "JANUS_PID=$pid"
      echo "JANUS_HTTP_URL=http://127.0.0.1:$http_port/janus"
      echo "JANUS_WS_URL=ws://127.0.0.1:$ws_port/"
      echo "JANUS_API_SECRET=$secret"
      echo "JANUS_ADMIN_KEY=$admin_key"
      if [ -n "${JANUS_ADMIN_SECRET:-}" ]; then
        echo "JANUS_ADMIN_URL=http://127.0.0.1:$admin_port/admin"
      fi
      exit 0
    fi
    sleep 0.1
    i=$((i + 1))
  done
  # A port taken meanwhile, or too slow: stop it and try fresh ports.
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
echo "start-janus.sh: janus did not answer on 127.0.0.1:$http_port; its log:" >&2
tail -n 30 "$dir/janus.log" >&2 || true
exit 1
