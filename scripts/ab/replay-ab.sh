#!/usr/bin/env bash
# Standby replay of two or more builds side by side: durable
# TPC-C (value log) with one `epochdb replica` under `sync`, each build
# in turn, REPS rounds, in two placements:
#   shared   2 worker threads, 2 warehouses; the backup on any CPU
#   pinned   1 worker thread on CPU 0 (taskset), the backup on CPU 1
# Prints, per build and placement, the medians of throughput, the
# backup's read-view lag (p50/p99, epochs of 40 ms), the CPU it used and,
# with READERS=N, the read-only TPC-C transactions per second that N
# reader threads in the backup ran at its read view (--replica-readers).
# Usage: [READERS=N] scripts/ab/replay-ab.sh REPS SECONDS BIN...
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/results.sh # record, record_report, write_result (before the arguments shift)
reps=$1 secs=$2
shift 2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for rep in $(seq "$reps"); do
  i=0
  for bin in "$@"; do
    for p in shared pinned; do
      pre=() extra=() threads=2
      [ "${READERS:-0}" = 0 ] || extra=(--replica-readers "$READERS")
      [ $p = pinned ] && pre=(taskset -c 0) extra+=(--replica-cpu 1) threads=1
      "${pre[@]}" "$bin" bench tpcc --threads $threads --duration "$secs" --warmup 1 --durability log \
        --data-dir "$scratch/db" --overwrite --replicas 1 --safety sync "${extra[@]}" --json "$scratch/$i-$p-$rep.json" \
        >/dev/null 2>&1
      record_report "$scratch/$i-$p-$rep.json" round="$rep" build="$bin" placement="$p"
    done
    i=$((i + 1))
  done
done
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); x=r.get('replication') or {}; print($1)" "$2"; }
echo "| build | placement | txn/s | read-view lag p50 | p99 | backup cores | backup read-only txn/s |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
i=0
for bin in "$@"; do
  for p in shared pinned; do
    col() { for r in $(seq "$reps"); do get "$1" "$scratch/$i-$p-$r.json"; done | med; }
    printf '| %s | %s | %.0f | %s | %s | %.2f | %.0f |\n' "$bin" $p "$(col "r['throughput']")" \
      "$(col "x['replay_lag_epochs']['p50']")" "$(col "x['replay_lag_epochs']['p99']")" "$(col "x['backup_cores']")" \
      "$(col "x.get('backup_reads_per_s', 0)")"
  done
  i=$((i + 1))
done
write_result replay-ab build,placement
