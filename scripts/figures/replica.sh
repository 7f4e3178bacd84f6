#!/usr/bin/env bash
# A Redis-protocol replica, in one run: a primary
# (`serve --replicate-listen --safety sync`, 1 event loop, CPU 0) and its
# replica (`serve --replicaof`, 1 event loop, CPU 1), both durable (log).
# Each round: load 100,000 keys through the primary, then redis-benchmark
# GET against the primary and the replica in turn; then a SET load on the
# primary, kill -9 of the primary after 5 s, and `epochdb promote` of the
# replica, timed by the command itself (from REPLICAOF NO ONE sent to its
# reply). Prints requests/s (median of REPS rounds), the ratio, and the
# promotion times.
# Usage: scripts/figures/replica.sh [REPS] (default 3). Needs redis-benchmark.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
source scripts/figures/lib.sh
scratch=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$scratch"' EXIT

gets() { # $1 port -> GET requests/s
  redis-benchmark -p "$1" -t get -r 100000 -d 100 -n 400000 -c 50 -P 16 --threads 1 --csv 2>/dev/null |
    awk -F'","' 'NR>1 {gsub(/"/,"",$2); print $2}'
}

: >"$scratch/primary" ; : >"$scratch/replica" ; : >"$scratch/promote"
for rep in $(seq "$reps"); do
  rm -rf "$scratch/p" "$scratch/r"
  taskset -c 0 $bin serve --port 7421 --replicate-listen 127.0.0.1:7431 --safety sync --threads 1 \
    --durability log --data-dir "$scratch/p" >/dev/null 2>&1 &
  primary=$!
  pids+=($primary)
  until redis-cli -p 7421 ping >/dev/null 2>&1; do sleep 0.1; done
  taskset -c 1 $bin serve --port 7422 --replicaof 127.0.0.1:7431 --threads 1 --durability log \
    --data-dir "$scratch/r" >/dev/null 2>&1 &
  replica=$!
  pids+=($replica)
  until redis-cli -p 7422 ping >/dev/null 2>&1; do sleep 0.1; done
  redis-benchmark -p 7421 -t set -r 100000 -d 100 -n 300000 -c 50 -P 16 -q >/dev/null 2>&1
  sleep 1 # the replica's view catches up
  if [ $((rep % 2)) = 1 ]; then
    gets 7421 >>"$scratch/primary"; gets 7422 >>"$scratch/replica"
  else
    gets 7422 >>"$scratch/replica"; gets 7421 >>"$scratch/primary"
  fi
  redis-benchmark -p 7421 -t set -r 100000 -d 100 -n 100000000 -c 10 -q >/dev/null 2>&1 &
  load=$!
  sleep 5
  kill -9 $primary
  kill $load 2>/dev/null || true
  wait $primary $load 2>/dev/null || true
  $bin promote --port 7422 | tee -a "$scratch/promote"
  record round="$rep" primary_get_rps="$(tail -1 "$scratch/primary")" replica_get_rps="$(tail -1 "$scratch/replica")" \
    promotion_s="$(tail -1 "$scratch/promote" | grep -o '[0-9.]* s$' | tr -d ' s')"
  redis-cli -p 7422 set after promotion >/dev/null
  kill -9 $replica
  wait $replica 2>/dev/null || true
done
p=$(median <"$scratch/primary")
r=$(median <"$scratch/replica")
echo "# epochdb $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d), $reps rounds"
echo "GET requests/s (-c 50 -P 16, 100-byte values, 100,000 keys): primary $p, replica $r, replica/primary $(awk -v a="$r" -v b="$p" 'BEGIN {printf "%.2f", a/b}')"
echo "each round: primary $(paste -sd' ' "$scratch/primary"); replica $(paste -sd' ' "$scratch/replica")"
echo "promotion times (s): $(grep -o '[0-9.]* s$' "$scratch/promote" | tr -d ' s' | paste -sd' ')"
write_result replica ""
