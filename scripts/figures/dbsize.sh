#!/usr/bin/env bash
# DBSIZE and the key count at start, builds side by side: loads one data
# directory (log+checkpoint) with the last build given, `redis-benchmark -t
# set -r KEYS -n 2*KEYS -d 100`, then in each round (the order reversed
# every other round) starts every build in turn on that directory and
# prints what its log says recovery and the start count took (a build that
# counts in the background prints no count) and how long three DBSIZEs
# took from the client (redis-cli, its own start included).
# Usage: scripts/figures/dbsize.sh REPS KEYS BUILD...
# e.g.   scripts/figures/dbsize.sh 3 3000000 /tmp/old/epochdb target/release/epochdb
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/results.sh # record, write_result (before the arguments shift)
reps=$1 keys=$2
shift 2
port=7414
scratch=$(mktemp -d)
trap 'redis-cli -p $port shutdown >/dev/null 2>&1 || true; wait; rm -rf "$scratch"' EXIT
source scripts/figures/round-order.sh

# Starts build $1 on the directory, logging to $2; returns once it answers.
start() {
  "$1" serve --port $port --data-dir "$scratch/data" --durability log+checkpoint 2>"$2" >/dev/null &
  until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.05; done
}
stop() {
  redis-cli -p $port shutdown >/dev/null 2>&1 || true
  wait
}

start "${!#}" "$scratch/load.log"
redis-benchmark -p $port -t set -r "$keys" -n $((2 * keys)) -d 100 -c 50 -P 16 --threads 2 -q >/dev/null
echo "loaded: $(redis-cli -p $port dbsize) keys"
stop
for r in $(seq "$reps"); do
  mapfile -t order < <(round_order "$r" "$@")
  for b in "${order[@]}"; do
    start "$b" "$scratch/serve.log"
    times=()
    for _ in 1 2 3; do
      t0=$(date +%s%N)
      n=$(redis-cli -p $port dbsize)
      times+=("$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.3f", (b - a) / 1e9}')")
    done
    stop
    recovered=$(grep -o 'recovered [0-9]* records[^(]*in [0-9.]* s' "$scratch/serve.log" | grep -o '[0-9.]* s$' || echo -)
    counted=$(grep -o 'counted [0-9]* keys in [0-9.]* s' "$scratch/serve.log" | grep -o '[0-9.]* s$' || echo -)
    echo "round $r $b: dbsize $n in ${times[*]} s; recovery $recovered; start count $counted"
    record round="$r" build="$b" dbsize="$n" first_dbsize_s="${times[0]}" third_dbsize_s="${times[2]}" \
      recovery_s="${recovered% s}" start_count_s="${counted% s}"
  done
done
write_result dbsize build
