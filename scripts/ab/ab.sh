#!/usr/bin/env bash
# Side-by-side comparison on a noisy machine: runs each command once per
# round, RUNS rounds, interleaved (the order reversed every other round,
# see round-order.sh), and prints each command's median txn/s (from the
# first line an `epochdb bench` prints) with all its runs, and its median
# peak resident memory (from /usr/bin/time) with all its runs.
# With FIGURE=NAME set (TITLE=... its heading, NOTE=... a line under it),
# also writes results/NAME-DATE.json (every run, the
# medians, commit, machine and command; scripts/figures/result.py), which
# scripts/figures/render.py puts in docs/figures.md.
# Usage: [FIGURE=NAME] scripts/ab/ab.sh RUNS "cmd A" "cmd B" ...
# e.g.   scripts/ab/ab.sh 3 "/tmp/old/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet" \
#                         "target/release/epochdb bench tpcc --threads 1 --duration 5 --warmup 1 --quiet"
set -uo pipefail
runs=$1
shift
declare -A res rss
here=$(dirname "$0")
source "$here/../figures/round-order.sh"
cmds=("$@")
jsonl=$(mktemp)
for r in $(seq "$runs"); do
  for i in $(round_order "$r" $(seq 0 $((${#cmds[@]} - 1)))); do
    # The whole output to a file, not through `head`: a closed pipe would
    # end the run before its teardown, which counts in peak memory.
    m=$(mktemp) o=$(mktemp)
    /usr/bin/time -f "%M" -o "$m" bash -c "${cmds[$i]}" > "$o" 2>/dev/null
    tps=$(head -1 "$o" | sed -E 's/.*: ([0-9]+) txn\/s.*/\1/')
    mb=$(($(tail -1 "$m") / 1024))
    res[$i]="${res[$i]:-} $tps"
    rss[$i]="${rss[$i]:-} $mb"
    python3 -c 'import json,sys; print(json.dumps({"round": int(sys.argv[1]), "command": sys.argv[2], "txn_per_s": float(sys.argv[3]), "peak_rss_mb": int(sys.argv[4])}))' \
      "$r" "${cmds[$i]}" "$tps" "$mb" >> "$jsonl"
    rm -f "$m" "$o"
  done
done
i=0
for c in "$@"; do
  echo "median $(echo ${res[$i]} | tr ' ' '\n' | median)  [${res[$i]} ]  peak RSS median $(echo ${rss[$i]} | tr ' ' '\n' | median) MB [${rss[$i]} ] : $c"
  i=$((i + 1))
done
if [ -n "${FIGURE:-}" ]; then
  python3 "$here/../figures/result.py" "$FIGURE" "$jsonl" "scripts/ab/ab.sh $runs ${cmds[*]@Q}" command "${NOTE:-}"
fi
rm -f "$jsonl"
