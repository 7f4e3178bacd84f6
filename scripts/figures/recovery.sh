#!/usr/bin/env bash
# Recovery speed, side by side: builds two 2-warehouse TPC-C
# data directories (`bench tpcc --threads 2 --duration 30` with
# log+checkpoint and with delta+checkpoint, a 20 s checkpoint interval, so
# each holds one checkpoint and the log after it), then recovers fresh
# copies of each with every binary given, with 1 and 2 threads, REPS times,
# interleaved; each copy synced and read once so recovery reads from the
# page cache. Prints each run, then medians with MB/s of checkpoint + log,
# the seconds spent loading the checkpoint and the CPUs the process kept
# busy (CPU seconds over seconds; nan for a binary older than its
# `checkpoint_seconds` or `cpu_seconds` report field). On a machine of C
# CPUs, a run that keeps them all busy is as fast as that much work can
# go: the most n threads can gain over 1 is then (1-thread seconds) /
# (1-thread CPU seconds / min(n, C)). It also prints the CPU seconds
# spent in the kernel, mostly zeroing the pages the rows fill: on a
# virtual machine whose host takes freed memory back (free page
# reporting), a page new to the process is often new to the host too,
# and its first touch costs many times what it does on a machine of its
# own. Each run also prints the recovery's peak RSS (with the log files
# it maps). WARM=1 has a process fill and free 3 GB just before each
# recovery, so that the pages recovery gets are ones the host still
# backs: the figures then show recovery's own cost without the host's.
#
# Usage: scripts/figures/recovery.sh DATA_DIR REPS BIN [BIN...]
#   DATA_DIR is a scratch directory the script owns (~20 GB): it keeps
#   log.orig and delta.orig there for later runs (delete DATA_DIR to build
#   new ones), and deletes and rewrites DATA_DIR/copy, DATA_DIR/r.json,
#   DATA_DIR/rss and DATA_DIR/results; give it nothing else to hold.
# e.g.:  scripts/figures/recovery.sh /tmp/recfig 3 /tmp/old-epochdb target/release/epochdb
set -euo pipefail
source "$(dirname "$0")/results.sh" # record, write_result (before the arguments shift)
dir=$1 reps=$2
shift 2
mkdir -p "$dir"
for mode in log delta; do
  if [ ! -f "$dir/$mode.orig/manifest" ]; then
    rm -rf "$dir/$mode.orig"
    "$1" bench tpcc --threads 2 --duration 30 --durability "$mode+checkpoint" --checkpoint-interval 20 \
      --data-dir "$dir/$mode.orig" --quiet | grep durability
  fi
done
source "$(dirname "$0")/round-order.sh"
results=$dir/results
: > "$results"
for run in $(seq "$reps"); do
  for mode in log delta; do
    # 1 then 2 threads, 2 then 1 in even runs: a run's speed depends on
    # what ran before it (the kernel time of one run's value-log
    # recoveries was 7.41 CPU s on 1 thread, 4.09 on 2, each right after
    # the other), so neither thread count always goes second. The same
    # for the binaries: the second of two recoveries gets pages the
    # first just freed, which the host may still back (value, 2 threads: one build took 4.76 s first and 4.32 second, the
    # other 4.47 first and 4.06 second).
    mapfile -t bins < <(round_order "$run" "$@")
    for t in $(round_order "$run" 1 2); do
      for bin in "${bins[@]}"; do
        rm -rf "$dir/copy"
        cp -r "$dir/$mode.orig" "$dir/copy"
        sync
        find "$dir/copy" -type f -exec cat {} + > /dev/null
        [ "${WARM:-0}" = 0 ] || python3 -c "bytearray(b'\x01') * (3 << 30)"
        /usr/bin/time -f %M -o "$dir/rss" \
          "$bin" recover --data-dir "$dir/copy" --threads "$t" --quiet --json "$dir/r.json" 2>/dev/null > /dev/null
        line=$(python3 -c "
import json; r = json.load(open('$dir/r.json'))
print(r['seconds'], r['checkpoint_bytes'] + r['log_bytes'], r['records'], r.get('checkpoint_seconds', 'nan'),
      r.get('cpu_seconds', float('nan')) / r['seconds'], r.get('system_seconds', float('nan')))")
        echo "$mode $t $bin $line $(($(tail -1 "$dir/rss") / 1024))" | tee -a "$results"
        read -r s bytes recs ck busy sys_s <<<"$line"
        record round="$run" durability="$mode" threads="$t" build="$bin" recovery_s="$s" \
          mb_per_s="$(echo "$bytes / 1000000 / $s" | bc -l)" records="$recs" checkpoint_s="$ck" cpus_busy="$busy" \
          kernel_cpu_s="$sys_s" peak_rss_mb="$(($(tail -1 "$dir/rss") / 1024))"
      done
    done
  done
done
rm -rf "$dir/copy" "$dir/r.json" "$dir/rss"
echo "medians (mode, threads, binary: seconds, MB/s of checkpoint + log, records, seconds loading the checkpoint, CPUs busy, CPU seconds in the kernel, peak RSS):"
python3 - "$results" <<'PY'
import sys, statistics
runs = {}
for line in open(sys.argv[1]):
    mode, t, b, s, n, recs, ck, busy, sys_s, rss = line.split()
    runs.setdefault((mode, t, b), []).append((float(s), int(n), int(recs), float(ck), float(busy), float(sys_s), int(rss)))
for (mode, t, b), rs in runs.items():
    s = statistics.median(r[0] for r in rs)
    n = rs[0][1]
    ck = statistics.median(r[3] for r in rs)
    busy = statistics.median(r[4] for r in rs)
    kernel = statistics.median(r[5] for r in rs)
    rss = statistics.median(r[6] for r in rs)
    print(f"{mode:5} {t} {b}: {s:.2f} s ({', '.join(f'{r[0]:.2f}' for r in rs)}), {n / 1e6 / s:.0f} MB/s of {n / 1e6:.0f} MB, {rs[0][2]} records, checkpoint {ck:.2f} s, {busy:.2f} CPUs busy, {kernel:.2f} CPU s in the kernel, peak RSS {rss} MB")
PY
write_result recovery durability,threads,build
