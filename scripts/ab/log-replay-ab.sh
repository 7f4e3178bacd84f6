#!/usr/bin/env bash
# Log replay side by side: `epochdb verify --replay WAY
# --data-dir DIR --threads T --rounds 3 --quiet` for each variant in turn,
# 3 s apart, PAIRS times. Round 1 is a new process's first recovery (with
# this machine's cost of fresh memory); rounds 2-3 fill memory round 1
# touched. Prints, per run, each round's seconds and CPU seconds, then
# per variant the medians of round 1 and of rounds 2-3. DIR is a data
# directory (e.g. scripts/figures/recovery.sh's log.orig); verify writes
# nothing to it.
#
# Usage: scripts/ab/log-replay-ab.sh DIR PAIRS THREADS BIN:WAY [BIN:WAY...]
#   WAY is merge or lookup.
# e.g.:  scripts/ab/log-replay-ab.sh /tmp/recfig/log.orig 3 2 target/release/epochdb:merge target/release/epochdb:lookup
set -euo pipefail
source "$(dirname "$0")/../figures/results.sh" # record, write_result (before the arguments shift)
dir=$1 pairs=$2 threads=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pair in $(seq "$pairs"); do
  for v in "$@"; do
    sleep 3
    "${v%:*}" verify --replay "${v##*:}" --data-dir "$dir" --threads "$threads" --rounds 3 --quiet 2>&1 |
      awk -v v="$v" '/^verified/ {for (i = 1; i <= NF; i++) {if ($i == "in" && $(i + 2) == "s") w = $(i + 1); if ($i == "(CPU") c = $(i + 1)}
        printf "%s %s %s ", (n++ == 0 ? v : ""), w, c} END {print ""}' | tee -a "$out"
    read -r _ first _ second _ third _ < <(tail -1 "$out")
    record round="$pair" variant="$v" first_s="$first" second_s="$second" third_s="$third"
  done
done
python3 - "$out" <<'PY'
import sys, statistics
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 7:
        continue
    r = runs.setdefault(f[0], ([], []))
    r[0].append(float(f[1]))
    r[1].extend([float(f[3]), float(f[5])])
print("variant: round 1 median (runs), rounds 2-3 median (range), seconds")
for v, (first, warm) in runs.items():
    print(f"{v}: {statistics.median(first):.2f} ({', '.join(f'{x:.2f}' for x in first)}), "
          f"{statistics.median(warm):.2f} ({min(warm):.2f}-{max(warm):.2f})")
PY
write_result log-replay-ab variant "$threads threads, $dir"
