#!/usr/bin/env bash
# epochdb serve beside redis-server on this machine, interleaved in one run:
# the same redis-benchmark commands (-t set,get,incr,mset -d 100 -r 1000000
# --threads 2) at -c 1 and -c 50, -P 1 and -P 16, for three pairings:
#   off       epochdb --durability off           vs redis no AOF
#   always    epochdb --appendfsync always (log) vs redis appendfsync always
#   everysec  epochdb --appendfsync everysec     vs redis appendfsync everysec
# Prints requests/s (median of REPS runs, each system in turn, which goes
# first alternating) and ratios, and writes results/redis-DATE.json.
# With --threads, redis-benchmark notices that a test is done only at its
# 250 ms timer tick, so a run's elapsed time is a multiple of 250 ms (a
# 0.06 s run reports as 0.25 s): each test runs alone, with as many
# requests as a calibration run on redis says take about SECS seconds
# (the tick then costs at most about 250 ms / SECS). Request counts are
# multiples of clients x pipeline: with -P, redis-benchmark aborts a run
# whose count is not a multiple of the pipeline.
# Usage: scripts/figures/redis.sh [REPS] [SECS] (defaults 3, 4). Needs
# redis-server, redis-benchmark (apt install redis-server redis-tools).
# TESTS, PAIRINGS and CLIENTS (space-separated) choose other redis-benchmark
# tests, pairings and client counts, FIGURE the result's name; e.g. the
# data types: TESTS="lpush rpush lpop rpop sadd hset spop zadd zpopmin
# lrange_100 lrange_600 mset" PAIRINGS="off always" CLIENTS=50
# FIGURE=redis-types.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
secs=${2:-4}
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
scratch=$(mktemp -d)
trap 'redis-cli -p 7411 shutdown nosave >/dev/null 2>&1 || true; redis-cli -p 7412 shutdown >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

start_pair() { # $1 pairing
  rm -rf "$scratch"/*
  mkdir -p "$scratch/redis"
  case $1 in
    off) redis-server --port 7411 --save '' --appendonly no --daemonize yes --dir "$scratch/redis" >/dev/null
         $bin serve --port 7412 --durability off --threads 2 >/dev/null 2>&1 & ;;
    always|everysec)
         redis-server --port 7411 --save '' --appendonly yes --appendfsync "$1" --daemonize yes --dir "$scratch/redis" >/dev/null
         $bin serve --port 7412 --durability log --appendfsync "$1" --data-dir "$scratch/epochdb" --threads 2 >/dev/null 2>&1 & ;;
  esac
  for p in 7411 7412; do
    until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done
  done
}
stop_pair() {
  redis-cli -p 7411 shutdown nosave >/dev/null 2>&1 || true
  redis-cli -p 7412 shutdown >/dev/null 2>&1 || true
  wait 2>/dev/null || true
}
bench() { # $1 port $2 clients $3 pipeline $4 requests $5 test -> requests/s
  redis-benchmark -p "$1" -t "$5" -d 100 -r 1000000 -c "$2" -P "$3" -n "$4" --threads 2 --csv 2>/dev/null |
    awk -F'","' 'NR>1 {gsub(/"/,"",$2); print $2; exit}'
}
source scripts/figures/round-order.sh # median
source scripts/figures/results.sh      # record, write_result

echo "# redis-benchmark, epochdb $(git rev-parse --short HEAD), $(redis-server --version | awk '{print $3}'), $(date -u +%Y-%m-%d), $reps runs each of about $secs s, interleaved"
printf "| pairing | -c | -P | test | requests | redis rps | epochdb rps | epochdb / redis |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n"
for pairing in ${PAIRINGS:-off always everysec}; do
  start_pair $pairing
  for c in ${CLIENTS:-1 50}; do
    for P in 1 16; do
      for t in ${TESTS:-set get incr mset}; do
        # Calibration on redis: grow the run until it reports 1 s or more
        # (so its rate is off by a third at most), then aim for SECS s.
        n=$(( 1000 * P * c ))
        while :; do
          rps=$(bench 7411 $c $P $n $t)
          awk -v n=$n -v r="$rps" 'BEGIN {exit !(n / r >= 1)}' && break
          n=$(awk -v n=$n -v r="$rps" -v q=$((c * P)) 'BEGIN {m = int(r * 1.5 / q) * q; print (m > 2 * n ? m : 2 * n)}')
        done
        n=$(awk -v s="$secs" -v r="$rps" -v q=$((c * P)) 'BEGIN {print int(r * s / q) * q}')
        : >"$scratch/r" ; : >"$scratch/e"
        for i in $(seq "$reps"); do
          # Which server goes first alternates: a run right after one of
          # the same kind tends to be faster on this machine.
          if [ $((i % 2)) -eq 1 ]; then
            bench 7411 $c $P $n $t >>"$scratch/r"
            bench 7412 $c $P $n $t >>"$scratch/e"
          else
            bench 7412 $c $P $n $t >>"$scratch/e"
            bench 7411 $c $P $n $t >>"$scratch/r"
          fi
          rr=$(tail -1 "$scratch/r") er=$(tail -1 "$scratch/e")
          record round=$i pairing=$pairing clients=$c pipeline=$P test=$t requests=$n redis_rps=$rr epochdb_rps=$er \
            epochdb_over_redis="$(echo "$er / $rr" | bc -l)"
        done
        r=$(median <"$scratch/r")
        e=$(median <"$scratch/e")
        printf "| %s | %s | %s | %s | %s | %.0f | %.0f | %.2f |\n" $pairing $c $P "$t" $n "$r" "$e" "$(echo "$e / $r" | bc -l)"
      done
    done
  done
  stop_pair
done
write_result "${FIGURE:-redis}" pairing,clients,pipeline,test "$(redis-server --version | awk '{print $3}')"
