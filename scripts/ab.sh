#!/usr/bin/env bash
# Side-by-side comparison on a noisy machine: runs each command once per
# round, RUNS rounds, interleaved (the order reversed every other round,
# see round-order.sh), and prints each command's median txn/s (from the
# first line an `epochdb bench` prints) with all its runs, and its median
# peak resident memory (from /usr/bin/time) with all its runs.
# Usage: scripts/ab.sh RUNS "cmd A" "cmd B" ...
# e.g.   scripts/ab.sh 3 "/tmp/old/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet" \
#                      "target/release/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet"
set -uo pipefail
runs=$1
shift
declare -A res rss
source "$(dirname "$0")/round-order.sh"
cmds=("$@")
for r in $(seq "$runs"); do
  for i in $(round_order "$r" $(seq 0 $((${#cmds[@]} - 1)))); do
    # The whole output to a file, not through `head`: a closed pipe would
    # end the run before its teardown, which counts in peak memory.
    m=$(mktemp) o=$(mktemp)
    /usr/bin/time -f "%M" -o "$m" bash -c "${cmds[$i]}" > "$o" 2>/dev/null
    res[$i]="${res[$i]:-} $(head -1 "$o" | sed -E 's/.*: ([0-9]+) txn\/s.*/\1/')"
    rss[$i]="${rss[$i]:-} $(($(tail -1 "$m") / 1024))"
    rm -f "$m" "$o"
  done
done
i=0
for c in "$@"; do
  echo "median $(echo ${res[$i]} | tr ' ' '\n' | median)  [${res[$i]} ]  peak RSS median $(echo ${rss[$i]} | tr ' ' '\n' | median) MB [${rss[$i]} ] : $c"
  i=$((i + 1))
done
