#!/usr/bin/env bash
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The network lab's topology (docs/benchmarks.md, "Network lab"), as root:
# three network namespaces, a sender side and a receiver side with a
# router between them, joined by veth pairs, on addresses of their own:
#
#   NAME-snd            NAME-rtr                              NAME-rcv
#   lab0 10.201.1.2 -- to-snd 10.201.1.1
#                       [delayline: dl-snd <-> dl-rcv, TUN]
#                       to-rcv 10.201.2.1 (tbf) ------------- lab0 10.201.2.2
#
# Every packet the router forwards between the sides crosses the delay
# line (bench/netlab/delayline.c: delay, jitter, random loss from the
# sender side to the receiver side, counts); the bottleneck is a tbf
# qdisc on the router's interface towards the receiver (rate, with a
# queue of so many ms). Nothing of the lab lives outside its namespaces.
#
#   lab.sh up [--name NAME] [--rate KBIT] [--queue MS] [--delay MS]
#             [--jitter MS] [--reorder] [--loss PERCENT] [--delayline PATH]
#   lab.sh rate [--name NAME] KBIT|none   change the bottleneck's rate
#   lab.sh run [up's options] -- COMMAND [ARG...]
#             up, COMMAND (with LAB_* in its environment), then down,
#             also when COMMAND fails or a signal ends the script
#   lab.sh env [--name NAME]              the LAB_* variables of a lab
#   lab.sh down [--name NAME]             ends the lab's processes and
#                                         deletes its namespaces
#   lab.sh down --all                     the same for every legba-lab-*
#                                         namespace (leftovers)
#
# NAME: legba-lab (the default) or legba-lab-SUFFIX, so that two labs can
# exist at once (a benchmark and a test). The delay line's per-second
# counts go to /run/NAME/delayline.jsonl.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=legba-lab
rate=none
queue=200
delay=0
jitter=0
loss=0
reorder=()
all=0
delayline=${LEGBA_DELAYLINE:-}

die() { echo "lab.sh: $*" >&2; exit 2; }

parse() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) name=${2:?}; shift 2 ;;
      --rate) rate=${2:?}; shift 2 ;;
      --queue) queue=${2:?}; shift 2 ;;
      --delay) delay=${2:?}; shift 2 ;;
      --jitter) jitter=${2:?}; shift 2 ;;
      --loss) loss=${2:?}; shift 2 ;;
      --reorder) reorder=(--reorder); shift ;;
      --delayline) delayline=${2:?}; shift 2 ;;
      --all) all=1; shift ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  rest=("$@")
  [[ "$name" =~ ^legba-lab(-[a-z0-9]+)?$ ]] ||
    die "--name is legba-lab or legba-lab-SUFFIX (lowercase, digits)"
  [[ "$rate" = none || "$rate" =~ ^[1-9][0-9]*$ ]] ||
    die "--rate is kbit/s or none"
  for v in "$queue" "$delay" "$jitter"; do
    [[ "$v" =~ ^[0-9]+$ ]] || die "--queue, --delay, --jitter are ms"
  done
  [[ "$loss" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--loss is a percentage"
  snd=$name-snd; rtr=$name-rtr; rcv=$name-rcv
  state=/run/$name
}

lab_env() {
  cat <<EOF
LAB_NAME=$name
LAB_SND_NS=$snd
LAB_RTR_NS=$rtr
LAB_RCV_NS=$rcv
LAB_SND_ADDR=10.201.1.2
LAB_RCV_ADDR=10.201.2.2
LAB_RTR_SND_ADDR=10.201.1.1
LAB_RTR_RCV_ADDR=10.201.2.1
LAB_BOTTLENECK_DEV=to-rcv
LAB_DELAYLINE_LOG=$state/delayline.jsonl
EOF
}

# tbf's bucket: at least two full packets, or 4 ms at the rate.
shape() {
  local verb=$1 r=$2
  if [ "$r" = none ]; then
    ip -n "$rtr" link show to-rcv >/dev/null
    tc -n "$rtr" qdisc del dev to-rcv root 2>/dev/null || true
    return
  fi
  local burst=$(( r * 1000 / 8 / 250 ))
  [ $burst -ge 3028 ] || burst=3028
  if [ "$verb" = change ] &&
      ! tc -n "$rtr" qdisc show dev to-rcv | grep -q '^qdisc tbf'; then
    verb=add
  fi
  tc -n "$rtr" qdisc "$verb" dev to-rcv root tbf rate "${r}kbit" \
    burst "$burst" latency "${queue}ms"
}

wait_carrier() {
  local dev=$1 i
  for i in $(seq 100); do
    ip -n "$rtr" link show "$dev" | grep -q NO-CARRIER || return 0
    sleep 0.05
  done
  die "the delay line did not attach to $dev (see $state/delayline.err)"
}

up() {
  [ -n "$delayline" ] && [ -x "$delayline" ] ||
    die "the delay line is not built: --delayline PATH or LEGBA_DELAYLINE"
  for ns in "$snd" "$rtr" "$rcv"; do
    if ip netns list | grep -qw "^$ns"; then
      die "$ns exists: lab.sh down --name $name first"
    fi
  done
  mkdir -p "$state"
  ip netns add "$rtr"
  ip netns add "$snd"
  ip netns add "$rcv"
  # IPv4 only: no link-local addresses or router solicitations of the
  # devices' own in the delay line's counts or among ICE candidates
  for ns in "$snd" "$rtr" "$rcv"; do
    ip netns exec "$ns" sh -c '
      sysctl -qw net.ipv6.conf.all.disable_ipv6=1
      sysctl -qw net.ipv6.conf.default.disable_ipv6=1'
  done
  ip -n "$rtr" link add to-snd type veth peer name lab0 netns "$snd"
  ip -n "$rtr" link add to-rcv type veth peer name lab0 netns "$rcv"
  for ns in "$snd" "$rtr" "$rcv"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$snd" addr add 10.201.1.2/24 dev lab0
  ip -n "$snd" link set lab0 up
  ip -n "$snd" route add default via 10.201.1.1
  ip -n "$rcv" addr add 10.201.2.2/24 dev lab0
  ip -n "$rcv" link set lab0 up
  ip -n "$rcv" route add default via 10.201.2.1
  ip -n "$rtr" addr add 10.201.1.1/24 dev to-snd
  ip -n "$rtr" addr add 10.201.2.1/24 dev to-rcv
  ip -n "$rtr" link set to-snd up
  ip -n "$rtr" link set to-rcv up
  ip netns exec "$rtr" sh -c '
    sysctl -qw net.ipv4.ip_forward=1
    sysctl -qw net.ipv4.conf.all.rp_filter=0
    sysctl -qw net.ipv4.conf.default.rp_filter=0'
  for dev in dl-snd dl-rcv; do
    ip -n "$rtr" tuntap add mode tun name "$dev"
    ip netns exec "$rtr" sysctl -qw "net.ipv4.conf.$dev.rp_filter=0"
    ip -n "$rtr" link set "$dev" up
  done
  ip netns exec "$rtr" "$delayline" --dev-a dl-snd --dev-b dl-rcv \
    --delay "$delay" --jitter "$jitter" --loss "$loss" "${reorder[@]}" \
    >"$state/delayline.jsonl" 2>"$state/delayline.err" &
  echo $! >"$state/delayline.pid"
  wait_carrier dl-snd
  wait_carrier dl-rcv
  # what comes in from one side goes into the delay line; what comes out
  # of it is routed by the main table
  ip -n "$rtr" rule add iif to-snd lookup 201
  ip -n "$rtr" route add default dev dl-snd table 201
  ip -n "$rtr" rule add iif to-rcv lookup 202
  ip -n "$rtr" route add default dev dl-rcv table 202
  shape add "$rate"
}

# Ends every process in the namespace (the lab started them all), then
# deletes it.
drop_ns() {
  local ns=$1 pids i
  ip netns list | grep -qw "^$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 60); do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -n "$pids" ] || break
      sleep 0.05
    done
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  ip netns del "$ns"
}

down() {
  local names=("$name") ns
  if [ $all -eq 1 ]; then
    mapfile -t names < <(ip netns list | awk '{print $1}' |
      sed -n 's/^\(legba-lab\(-[a-z0-9]*\)\?\)-\(snd\|rtr\|rcv\)$/\1/p' |
      sort -u)
  fi
  for n in "${names[@]}"; do
    for ns in "$n-snd" "$n-rcv" "$n-rtr"; do
      drop_ns "$ns"
    done
    rm -rf "/run/$n"
  done
}

[ "$(id -u)" -eq 0 ] || die "the lab needs root (network namespaces)"
command=${1:-}
[ $# -eq 0 ] || shift
case "$command" in
  up) parse "$@"; up ;;
  rate)
    parse "$@"
    [ ${#rest[@]} -eq 1 ] || die "rate KBIT|none"
    rate=${rest[0]}
    parse --name "$name" --rate "$rate"
    shape change "$rate" ;;
  env) parse "$@"; lab_env ;;
  down) parse "$@"; down ;;
  run)
    parse "$@"
    [ ${#rest[@]} -gt 0 ] || die "run [options] -- COMMAND [ARG...]"
    trap 'down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    up
    status=0
    env $(lab_env) "${rest[@]}" || status=$?
    exit $status ;;
  *) sed -n '4,36p' "$0" >&2; exit 2 ;;
esac
