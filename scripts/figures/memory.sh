#!/usr/bin/env bash
# Memory per element of a large list, set, sorted set and hash, epochdb
# serve beside redis-server, one type after the other on both in one run:
# redis-benchmark fills one key of each type (its `lpush`, `sadd`, `zadd`
# and `hset` tests, N requests, members drawn from N random ones, small
# values), and used_memory's growth (INFO memory) is divided by the
# elements the key then holds (LLEN, SCARD, ZCARD, HLEN). Both keep
# everything in memory (epochdb --durability off, redis without AOF).
# Writes results/memory-DATE.json.
# Usage: scripts/figures/memory.sh [N] (default 1000000). Needs
# redis-server and redis-benchmark (apt install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-1000000}
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
scratch=$(mktemp -d)
trap 'redis-cli -p 7421 shutdown nosave >/dev/null 2>&1 || true; redis-cli -p 7422 shutdown >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
source scripts/figures/results.sh

used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

redis-server --port 7421 --save '' --appendonly no --daemonize yes --dir "$scratch" >/dev/null
$bin serve --port 7422 --durability off --threads 2 >/dev/null 2>&1 &
for p in 7421 7422; do
  until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done
done
printf "| type | elements | redis bytes/element | epochdb bytes/element | epochdb / redis |\n| --- | --- | --- | --- | --- |\n"
for t in lpush:mylist:llen sadd:myset:scard zadd:myzset:zcard hset:myhash:hlen; do
  IFS=: read -r test key count <<<"$t"
  line=()
  for p in 7421 7422; do
    before=$(used $p)
    redis-benchmark -p $p -t "$test" -n "$n" -r "$n" -d 8 -c 50 -P 16 -q >/dev/null
    after=$(used $p)
    elements=$(redis-cli -p $p "$count" "$key")
    line+=("$elements" "$(echo "($after - $before) / $elements" | bc -l)")
    redis-cli -p $p del "$key" >/dev/null
    sleep 1 # epochdb frees a deleted row once no reader can see it
  done
  record type="${key#my}" redis_elements="${line[0]}" redis_bytes_per_element="${line[1]}" \
    epochdb_elements="${line[2]}" epochdb_bytes_per_element="${line[3]}" \
    epochdb_over_redis="$(echo "${line[3]} / ${line[1]}" | bc -l)"
  printf "| %s | %s | %.1f | %.1f | %.2f |\n" "${key#my}" "${line[2]}" "${line[1]}" "${line[3]}" \
    "$(echo "${line[3]} / ${line[1]}" | bc -l)"
done
write_result memory type "$(redis-server --version | awk '{print $3}'), $n requests per type"
