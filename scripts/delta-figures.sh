#!/usr/bin/env bash
# Delta-logging figures for the README (Gawain mode next to SiloR's), TPC-C
# with 2 threads, runs interleaved, medians of 3:
#  1. throughput and log bytes per committed transaction, off / log / delta;
#  2. checkpoints: log+checkpoint (full, with SiloR's e_l skip) against
#     delta+checkpoint (full, then incremental), 30 s runs;
#  3. recovery of the directory each of those modes leaves after 30 s, with
#     1 and 2 threads, each run from a pristine copy read once into the
#     page cache.
# Usage: scripts/delta-figures.sh [DATA_DIR]   (needs ~15 GB free there)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
dir=${1:-target/figures-data}
out=target/figures
mkdir -p "$out"
field() { grep -m1 "\"$2\"" "$1" | sed 's/.*: //; s/,$//; s/"//g'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bench() { $bin bench tpcc --threads 2 --quiet --data-dir "$dir" "$@" > /dev/null; }

for run in 1 2 3; do
  for d in off log delta; do
    bench --duration 20 --durability $d --json "$out/delta-$d-$run.json"
  done
  for d in log+checkpoint delta+checkpoint; do
    bench --duration 30 --durability $d --json "$out/delta-$d-$run.json"
  done
done
for d in off log delta log+checkpoint delta+checkpoint; do
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
  bench --duration 30 --durability $d
  mv "$dir" "$dir.orig"
  $bin inspect --data-dir "$dir.orig" | head -6
  for run in 1 2 3; do
    for t in 1 2; do
      rm -rf "$dir"
      cp -r "$dir.orig" "$dir"
      sync
      find "$dir" -type f -exec cat {} + > /dev/null
      $bin recover --data-dir "$dir" --threads $t --quiet --json "$out/delta-recover-$d-$t-$run.json" | head -1
    done
  done
  for t in 1 2; do
    s=$(for r in 1 2 3; do field "$out/delta-recover-$d-$t-$r.json" seconds; done | median)
    echo "$d recovery with $t threads: median $s s"
  done
done
rm -rf "$dir" "$dir.orig"
