#!/usr/bin/env bash
# What a hot standby costs the primary, interleaved in one run:
# the same durable benchmark alone, with one `epochdb replica` process in
# async mode, and with one in sync mode, in two placements on this
# 2-core machine:
#   shared   2 worker threads, the backup on any CPU (it takes CPU from
#            the primary, as it would not on its own machine)
#   pinned   1 worker thread with the benchmark on CPU 0 (taskset), the
#            backup on CPU 1 (--replica-cpu 1): the primary's own cost of
#            shipping, and whether one replay thread keeps up
# Prints throughput (median of REPS runs, configurations in turn), the
# ratio to the run without a backup, latency to durability (p50), the
# backup's lags and the CPU it used.
# Usage: scripts/figures/replication.sh [REPS] (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
source scripts/figures/lib.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

run() { # $1 workload $2 placement $3 config $4 rep
  local extra=() pre=() threads=2
  case $3 in
    alone) ;;
    async) extra=(--replicas 1 --safety async) ;;
    sync) extra=(--replicas 1 --safety sync) ;;
  esac
  if [ "$2" = pinned ]; then
    pre=(taskset -c 0) threads=1
    [ "$3" = alone ] || extra+=(--replica-cpu 1)
  fi
  local keys=()
  [ "$1" = ycsb ] && keys=(--keys 1000000)
  "${pre[@]}" $bin bench "$1" "${keys[@]}" --threads $threads --duration 5 --warmup 1 --durability log \
    --data-dir "$scratch/db" --overwrite "${extra[@]}" --json "$out/repl-$1-$2-$3-$4.json" >/dev/null 2>&1
  record_report "$out/repl-$1-$2-$3-$4.json" round="$4" workload="$1" placement="$2" backup="$3"
}

for rep in $(seq "$reps"); do
  for p in shared pinned; do
    for w in ycsb tpcc; do
      for c in alone async sync; do
        run "$w" "$p" "$c" "$rep"
      done
    done
  done
done

py() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1" "$2"; }
echo "| workload | placement | backup | txn/s (median of $reps) | vs alone | durable latency p50 (ms) | persisted lag p50/p99 (epochs) | read-view lag p50/p99/max (epochs) | backup CPU (cores) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for p in shared pinned; do
  for w in ycsb tpcc; do
    base=$(for r in $(seq "$reps"); do field "$out/repl-$w-$p-alone-$r.json" throughput; done | median)
    for c in alone async sync; do
      tp=$(for r in $(seq "$reps"); do field "$out/repl-$w-$p-$c-$r.json" throughput; done | median)
      # The run whose throughput is the median gives the other columns.
      for r in $(seq "$reps"); do
        [ "$(field "$out/repl-$w-$p-$c-$r.json" throughput)" = "$tp" ] && mid=$r
      done
      f="$out/repl-$w-$p-$c-$mid.json"
      lat=$(py 'print("%.1f" % (r["durability"]["durable_latency_us"]["p50"] / 1000))' "$f")
      lags=$(py 'x=r.get("replication"); print("- | - | -" if x is None else "%d/%d | %d/%d/%d | %.2f" % (x["persist_lag_epochs"]["p50"], x["persist_lag_epochs"]["p99"], x["replay_lag_epochs"]["p50"], x["replay_lag_epochs"]["p99"], x["replay_lag_epochs"]["max"], x["backup_cores"]))' "$f")
      printf '| %s | %s | %s | %.0f | %.2f | %s | %s |\n' "$w" "$p" "$c" "$tp" "$(python3 -c "print($tp / $base)")" "$lat" "$lags"
    done
  done
done
write_result replication workload,placement,backup
