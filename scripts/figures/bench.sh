#!/usr/bin/env bash
# Throughput figures: YCSB Silo variant (4M keys)
# with memsilo, kv and global-tid on 1 and 2 threads, and TPC-C with
# warehouses = threads; 3 runs of each, interleaved, medians. Writes
# results/bench-DATE.json.
# Usage: scripts/figures/bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
tput() { sed -E 's/.*: ([0-9]+) txn\/s.*/\1/'; }
source scripts/figures/round-order.sh # median
source scripts/figures/results.sh      # record, write_result
declare -A runs
for run in 1 2 3; do
  for t in 1 2; do
    for v in memsilo kv global-tid; do
      r=$($bin bench ycsb --threads $t --duration 5 --warmup 1 --variant $v --quiet | head -1 | tput)
      runs[ycsb-$v-$t]="${runs[ycsb-$v-$t]:-} $r"
      record round=$run workload=ycsb variant=$v threads=$t txn_per_s=$r
    done
    r=$($bin bench tpcc --threads $t --duration 10 --warmup 2 --quiet --check | head -1 | tput)
    runs[tpcc-$t]="${runs[tpcc-$t]:-} $r"
    record round=$run workload=tpcc variant=memsilo threads=$t txn_per_s=$r
  done
done
for key in ycsb-memsilo-1 ycsb-kv-1 ycsb-global-tid-1 ycsb-memsilo-2 ycsb-kv-2 ycsb-global-tid-2 tpcc-1 tpcc-2; do
  echo "$key: median $(echo ${runs[$key]} | tr ' ' '\n' | median) (runs:${runs[$key]})"
done
write_result bench workload,variant,threads
