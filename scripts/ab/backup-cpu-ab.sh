#!/usr/bin/env bash
# A/B of what a backup costs, between builds of epochdb: the `sync-1`
# configuration of scripts/figures/query-fresh.sh (a 1-thread durable
# TPC-C primary on CPU 0, one sync backup with one replay thread on
# CPU 1, 10 s after a 5 s warm-up), each build in turn, the order
# reversed every other round. Prints each run (build, txn/s, backup CPU
# per MB of log in ms, primary CPU per MB in ms, their ratio, and the
# primary's replication threads' CPU per MB in ms: its shipping), then the
# medians per build. DURABILITY=delta for a delta-logging primary (default
# log).
# Usage: [DURABILITY=log|delta] scripts/ab/backup-cpu-ab.sh REPS BIN... (e.g. two copies of
# target/release/epochdb built from the commits to compare)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/results.sh # record, record_report, write_result (before the arguments shift)
reps=${1:?usage: scripts/ab/backup-cpu-ab.sh REPS BIN...}
shift
durability=${DURABILITY:-log}
[ $# -ge 1 ] || { echo "usage: scripts/ab/backup-cpu-ab.sh REPS BIN..." >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
source scripts/figures/round-order.sh
runs=$scratch/runs
for rep in $(seq "$reps"); do
  mapfile -t order < <(round_order "$rep" "$@")
  for bin in "${order[@]}"; do
    taskset -c 0 "$bin" bench tpcc --threads 1 --duration 10 --warmup 5 --durability "$durability" \
      --data-dir "$scratch/db" --overwrite --replicas 1 --safety sync --replica-cpu 1 --replay-threads 1 \
      --json "$scratch/r.json" >/dev/null 2>&1
    python3 - "$bin" "$scratch/r.json" <<'EOF' | tee -a "$runs"
import json, sys
r = json.load(open(sys.argv[2]))
b, p = r["replication"]["backup_ms_per_log_mb"], r["durability"]["cpu_ms_per_log_mb"]
s = r["replication"]["shipping_ms_per_log_mb"]
print(sys.argv[1], round(r["throughput"]), "%.2f" % b, "%.2f" % p, "%.3f" % (b / p), "%.3f" % s)
EOF
    read -r _ tput b p ratio s < <(tail -1 "$runs")
    record round="$rep" build="$bin" txn_per_s="$tput" backup_ms_per_log_mb="$b" primary_ms_per_log_mb="$p" \
      backup_over_primary="$ratio" shipping_ms_per_log_mb="$s"
    rm -rf "$scratch"/db*
  done
done
echo "medians: build, txn/s, backup ms/MB, primary ms/MB, backup / primary, shipping ms/MB"
python3 - "$runs" "$@" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for bin in sys.argv[2:]:
    mine = [r for r in rows if r[0] == bin]
    print(bin, *("%g" % statistics.median(float(r[i]) for r in mine) for i in range(1, 6)))
EOF
write_result backup-cpu-ab build "durability $durability"
