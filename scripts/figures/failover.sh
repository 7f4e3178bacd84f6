#!/usr/bin/env bash
# Failover under the control plane: two `epochdb serve
# --node-id` data nodes (--safety sync --appendfsync always) and a witness
# on this machine. redis-benchmark writes to the primary for SECONDS (SET
# and INCR, 50 clients, 100-byte values over 1M keys); then the primary is
# killed with SIGKILL, and the time until the other node gives a durable
# reply to a SET (`redis-cli`, retried every 10 ms) is the failover time:
# election, appointment, promotion (replaying what it persisted) and the
# first lease. REPS rounds; prints each and the median.
# Usage: scripts/figures/failover.sh [REPS] [SECONDS] (default 3 60).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
secs=${2:-60}
source scripts/figures/lib.sh
scratch=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
info() { redis-cli -p "$1" info replication 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }
now() { date +%s.%N; }

for rep in $(seq "$reps"); do
  dir=$scratch/$rep
  mkdir -p "$dir"
  c1=$(port) c2=$(port) c3=$(port) r1=$(port) r2=$(port) p1=$(port) p2=$(port)
  "$bin" witness --node-id 3 --listen 127.0.0.1:$c3 --peer 1=127.0.0.1:$c1 --peer 2=127.0.0.1:$c2 \
    --dir "$dir/w" >/dev/null 2>&1 &
  pids+=($!)
  declare -A node=()
  for i in 1 2; do
    c=c$i r=r$i p=p$i o=c$((3 - i))
    "$bin" serve --port ${!p} --threads 1 --node-id $i --control-listen 127.0.0.1:${!c} \
      --control-peer $((3 - i))=127.0.0.1:${!o} --control-peer 3=127.0.0.1:$c3 \
      --replicate-listen 127.0.0.1:${!r} --safety sync --appendfsync always --data-dir "$dir/d$i" \
      >"$dir/n$i.log" 2>&1 &
    node[$i]=$!
    disown $!  # no "Killed" notice when it is killed
    pids+=($!)
  done
  # The primary holds its lease with the other node in the committed in-sync set.
  primary=
  for _ in $(seq 600); do
    for i in 1 2; do
      p=p$i
      if [ "$(info ${!p} epochdb_lease_valid)" = 1 ] && [ "$(info ${!p} epochdb_in_sync_nodes)" = $((3 - i)) ]; then
        primary=$i
      fi
    done
    [ -n "$primary" ] && break
    sleep 0.1
  done
  [ -n "$primary" ] || { echo "no primary with an in-sync backup"; cat "$dir"/n*.log; exit 1; }
  backup=$((3 - primary))
  pp=p$primary bp=p$backup
  redis-benchmark -p ${!pp} -t set,incr -c 50 -d 100 -r 1000000 -n 1000000000 -q >/dev/null 2>&1 &
  load=$!
  pids+=($load)
  sleep "$secs"
  keys=$(redis-cli -p ${!pp} dbsize)
  kill -9 "${node[$primary]}"
  t0=$(now)
  until [ "$(redis-cli -p ${!bp} set failover-probe $rep 2>/dev/null)" = OK ]; do sleep 0.01; done
  t1=$(now)
  kill -9 "$load" 2>/dev/null || true
  s=$(python3 -c "print('%.3f' % ($t1 - $t0))")
  echo "$s" >>"$out/failover-seconds"
  record round="$rep" load_seconds="$secs" keys="$keys" kill_to_durable_write_s="$s"
  echo "round $rep: node $primary killed after ${secs} s of load ($keys keys); node $backup took a durable write after $s s"
  kill -9 "${node[$backup]}" "${pids[0]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
  rm -rf "$dir"
done
echo "failover, median of $reps: $(tail -n "$reps" "$out/failover-seconds" | median) s"
write_result failover load_seconds
