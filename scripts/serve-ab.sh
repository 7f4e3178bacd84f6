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
# Usage: scripts/serve-ab.sh REPS REQUESTS TESTS SERVER...
# e.g.   scripts/serve-ab.sh 3 4000000 set,get,incr redis /tmp/old/epochdb target/release/epochdb
set -euo pipefail
cd "$(dirname "$0")/.."
reps=$1 n=$2 tests=$3
clients=${CLIENTS:-50} pipeline=${PIPELINE:-16} appendfsync=${APPENDFSYNC:-}
shift 3
port=7413
scratch=$(mktemp -d)
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
declare -A res
source scripts/round-order.sh
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
    for t in ${tests//,/ }; do
      rps=$(redis-benchmark -p $port -t "$t" -c "$clients" -P "$pipeline" -d 100 -r 1000000 --threads 2 -n "$n" --csv 2>/dev/null |
        tail -1 | cut -d, -f2 | tr -d '"')
      res["$s $t"]="${res["$s $t"]:-} ${rps%.*}"
    done
    redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    sleep 0.5
  done
done
for t in ${tests//,/ }; do
  for s in "$@"; do
    med=$(echo ${res["$s $t"]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$t: median $med  [${res["$s $t"]} ] : $s"
  done
done
