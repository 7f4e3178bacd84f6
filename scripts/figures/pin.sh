#!/usr/bin/env bash
# Does it matter which CPU a 1-thread TPC-C worker runs on (where
# logging's cost goes)? The log device's interrupts go to one CPU
# (/proc/interrupts); a worker there handles them. Each run starts
# `bench tpcc --threads 1`, waits out the load, then pins the thread that
# has used the most CPU (the worker) to CPU W and every other thread (the
# logger, the epoch advancer, the prefault thread) to the other CPU, for
# W = 0 and 1, with logging and without, ROUNDS times interleaved. Prints
# each run and the medians. Needs 2 CPUs and taskset (util-linux).
# Usage: scripts/figures/pin.sh [ROUNDS] [BIN]
set -uo pipefail
rounds=${1:-5}
bin=${2:-target/release/epochdb}
source "$(dirname "$0")/round-order.sh"
source "$(dirname "$0")/results.sh" # record, write_result
data=$(mktemp -d)
# The scratch directory goes only after the bench in it has ended (a
# stopped script stops its bench first), so nothing is removed from
# under a running database.
trap 'jobs -p | xargs -r kill 2>/dev/null; wait; rm -rf "$data"' EXIT
declare -A res
run() { # MODE CPU
  local mode=$1 cpu=$2 args=() out pid worker= best=-1
  [ "$mode" = log ] && args=(--durability log --data-dir "$data/db" --overwrite)
  out=$(mktemp -p "$data")
  "$bin" bench tpcc --threads 1 --duration 8 --warmup 2 --schema silo --quiet "${args[@]}" > "$out" 2>&1 &
  pid=$!
  sleep 1.5 # the load takes about 0.5 s; the warm-up runs until 2 s
  for t in /proc/$pid/task/*; do
    local used
    used=$(awk '{print $14}' "$t/stat")
    if [ "$used" -gt "$best" ]; then best=$used worker=${t##*/}; fi
  done
  for t in /proc/$pid/task/*; do
    if [ "${t##*/}" = "$worker" ]; then taskset -pc "$cpu" "${t##*/}"; else taskset -pc $((1 - cpu)) "${t##*/}"; fi
  done > /dev/null
  wait $pid
  local tput
  tput=$(grep -m1 "txn/s" "$out" | sed -E 's/.*: ([0-9]+) txn\/s.*/\1/')
  rm -f "$out"
  echo "$mode, worker on CPU $cpu: $tput txn/s"
  record round="$r" durability="$mode" worker_cpu="$cpu" txn_per_s="$tput"
  res[$mode-$cpu]="${res[$mode-$cpu]:-} $tput"
}
for r in $(seq "$rounds"); do
  for pair in $(round_order "$r" log-0 log-1 off-0 off-1); do
    run "${pair%-*}" "${pair#*-}"
  done
done
for k in log-0 log-1 off-0 off-1; do
  echo "median $(echo ${res[$k]} | tr ' ' '\n' | median) [${res[$k]} ]: ${k%-*}, worker on CPU ${k#*-}"
done
write_result pin durability,worker_cpu
