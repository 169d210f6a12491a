#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, for running two syncd (or any two programs) as if
# on two hosts (docs/wan.md, "Impairment proxy"). Needs root.
#
#   scripts/netns-pair.sh up [--rate RATE] [--burst SIZE] [--latency MS]
#   scripts/netns-pair.sh exec a|b COMMAND...
#   scripts/netns-pair.sh down
#   scripts/netns-pair.sh run [--rate RATE] [--burst SIZE] [--latency MS] -- "COMMAND A" "COMMAND B"
#       up, COMMAND A in the background in namespace a, COMMAND B in the foreground in namespace b,
#       then stops A and tears everything down (also on error or Ctrl-C); exits with B's status.
#
# Namespace a (sync-a) has 10.77.0.1/24 on veth sync-va; namespace b (sync-b) has 10.77.0.2/24 on
# sync-vb. --rate caps each direction with a tbf qdisc on the sending side's veth (tc units, e.g.
# 20mbit; --burst defaults to 32kb, --latency, the longest a packet may wait in tbf's queue before
# it is dropped, to 50 ms). This kernel has no sch_netem, so loss and delay come from
# tools/impair/sync-impair run inside a namespace, not from tc; `up` says whether netem exists.
# SYNC_NETNS_PREFIX changes the names (default "sync"), so two pairs can coexist.
set -euo pipefail

prefix=${SYNC_NETNS_PREFIX:-sync}
ns_a=$prefix-a
ns_b=$prefix-b
veth_a=$prefix-va
veth_b=$prefix-vb
addr_a=10.77.0.1
addr_b=10.77.0.2

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 1
}

rate="" burst="32kb" latency="50"
parse_shape() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --latency) latency=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  rest=("$@")
}

up() {
  [[ $(id -u) == 0 ]] || { echo "netns-pair: needs root" >&2; exit 1; }
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$veth_a" type veth peer name "$veth_b"
  ip link set "$veth_a" netns "$ns_a"
  ip link set "$veth_b" netns "$ns_b"
  ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a"
  ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b"
  for ns in "$ns_a" "$ns_b"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$ns_a" link set "$veth_a" up
  ip -n "$ns_b" link set "$veth_b" up
  if [[ -n $rate ]]; then
    ip netns exec "$ns_a" tc qdisc add dev "$veth_a" root tbf rate "$rate" burst "$burst" \
      latency "${latency}ms"
    ip netns exec "$ns_b" tc qdisc add dev "$veth_b" root tbf rate "$rate" burst "$burst" \
      latency "${latency}ms"
  fi
  if ip netns exec "$ns_a" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    ip netns exec "$ns_a" tc qdisc del dev lo root
    echo "netns-pair: netem is available on this kernel"
  else
    echo "netns-pair: no netem on this kernel (tc: unknown qdisc kind); use sync-impair for loss and delay"
  fi
  echo "netns-pair: $ns_a $addr_a ($veth_a) <-> $ns_b $addr_b ($veth_b)${rate:+, tbf $rate each way}"
}

down() {
  # Deleting a namespace deletes the veth end inside it, and with it the peer.
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
}

[[ $# -ge 1 ]] || usage
command=$1
shift
case $command in
  up)
    parse_shape "$@"
    up
    ;;
  down)
    down
    ;;
  exec)
    [[ $# -ge 2 ]] || usage
    side=$1
    shift
    case $side in
      a) exec ip netns exec "$ns_a" "$@" ;;
      b) exec ip netns exec "$ns_b" "$@" ;;
      *) usage ;;
    esac
    ;;
  run)
    parse_shape "$@"
    [[ ${#rest[@]} -eq 2 ]] || usage
    pid_a=""
    cleanup() {
      if [[ -n $pid_a ]]; then
        kill "$pid_a" 2>/dev/null || true
        wait "$pid_a" 2>/dev/null || true
      fi
      down
    }
    trap cleanup EXIT
    up
    ip netns exec "$ns_a" bash -c "${rest[0]}" &
    pid_a=$!
    status=0
    ip netns exec "$ns_b" bash -c "${rest[1]}" || status=$?
    exit "$status"
    ;;
  *)
    usage
    ;;
esac
