#!/usr/bin/env bash
# Side-by-side comparison on a noisy machine: runs each command once per
# round, RUNS rounds, interleaved (the order reversed every other round),
# and prints each command's median txn/s
# (from the first line an `epochdb bench` prints) with all its runs.
# Usage: scripts/ab.sh RUNS "cmd A" "cmd B" ...
# e.g.   scripts/ab.sh 3 "/tmp/old/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet" \
#                      "target/release/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet"
set -uo pipefail
runs=$1
shift
declare -A res
cmds=("$@")
n=${#cmds[@]}
for r in $(seq "$runs"); do
  # Odd rounds run the commands in order, even rounds in reverse: a run
  # right after a run of the same kind is faster here (up to 14% for the
  # same binary twice), so a fixed order favours the later commands.
  for j in $(seq 0 $((n - 1))); do
    i=$j
    if [ $((r % 2)) -eq 0 ]; then i=$((n - 1 - j)); fi
    t=$(eval "${cmds[$i]}" 2>/dev/null | head -1 | sed -E 's/.*: ([0-9]+) txn\/s.*/\1/')
    res[$i]="${res[$i]:-} $t"
  done
done
i=0
for c in "$@"; do
  med=$(echo ${res[$i]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "median $med  [${res[$i]} ] : $c"
  i=$((i + 1))
done
