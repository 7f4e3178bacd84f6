#!/usr/bin/env bash
# Durability figures: throughput with durability off, log and
# log+checkpoint (3 runs each, interleaved, medians), latency to durability,
# and recovery time of a >= 2 GB database with 1 and 2 threads. Runs last
# 20 s so that each holds a whole checkpoint cycle (the first checkpoint
# starts 10 s after open, the default interval); a 10 s run held one
# checkpoint or none, depending on how long the load took.
# Usage: [ONLY=recovery] scripts/figures/durability.sh [DATA_DIR]   (needs ~12 GB free there)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/lib.sh
dir=${1:-target/figures-data}

# ONLY=recovery skips the throughput runs.
[ "${ONLY:-}" = recovery ] || for wl in tpcc ycsb; do
  for run in 1 2 3; do
    for d in off log log+checkpoint; do
      $bin bench $wl --threads 2 --duration 20 --quiet --durability $d --data-dir "$dir" --overwrite \
        --json "$out/$wl-$d-$run.json" > /dev/null
      record_report "$out/$wl-$d-$run.json" round=$run workload=$wl durability=$d
    done
  done
  for d in off log log+checkpoint; do
    tput=$(for r in 1 2 3; do field "$out/$wl-$d-$r.json" throughput; done | median)
    if [ "$d" = off ]; then
      echo "$wl $d: throughput median $tput"
    else
      p50=$(for r in 1 2 3; do grep -A1 durable_latency_us "$out/$wl-$d-$r.json" | tail -1 | sed 's/.*: //; s/,//'; done | median)
      p99=$(for r in 1 2 3; do grep -A2 durable_latency_us "$out/$wl-$d-$r.json" | tail -1 | sed 's/.*: //; s/,//'; done | median)
      ckpt=$(field "$out/$wl-$d-1.json" bytes || true)
      skip=$(field "$out/$wl-$d-1.json" skipped_bytes || true)
      echo "$wl $d: throughput median $tput; durable latency median p50 ${p50} us, p99 ${p99} us; checkpoint bytes ${ckpt:-0} (+${skip:-0} skipped as >= e_l)"
    fi
  done
done

# A database of >= 2 GB of log and checkpoint (the checkpoint interval is
# long enough that the logs since the first checkpoint are all kept), then
# recovery of fresh copies of it.
rm -rf "$dir" "$dir.orig"
$bin bench tpcc --threads 2 --duration 30 --quiet --durability log+checkpoint --checkpoint-interval 20 \
  --data-dir "$dir.orig" > /dev/null
recover_medians "$dir.orig" "$dir" durability
rm -rf "$dir" "$dir.orig"
write_result durability workload,durability,directory,threads
