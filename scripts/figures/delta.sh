#!/usr/bin/env bash
# Delta-logging figures (Gawain mode next to SiloR's), TPC-C
# with 2 threads, runs interleaved, medians of 3:
#  1. throughput and log bytes per committed transaction, off / log / delta;
#  2. checkpoints: log+checkpoint (full, with SiloR's e_l skip) against
#     delta+checkpoint (full, then incremental), 30 s runs;
#  3. recovery of the directory each of those modes leaves after 30 s, with
#     1 and 2 threads, each run from a pristine copy read once into the
#     page cache.
# Usage: [ONLY=recovery] scripts/figures/delta.sh [DATA_DIR]   (needs ~15 GB free there)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/figures/lib.sh
dir=${1:-target/figures-data}
bench() { $bin bench tpcc --threads 2 --quiet "$@" > /dev/null; }

# ONLY=recovery skips the throughput runs.
[ "${ONLY:-}" = recovery ] || for run in 1 2 3; do
  for d in off log delta; do
    bench --duration 20 --durability $d --data-dir "$dir" --overwrite --json "$out/delta-$d-$run.json"
    record_report "$out/delta-$d-$run.json" round=$run durability=$d
  done
  for d in log+checkpoint delta+checkpoint; do
    bench --duration 30 --durability $d --data-dir "$dir" --overwrite --json "$out/delta-$d-$run.json"
    record_report "$out/delta-$d-$run.json" round=$run durability=$d
  done
done
[ "${ONLY:-}" = recovery ] || for d in off log delta log+checkpoint delta+checkpoint; do
  tput=$(for r in 1 2 3; do field "$out/delta-$d-$r.json" throughput; done | median)
  line="$d: throughput median $tput"
  if [ "$d" != off ]; then
    per=$(for r in 1 2 3; do field "$out/delta-$d-$r.json" log_bytes_per_txn; done | median)
    line="$line; log bytes per committed transaction median $per"
  fi
  case $d in *checkpoint)
    n=$(for r in 1 2 3; do field "$out/delta-$d-$r.json" installed; done | median)
    total=$(for r in 1 2 3; do field "$out/delta-$d-$r.json" total_bytes; done | median)
    last=$(for r in 1 2 3; do echo "$(field "$out/delta-$d-$r.json" last) $(field "$out/delta-$d-$r.json" bytes)"; done | tr '\n' ';')
    line="$line; checkpoints median $n, bytes in all median $total; last checkpoint per run: $last"
  esac
  echo "$line"
done

for d in log+checkpoint delta+checkpoint; do
  rm -rf "$dir" "$dir.orig"
  bench --duration 30 --durability $d --data-dir "$dir.orig" --overwrite
  recover_medians "$dir.orig" "$dir" "delta-$d"
done
rm -rf "$dir" "$dir.orig"
write_result delta durability,directory,threads
