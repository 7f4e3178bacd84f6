#!/usr/bin/env bash
# Query Fresh's figures on this 2-core machine, in the fair
# set-up it allows: a 1-thread durable TPC-C primary (value log) on CPU 0
# (taskset), its backups (`epochdb replica`, one replay thread) on CPU 1.
# Configurations, in turn (reversed every other round), REPS rounds:
# alone; alone beside a neighbour (a 1-thread TPC-C run without
# durability on CPU 1, what a busy CPU 1 costs a primary that ships
# nothing); 1 backup async, sync, very-safe; 2 backups async, sync. Each measures SECONDS after a 5 s warm-up, long
# enough for the primary's backlog of frames (256 MiB) to fill, so the
# measured run is the steady state. Prints, with medians of the rounds:
# throughput and its ratio to alone (Query Fresh: <= 6% lower with one
# sync backup); the primary's CPU for shipping (its replication threads,
# and what its log writers spend per MB beyond what they spend alone) as
# a share of its CPU per MB alone; latency to durability (the release
# latency) p50/p99 and its ratio to alone (Query Fresh: <= 1.16x); the
# backups' read-view lag; and CPU per MB of log: the backups' (each)
# against the primary's, which produced the log (Query Fresh: about 1/4;
# #18 aims <= 1/2).
# The configurations marked @tmpfs put the backups' data directories on
# tmpfs (/dev/shm): backups on machines of their own would not sync to
# the primary's disk, and here the others do (a backup's fsync at every
# seal queues beside the primary's on the one device).
# Usage: scripts/figures/query-fresh.sh [REPS] [SECONDS] (default 4 10; an
# even REPS runs each order as often).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-4}
secs=${2:-10}
source scripts/figures/lib.sh
scratch=$(mktemp -d)
shm=/dev/shm/epochdb-qf-$$
trap 'rm -rf "$scratch" "$shm"' EXIT
configs=(alone neighbour async-1 sync-1 very-safe-1 async-2 sync-2 async-1@tmpfs sync-1@tmpfs)

source scripts/figures/round-order.sh
for rep in $(seq "$reps"); do
  mapfile -t order < <(round_order "$rep" "${configs[@]}")
  for c in "${order[@]}"; do
    extra=() neighbour=
    if [[ $c == *@tmpfs ]]; then
      n=${c%@tmpfs}
      for i in $(seq 0 $((${n##*-} - 1))); do
        mkdir -p "$shm/$i"
        ln -s "$shm/$i" "$scratch/db.replica-$i"
      done
    fi
    case ${c%@tmpfs} in
      alone) ;;
      neighbour)
        taskset -c 1 $bin bench tpcc --threads 1 --duration $((secs + 30)) --warmup 0 --quiet >/dev/null 2>&1 &
        neighbour=$!
        sleep 2 ;;
      *) c0=${c%@tmpfs}; extra=(--replicas "${c0##*-}" --safety "${c0%-*}" --replica-cpu 1 --replay-threads 1) ;;
    esac
    taskset -c 0 $bin bench tpcc --threads 1 --duration "$secs" --warmup 5 --durability log \
      --data-dir "$scratch/db" --overwrite "${extra[@]}" --json "$out/qf-$c-$rep.json" >/dev/null 2>&1
    record_report "$out/qf-$c-$rep.json" round=$rep config="$c"
    if [ -n "$neighbour" ]; then kill "$neighbour"; wait "$neighbour" 2>/dev/null || true; fi
    rm -rf "$scratch"/db* "$shm"
  done
done

py() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1" "$2"; }
col() { for r in $(seq "$reps"); do py "print($2)" "$out/qf-$1-$r.json"; done | median; }
tp0=$(col alone 'r["throughput"]')
p50_0=$(col alone 'r["durability"]["durable_latency_us"]["p50"]')
p99_0=$(col alone 'r["durability"]["durable_latency_us"]["p99"]')
cpu0=$(col alone 'r["durability"]["cpu_ms_per_log_mb"]')
log0=$(col alone 'r["durability"]["logger_ms_per_log_mb"]')
echo "| configuration | txn/s | vs alone | shipping CPU / primary CPU alone | release latency p50 / p99 (ms) | vs alone (p50 / p99) | read-view lag p50 / p99 (epochs) | primary CPU per MB of log (ms) | each backup's CPU per MB (ms) | backup / primary |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for c in "${configs[@]}"; do
  tp=$(col "$c" 'r["throughput"]')
  p50=$(col "$c" 'r["durability"]["durable_latency_us"]["p50"]')
  p99=$(col "$c" 'r["durability"]["durable_latency_us"]["p99"]')
  if [ "$c" = alone ] || [ "$c" = neighbour ]; then
    ship="-" rest="- | - | - | -"
  else
    # The log writers' CPU per MB beyond theirs alone, plus the
    # replication threads', over the primary's whole CPU per MB alone.
    ship=$(col "$c" "(r['durability']['logger_ms_per_log_mb'] - $log0 + r['replication']['shipping_ms_per_log_mb']) / $cpu0")
    ship=$(printf %.3f "$ship")
    lag50=$(col "$c" 'r["replication"]["replay_lag_epochs"]["p50"]')
    lag99=$(col "$c" 'r["replication"]["replay_lag_epochs"]["p99"]')
    pcpu=$(col "$c" "r['durability']['cpu_ms_per_log_mb']")
    bcpu=$(col "$c" "r['replication']['backup_ms_per_log_mb']")
    rest="$lag50 / $lag99 | $(printf %.1f "$pcpu") | $(printf %.1f "$bcpu") | $(python3 -c "print('%.2f' % ($bcpu / $pcpu))")"
  fi
  printf '| %s | %.0f | %.2f | %s | %.1f / %.1f | %.2f / %.2f | %s |\n' "$c" "$tp" "$(python3 -c "print($tp / $tp0)")" "$ship" \
    "$(python3 -c "print($p50 / 1000)")" "$(python3 -c "print($p99 / 1000)")" \
    "$(python3 -c "print($p50 / $p50_0)")" "$(python3 -c "print($p99 / $p99_0)")" "$rest"
done
write_result query-fresh config
