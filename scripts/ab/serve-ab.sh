#!/usr/bin/env bash
# Builds of `epochdb serve` side by side (and redis-server, named "redis"),
# interleaved (the order reversed every other round): each round starts
# each server in turn with durability off and 2 event loops, runs
# `redis-benchmark -t TESTS -c 50 -P 16 -d 100 -r 1000000 --threads 2 -n
# REQUESTS` against it (every test alone, so each is timed on its own),
# and stops it. Prints each server's median requests/s per test over REPS
# rounds, and every run. Keep REQUESTS large enough for a few seconds a
# test: redis-benchmark with --threads times a test only to its 250 ms
# tick.
# CLIENTS and PIPELINE in the environment replace -c 50 and -P 16.
# APPENDFSYNC=always runs every server with durable replies instead
# (epochdb: --durability log --appendfsync always on a fresh data
# directory; redis: appendonly yes, appendfsync always).
# Also prints each server's median CPU time per request (user + system
# of the server process over the test, from /proc, in microseconds):
# less noisy than requests/s when the benchmark client shares the CPUs;
# and the benchmark client's (redis-benchmark's user + system), which
# bounds what any server can reach on the same CPUs: at most
# CPUs / (client + server CPU per request) requests/s.
# Usage: scripts/ab/serve-ab.sh REPS REQUESTS TESTS SERVER...
# e.g.   scripts/ab/serve-ab.sh 3 4000000 set,get,incr redis /tmp/old/epochdb target/release/epochdb
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/results.sh # record, record_report, write_result (before the arguments shift)
reps=$1 n=$2 tests=$3
clients=${CLIENTS:-50} pipeline=${PIPELINE:-16} appendfsync=${APPENDFSYNC:-}
shift 3
port=7413
scratch=$(mktemp -d)
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
declare -A res cpu client
TIMEFORMAT='%U %S'
tick=$(getconf CLK_TCK)
# The server's CPU ticks so far (user + system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
source scripts/figures/round-order.sh
for r in $(seq "$reps"); do
  mapfile -t order < <(round_order "$r" "$@")
  for s in "${order[@]}"; do
    rm -rf "$scratch/data" && mkdir -p "$scratch/data"
    if [ "$s" = redis ] && [ -n "$appendfsync" ]; then
      redis-server --port $port --save '' --appendonly yes --appendfsync "$appendfsync" --daemonize yes \
        --dir "$scratch/data" >/dev/null
    elif [ "$s" = redis ]; then
      redis-server --port $port --save '' --appendonly no --daemonize yes --dir "$scratch" >/dev/null
    elif [ -n "$appendfsync" ]; then
      "$s" serve --port $port --durability log --appendfsync "$appendfsync" --threads 2 \
        --data-dir "$scratch/data" >/dev/null 2>&1 &
    else
      "$s" serve --port $port --durability off --threads 2 >/dev/null 2>&1 &
    fi
    until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
    pid=$(redis-cli -p $port info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
    for t in ${tests//,/ }; do
      before=$(ticks "$pid")
      { time redis-benchmark -p $port -t "$t" -c "$clients" -P "$pipeline" -d 100 -r 1000000 --threads 2 -n "$n" \
        --csv >"$scratch/csv" 2>/dev/null; } 2>"$scratch/time"
      rps=$(tail -1 "$scratch/csv" | cut -d, -f2 | tr -d '"')
      res["$s $t"]="${res["$s $t"]:-} ${rps%.*}"
      us=$(awk -v a="$before" -v b="$(ticks "$pid")" -v k="$tick" -v n="$n" 'BEGIN {printf "%.2f", (b - a) / k * 1e6 / n}')
      cpu["$s $t"]="${cpu["$s $t"]:-} $us"
      us=$(awk -v n="$n" '{printf "%.2f", ($1 + $2) * 1e6 / n}' "$scratch/time")
      client["$s $t"]="${client["$s $t"]:-} $us"
      record round="$r" server="$s" test="$t" rps="${rps%.*}" server_cpu_us_per_request="${cpu["$s $t"]##* }" \
        client_cpu_us_per_request="$us"
    done
    redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    sleep 0.5
  done
done
for t in ${tests//,/ }; do
  for s in "$@"; do
    # round-order.sh's median, which reads one number per line.
    med=$(printf '%s\n' ${res["$s $t"]} | median)
    us=$(printf '%s\n' ${cpu["$s $t"]} | median)
    cl=$(printf '%s\n' ${client["$s $t"]} | median)
    echo "$t: median $med  [${res["$s $t"]} ]  server CPU/request median $us us [${cpu["$s $t"]} ]  client $cl us [${client["$s $t"]} ] : $s"
  done
done
write_result serve-ab server,test
