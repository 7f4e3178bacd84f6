#!/usr/bin/env bash
# Query Fresh's figures (issue #18) on this 2-core machine, in the fair
# set-up it allows: a 1-thread durable TPC-C primary (value log) on CPU 0
# (taskset), its backups (`epochdb replica`, one replay thread) on CPU 1.
# Configurations, in turn, REPS rounds: alone; 1 backup async, sync,
# very-safe; 2 backups async, sync. Prints, with medians of the rounds:
# throughput and its ratio to alone (Query Fresh: <= 6% lower with one
# sync backup); latency to durability (the release latency) p50/p99 and
# its ratio to alone (Query Fresh: <= 1.16x); the backups' read-view lag;
# and CPU per MB of log: the backups' (each) against the primary's, which
# produced the log (Query Fresh: about 1/4; #18 aims <= 1/2).
# Usage: scripts/query-fresh-figures.sh [REPS] [SECONDS] (default 3 10).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
secs=${2:-10}
source scripts/figures-lib.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
configs=(alone async-1 sync-1 very-safe-1 async-2 sync-2)

for rep in $(seq "$reps"); do
  for c in "${configs[@]}"; do
    extra=()
    if [ "$c" != alone ]; then
      extra=(--replicas "${c##*-}" --safety "${c%-*}" --replica-cpu 1 --replay-threads 1)
    fi
    taskset -c 0 $bin bench tpcc --threads 1 --duration "$secs" --warmup 1 --durability log \
      --data-dir "$scratch/db" "${extra[@]}" --json "$out/qf-$c-$rep.json" >/dev/null 2>&1
    rm -rf "$scratch"/db*
  done
done

py() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1" "$2"; }
col() { for r in $(seq "$reps"); do py "print($2)" "$out/qf-$1-$r.json"; done | median; }
tp0=$(col alone 'r["throughput"]')
p50_0=$(col alone 'r["durability"]["durable_latency_us"]["p50"]')
p99_0=$(col alone 'r["durability"]["durable_latency_us"]["p99"]')
echo "| configuration | txn/s | vs alone | release latency p50 / p99 (ms) | vs alone (p50 / p99) | read-view lag p50 / p99 (epochs) | primary CPU per MB of log (ms) | each backup's CPU per MB (ms) | backup / primary |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for c in "${configs[@]}"; do
  tp=$(col "$c" 'r["throughput"]')
  p50=$(col "$c" 'r["durability"]["durable_latency_us"]["p50"]')
  p99=$(col "$c" 'r["durability"]["durable_latency_us"]["p99"]')
  if [ "$c" = alone ]; then
    rest="- | - | - | -"
  else
    # Log MB per second of the measured run: bytes per transaction times throughput.
    mbs='(r["durability"]["log_bytes_per_txn"] * r["throughput"] / 1e6)'
    lag50=$(col "$c" 'r["replication"]["replay_lag_epochs"]["p50"]')
    lag99=$(col "$c" 'r["replication"]["replay_lag_epochs"]["p99"]')
    pcpu=$(col "$c" "1000 * r['replication']['primary_cores'] / $mbs")
    bcpu=$(col "$c" "1000 * r['replication']['backup_cores'] / r['replication']['replicas'] / $mbs")
    rest="$lag50 / $lag99 | $(printf %.1f "$pcpu") | $(printf %.1f "$bcpu") | $(python3 -c "print('%.2f' % ($bcpu / $pcpu))")"
  fi
  printf '| %s | %.0f | %.2f | %.1f / %.1f | %.2f / %.2f | %s |\n' "$c" "$tp" "$(python3 -c "print($tp / $tp0)")" \
    "$(python3 -c "print($p50 / 1000)")" "$(python3 -c "print($p99 / 1000)")" \
    "$(python3 -c "print($p50 / $p50_0)")" "$(python3 -c "print($p99 / $p99_0)")" "$rest"
done
