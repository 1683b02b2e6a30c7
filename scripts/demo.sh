#!/usr/bin/env bash
# The main job: sets up and builds Legba, then runs a real call in one
# process (build/tools/legba-demo): legba-server on a free loopback port,
# and alice, bob and carol in one room with test sources, each sending the
# others video, audio and a data message. Prints what each received (video
# frames decoded per remote participant, audio buffers, data messages,
# glass-to-glass latency) and exits 0 only if media and data flowed every
# way. Arguments go to legba-demo (--seconds S, --width, --height, --fps,
# --codec h264|vp8).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
[ -f build/build.ninja ] || meson setup build
ninja -C build

exec build/tools/legba-demo "$@"
