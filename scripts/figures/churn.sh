#!/usr/bin/env bash
# Range scans under insert/delete churn: `epochdb bench churn`
# at k = 25 and k = 2, with deleted records unhooked once no snapshot can
# need them (this build) and kept until the snapshot bound as Silo does
# (--keep-tombstones), ROUNDS rounds interleaved, 5 s each; prints each
# configuration's runs and median scans committed per second, and writes
# results/churn-DATE.json.
# Usage: scripts/figures/churn.sh [ROUNDS] [EPOCHDB]   (default 3, target/release/epochdb)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
bin=${2:-target/release/epochdb}
[ -x "$bin" ] || cargo build -q --release -p epochdb-cli
source scripts/figures/results.sh # record, write_result
declare -A scans visited
configs=("25" "25 --keep-tombstones" "2" "2 --keep-tombstones")
for round in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    # shellcheck disable=SC2086
    line=$("$bin" bench churn --duration 5 --snapshot-epochs $c)
    s=$(sed -E 's/.*: ([0-9]+) scans\/s.*/\1/' <<<"$line")
    v=$(sed -E 's/.*, ([0-9]+) records visited.*/\1/' <<<"$line")
    scans[$c]="${scans[$c]:-} $s"
    visited[$c]="${visited[$c]:-} $v"
    k=${c%% *}
    tombstones=$([ "$c" = "$k" ] && echo unhooked-early || echo kept)
    record round=$round snapshot_epochs=$k tombstones=$tombstones scans_per_s=$s records_visited_per_scan=$v
  done
done
source scripts/figures/round-order.sh # median
median_of() { tr ' ' '\n' <<<"$1" | median; } # of a space-separated list
for c in "${configs[@]}"; do
  echo "k = $c: scans/s committed median $(median_of "${scans[$c]}") [${scans[$c]} ], records visited per scan median $(median_of "${visited[$c]}") [${visited[$c]} ]"
done
write_result churn snapshot_epochs,tombstones
