#!/usr/bin/env bash
# epochdb beside the original C++ Silo on this machine, interleaved in one
# run (this machine's speed drifts by tens of percent an hour, so only
# ratios of runs taken side by side mean anything). For each configuration
# and round, Silo and epochdb run back to back (which goes first alternates
# by round); the script prints every run, the medians, the ratio of the
# medians and the ratio in each round, and each side's median peak
# resident memory, and writes results/silo-DATE.json.
#
# Silo is not built here: build its `dbtest` yourself from its public
# repository, in a folder outside this one, and pass its path.
#
# Usage: SILO=/path/to/dbtest [SCHEMA=silo|spec] [PAUSE=S] scripts/figures/silo.sh [RUNS] [SECONDS] [CONFIG...]
#   RUNS     rounds (default 3)      SECONDS  measured seconds per run (default 15)
#   CONFIG   among ycsb-1 ycsb-2 tpcc-1 tpcc-2 tpcc-log-1 tpcc-log-2
#            tpcc-delta-1 tpcc-delta-2 (default: all but the delta ones),
#            and ycsb-ops-T, tpcc-ops-T: each thread commits OPS
#            transactions instead of running SECONDS (Silo's
#            --ops-per-worker, epochdb's --transactions; OPS defaults to
#            10000000 for YCSB, 500000 for TPC-C), so both sides do the same
#            work: their peak memory then compares the same rows
#   PAUSE    seconds to sleep before each run (default 0). On this VM a
#            run right after another of its binary tends to be faster,
#            probably because it gets memory the one before freed while
#            the host still backs it (the host takes freed memory back);
#            after a pause every run starts more alike, though the order's
#            lean stays and may flip (2 threads, logging over
#            off with logging first and off first: 0.91 and 0.90, 0.90 and
#            0.94, 0.83 and 0.92, 0.87 and 0.83, 0.83 and 0.98, 0.83 and
#            0.96 in six runs with PAUSE=10, 0.82 and 0.91 in one without;
#            separate runs)
#
# Workloads, the same on both sides: YCSB with Silo's mix (80% reads, 20%
# read-modify-writes of one 100-byte value, uniform over 4M keys); TPC-C
# with W = threads and the standard mix, over the rows Silo's driver uses
# (`bench tpcc --schema silo`: variable-length strings, order lines
# without OL_DIST_INFO, a NEW-ORDER that does not read S_DIST_xx, as
# Silo lays its rows out; SCHEMA=spec runs epochdb with
# the specification's rows instead, more work than Silo does). `tpcc-log-T` adds value logging
# with fsync to one log file (Silo) or one logger (epochdb); it also runs
# epochdb with logging off in the same round and prints log bytes per
# committed transaction on both sides. `tpcc-delta-T` is the same with
# epochdb logging deltas (only the columns an update changed, Gawain)
# against Silo's value logging.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SILO:?set SILO to the path of the dbtest binary of the original Silo}"
source scripts/figures/results.sh # record, write_result (before the arguments shift)
schema=${SCHEMA:-silo}
runs=${1:-3}
secs=${2:-15}
shift $(($# < 2 ? $# : 2))
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(ycsb-1 ycsb-2 tpcc-1 tpcc-2 tpcc-log-1 tpcc-log-2)
source scripts/figures/lib.sh
data=target/silo-figures-data
mkdir -p "$data"

# Each run leaves "<txn/s> <peak RSS MB> <log bytes per txn or ->" in
# $out/silo-<side>-<config>-<run>.
# How long a run of CONFIG runs: Silo's then epochdb's options.
ops() { [ "${1%%-*}" = ycsb ] && echo "${OPS:-10000000}" || echo "${OPS:-500000}"; }
silo_span() { [[ $1 == *-ops-* ]] && echo "--ops-per-worker $(ops "$1")" || echo "--runtime $secs"; }
epochdb_span() { [[ $1 == *-ops-* ]] && echo "--transactions $(ops "$1")" || echo "--duration $secs"; }

silo_run() { # CONFIG THREADS LOG(0|1) FILE
  local bench=${1%%-*} t=$2 log=$3 f=$4 args=()
  # The run length first: Silo's option parser lets --ops-per-worker
  # fall through to --bench-opts, which a later --bench-opts overrides.
  read -ra args <<< "$(silo_span "$1")"
  if [ "$bench" = ycsb ]; then
    args+=(--bench ycsb --scale-factor 4000 --bench-opts "--workload-mix 80,0,20,0")
  else
    args+=(--bench tpcc --scale-factor "$t")
  fi
  [ "$log" = 1 ] && args+=(--logfile "$data/silo-log/log")
  # Silo's driver sometimes aborts (signal 6, seen in a 2-thread logging
  # run): such a run is retried, up to three tries, and
  # counted in the table's footer. An epochdb run that fails stops the
  # script.
  local try
  for try in 1 2 3; do
    rm -rf "$data/silo-log" && mkdir -p "$data/silo-log"
    /usr/bin/time -f "%M" -o "$f.rss" "$SILO" "${args[@]}" --db-type ndb-proto2 \
      --num-threads "$t" > "$f.out" 2> "$f.err" && break
    echo "round $run $1 silo: try $try failed ($(head -1 "$f.rss")), $f.err kept as $f.err.$try" >&2
    cp "$f.err" "$f.err.$try"
    silo_failures=$((silo_failures + 1))
    [ "$try" = 3 ] && return 1
  done
  # Silo's last line: throughput, persisted throughput, latency, ...
  local tput
  tput=$(tail -1 "$f.out" | awk '{printf "%d", $1}')
  local per=-
  if [ "$log" = 1 ]; then
    per=$(du -cb "$data/silo-log" | tail -1 | awk -v n="$tput" -v s="$secs" '{printf "%d", $1 / (n * s)}')
  fi
  echo "$tput $(($(cat "$f.rss") / 1024)) $per" > "$f"
}
epochdb_run() { # CONFIG THREADS DURABILITY FILE
  local bench=${1%%-*} t=$2 d=$3 f=$4 args=()
  read -ra args <<< "$(epochdb_span "$1")"
  [ "$d" = off ] || args+=(--durability "$d" --data-dir "$data/epochdb" --overwrite)
  [ "$bench" = ycsb ] || args+=(--schema "$schema")
  # No warm-up, as Silo's driver has none: both sides measure from their
  # first transaction and run for the same seconds (peak memory grows
  # with the rows a run inserts).
  /usr/bin/time -f "%M" -o "$f.rss" $bin bench "$bench" --threads "$t" --warmup 0 \
    --quiet "${args[@]}" --json "$f.json" > "$f.out" 2>&1
  local per=-
  [ "$d" = off ] || per=$(field "$f.json" log_bytes_per_txn | awk '{printf "%d", $1}')
  echo "$(field "$f.json" throughput | awk '{printf "%d", $1}') $(($(cat "$f.rss") / 1024)) $per" > "$f"
}

silo_failures=0
for run in $(seq "$runs"); do
  for c in "${configs[@]}"; do
    t=${c##*-}
    log=0
    [[ $c == *-log-* || $c == *-delta-* ]] && log=1
    d=off
    [ $log = 1 ] && d=log
    [[ $c == *-delta-* ]] && d=delta
    sides=(silo epochdb)
    [ $log = 1 ] && sides+=(epochdb-off)
    # Reversed in even rounds, epochdb with logging off too: always last,
    # it ran right after epochdb with logging in every other round, and a
    # run after one of its own binary tends to be faster (round-order.sh),
    # which biased logging / off down.
    for s in $(round_order "$run" "${sides[@]}"); do
      f=$out/silo-$s-$c-$run
      sleep "${PAUSE:-0}"
      if [ "$s" = silo ]; then
        silo_run "$c" "$t" $log "$f"
      elif [ "$s" = epochdb ]; then
        epochdb_run "$c" "$t" $d "$f"
      else
        epochdb_run "$c" "$t" off "$f"
      fi
      echo "round $run $c $s: $(cat "$f") (txn/s, peak RSS MB, log bytes/txn)"
      read -r tput rss per < "$f"
      record round="$run" config="$c" side="$s" txn_per_s="$tput" peak_rss_mb="$rss" log_bytes_per_txn="$per"
    done
  done
done

col() { for r in $(seq "$runs"); do awk -v k="$2" '{print $k}' "$out/silo-$1-$r"; done | median; }
# round_ratio A B ROUND: side A's throughput over side B's in that round.
round_ratio() { awk 'NR == FNR {a = $1; next} {printf "%.4f\n", a / $1}' "$out/silo-$1-$3" "$out/silo-$2-$3"; }
# per_round A B: those ratios in round order, "a1/b1, a2/b2, ...".
per_round() {
  for r in $(seq "$runs"); do round_ratio "$1" "$2" "$r"; done | awk '{printf "%s%.2f", (NR > 1 ? ", " : ""), $1}'
}
# Logging over off in the rounds of one order, median: PARITY 1 for the
# odd rounds (logging runs before off), 0 for the even ones (after it).
# The epochdb run that goes second tends to be faster (round-order.sh),
# so with an odd number of rounds the overall median leans one way.
by_order() { # CONFIG PARITY
  for r in $(seq "$runs"); do
    ((r % 2 == $2)) || continue
    round_ratio "epochdb-$1" "epochdb-off-$1" "$r"
  done | median
}
echo
echo "| configuration | Silo txn/s | epochdb txn/s | epochdb / Silo (per round) | peak RSS epochdb / Silo (MB) | log B/txn epochdb / Silo | epochdb logging / off |"
echo "| --- | ---: | ---: | --- | ---: | ---: | --- |"
for c in "${configs[@]}"; do
  s=$(col "silo-$c" 1)
  e=$(col "epochdb-$c" 1)
  ratio="$(awk -v a="$e" -v b="$s" 'BEGIN {printf "%.2f", a / b}') ($(per_round "epochdb-$c" "silo-$c"))"
  logs="" off=""
  if [[ $c == *-log-* || $c == *-delta-* ]]; then
    logs="$(col "epochdb-$c" 3) / $(col "silo-$c" 3)"
    off=$(awk -v a="$e" -v b="$(col "epochdb-off-$c" 1)" 'BEGIN {printf "%.2f", a / b}')
    off+=" (per round $(per_round "epochdb-$c" "epochdb-off-$c")"
    if ((runs > 1)); then
      off+=$(printf '; logging first %.2f, off first %.2f' "$(by_order "$c" 1)" "$(by_order "$c" 0)")
    fi
    off+=")"
  fi
  echo "| $c | $s | $e | $ratio | $(col "epochdb-$c" 2) / $(col "silo-$c" 2) | $logs | $off |"
done
echo "(Silo runs that failed and were run again: $silo_failures)"
echo "(medians of $runs interleaved runs of $secs s, or of the -ops- configurations' transaction counts; epochdb's TPC-C schema $schema; $(date -u +%F), epochdb $(git rev-parse --short HEAD))"
write_result silo config,side "epochdb's TPC-C schema $schema; Silo runs that failed and were run again: $silo_failures"
