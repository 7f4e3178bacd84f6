#!/usr/bin/env bash
# Latency of durable replies for a lone client: redis-server with
# `appendfsync always` beside `epochdb serve --appendfsync always`, and
# optionally an older epochdb binary (an A/B of two builds), all running at
# once and measured in turn, REPS rounds interleaved. Prints the median of
# the rounds' p50 and p99 latencies (ms) per command and server, and
# writes results/durable-latency-DATE.json.
# Usage: scripts/figures/durable-latency.sh [REPS] [OLD_EPOCHDB_BINARY]
# Needs redis-server and redis-benchmark (apt install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/results.sh # record, write_result
reps=${1:-5}
old=${2:-}
cargo build --release -q -p epochdb-cli
scratch=$(mktemp -d)
ports=(7421 7422)
names=(redis epochdb)
[ -n "$old" ] && ports+=(7423) && names+=(epochdb-old)
trap 'for p in "${ports[@]}"; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done; wait 2>/dev/null; rm -rf "$scratch"' EXIT
mkdir -p "$scratch/redis"
redis-server --port 7421 --save '' --appendonly yes --appendfsync always --daemonize yes --dir "$scratch/redis" >/dev/null
target/release/epochdb serve --port 7422 --durability log --appendfsync always --data-dir "$scratch/new" --threads 2 >/dev/null 2>&1 &
[ -n "$old" ] && "$old" serve --port 7423 --durability log --appendfsync always --data-dir "$scratch/old" --threads 2 >/dev/null 2>&1 &
for p in "${ports[@]}"; do
  until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.1; done
done
for round in $(seq "$reps"); do
  for i in "${!ports[@]}"; do
    # CSV columns: test, rps, avg, min, p50, p95, p99, max.
    redis-benchmark -p "${ports[$i]}" -t set,get,incr -d 100 -r 1000000 -c 1 -n 5000 --threads 2 --csv 2>/dev/null |
      awk -F, -v s="${names[$i]}" 'NR>1 {gsub(/"/,""); print s "\t" $1 "\t" $5 "\t" $7}' >"$scratch/round"
    cat "$scratch/round" >>"$scratch/runs"
    while IFS=$'\t' read -r server test p50 p99; do
      record round="$round" server="$server" test="$test" p50_ms="$p50" p99_ms="$p99"
    done <"$scratch/round"
  done
done
source scripts/figures/round-order.sh # median
echo "# epochdb $(git rev-parse --short HEAD)${old:+ and $old}, $(redis-server --version | awk '{print $3}'), $(date -u +%Y-%m-%d), $reps rounds interleaved, -c 1, 100-byte values"
printf "| server | test | p50 (ms) | p99 (ms) |\n| --- | --- | --- | --- |\n"
for s in "${names[@]}"; do
  for t in SET GET INCR; do
    p50=$(awk -F'\t' -v s="$s" -v t="$t" '$1==s && $2==t {print $3}' "$scratch/runs" | median)
    p99=$(awk -F'\t' -v s="$s" -v t="$t" '$1==s && $2==t {print $4}' "$scratch/runs" | median)
    printf "| %s | %s | %s | %s |\n" "$s" "$t" "$p50" "$p99"
  done
done
write_result durable-latency server,test "$(redis-server --version | awk '{print $3}'), -c 1, 100-byte values${old:+; epochdb-old: $old}"
