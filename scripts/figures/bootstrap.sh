#!/usr/bin/env bash
# Bootstrap of a new backup: a 2-thread, 2-warehouse durable
# TPC-C primary (value log and checkpoints) runs for SECONDS; then one
# `epochdb replica` starts from an empty directory and catches up from
# the primary's checkpoint and log files while the primary idles
# (`bench --replicas 1 --replicas-join end`). For each BIN (default: this
# tree's build), the backup replays with 1 thread, then with 2; all in
# turn, REPS rounds. Prints each run, then the medians of seconds until
# in sync and until its read view reached the primary's released epoch,
# of the backup's CPU seconds and of its peak resident memory (reported
# by builds from the one that bounded a catch-up's memory; 0 before).
# Usage: scripts/figures/bootstrap.sh [REPS] [SECONDS] [BIN...] (default 3 60).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
secs=${2:-60}
shift 2 || shift $#
source scripts/figures/lib.sh
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$bin")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

py() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['replication']['bootstrap']; $1" "$2"; }
for rep in $(seq "$reps"); do
  for b in "${!bins[@]}"; do
    for t in 1 2; do
      f="$out/bootstrap-$b-$t-$rep.json"
      "${bins[$b]}" bench tpcc --threads 2 --duration "$secs" --warmup 0 --durability log+checkpoint \
        --data-dir "$scratch/db" --overwrite --replicas 1 --replicas-join end --replay-threads $t --json "$f" >/dev/null 2>&1
      py 'print("'"${bins[$b]}"', replay threads '$t': %.1f MB, in sync %.2f s, caught up %.2f s, backup CPU %.2f s, backup peak RSS %.0f MB" % (r["primary_bytes"] / 1e6, r["in_sync_s"], r["caught_up_s"], r["backup_cpu_s"], r.get("backup_peak_rss_mb", 0)))' "$f"
      # shellcheck disable=SC2046
      record round=$rep build="${bins[$b]}" replay_threads=$t $(py 'print("primary_mb=%.1f in_sync_s=%.2f caught_up_s=%.2f backup_cpu_s=%.2f" % (r["primary_bytes"] / 1e6, r["in_sync_s"], r["caught_up_s"], r["backup_cpu_s"]))' "$f")
      rm -rf "$scratch"/db*
    done
  done
done
echo "| build | replay threads | primary's checkpoint + log (MB) | in sync (s) | caught up (s) | backup CPU (s) | caught up (MB/s) | backup peak RSS (MB) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for b in "${!bins[@]}"; do
  for t in 1 2; do
    col() { for r in $(seq "$reps"); do py "print(r.get('$1', 0))" "$out/bootstrap-$b-$t-$r.json"; done | median; }
    mb=$(col primary_bytes) sync_s=$(col in_sync_s) up=$(col caught_up_s) cpu=$(col backup_cpu_s)
    rss=$(col backup_peak_rss_mb)
    printf '| %s | %d | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f |\n' "${bins[$b]}" $t "$(python3 -c "print($mb / 1e6)")" \
      "$sync_s" "$up" "$cpu" "$(python3 -c "print($mb / 1e6 / $up)")" "$rss"
  done
done
write_result bootstrap build,replay_threads
