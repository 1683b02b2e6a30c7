#!/usr/bin/env bash
# The main job: sets up and builds Legba, then runs a real call in one
# process (build/tools/legba-demo): legba-server on a free loopback port,
# and alice, bob and carol in one room with test sources, each sending the
# others video, audio and a data message. Prints what each received (video
# frames decoded per remote participant, audio buffers, data messages,
# glass-to-glass latency) and exits 0 only if media and data flowed every
# way. Arguments go to legba-demo (--seconds S, --width, --height, --fps,
# --codec h264|vp8), but --sfu: the call then runs in an SFU room, on a
# Janus of its own (tests/common/start-janus.sh in a temporary folder,
# stopped and removed when the script exits).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sfu=0
args=()
for arg in "$@"; do
  if [ "$arg" = "--sfu" ]; then
    sfu=1
  else
    args+=("$arg")
  fi
done

"$here/scripts/setup.sh"
cd "$here"
[ -f build/build.ninja ] || meson setup build
ninja -C build

if [ "$sfu" = 0 ]; then
  exec build/tools/legba-demo "${args[@]}"
fi

janus_dir=$(mktemp -d)
trap 'tests/common/start-janus.sh --stop "$janus_dir"; rm -rf "$janus_dir"' EXIT
# an open Janus (no API secret), as one the participants reach directly runs
janus_env=$(JANUS_API_SECRET='' tests/common/start-janus.sh "$janus_dir")
eval "$janus_env"
build/tools/legba-demo --janus-url "$JANUS_HTTP_URL" \
  --janus-ws-url "$JANUS_WS_URL" --janus-admin-key "$JANUS_ADMIN_KEY" \
  "${args[@]}"
