#!/usr/bin/env bash
# Redis 7.0's own test suite as the judge of epochdb serve's behaviour:
# each unit runs alone in external-server mode, against epochdb and
# against redis-server 7.0 with the same flags, one after the other in
# this run. Prints a table (tests passed of those run, per unit, each
# system beside the other) and writes results/redis-suite-DATE.json.
#
# The suite cannot be shipped with epochdb: point REDIS_TESTS at a Redis
# 7.0 source tree (its `runtest` and `tests/`), e.g. the 7.0.15 tag's
# `git clone --depth 1 --branch 7.0.15 https://github.com/redis/redis`.
# Needs tclsh and redis-server (apt install tcl redis-server).
#
# Usage: REDIS_TESTS=DIR scripts/figures/redis-suite.sh [UNIT...]
# (default: the units below). epochdb runs with --durability off. Each
# run's output is kept in SUITE_LOGS (a directory; default: removed).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${REDIS_TESTS:?set REDIS_TESTS to a Redis 7.0 source tree (see the top of this script)}"
[ -x "$REDIS_TESTS/runtest" ] || { echo "no runtest in $REDIS_TESTS" >&2; exit 1; }
units=("$@")
[ ${#units[@]} -gt 0 ] || units=(unit/type/string unit/type/incr unit/type/hash unit/type/list unit/type/set
  unit/type/zset unit/keyspace unit/expire unit/multi unit/protocol unit/pubsub unit/scan unit/scripting
  unit/functions)
cargo build -q -p epochdb-cli
bin=$PWD/target/debug/epochdb
scratch=$(mktemp -d)
port=7461
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT
logs=${SUITE_LOGS:-$scratch}
mkdir -p "$logs"
source scripts/figures/results.sh

start() { # $1: epochdb or redis
  case $1 in
    epochdb) "$bin" serve --port $port --durability off >"$scratch/server.log" 2>&1 & ;;
    redis) redis-server --port $port --save '' --appendonly no --daemonize yes --dir "$scratch" >/dev/null ;;
  esac
  for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "$1 did not start" >&2
  exit 1
}

stop() {
  redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  while redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
}

# The suite's flags: one database, no encoding or digest checks, no tests
# that need DEBUG, replication, SAVE, maxmemory or a long time.
flags=(--host 127.0.0.1 --port $port --singledb --ignore-encoding --ignore-digest --clients 1 --timeout 120
  --tags -needs:debug --tags -needs:repl --tags -needs:save --tags -needs:config-maxmemory --tags -slow)

printf '%-20s %16s %16s\n' unit epochdb redis
for unit in "${units[@]}"; do
  line=$(printf '%-20s' "$unit")
  for system in epochdb redis; do
    start $system
    log="$logs/$system-${unit//\//-}.log"
    # The suite colours its output: plain text for the counts.
    (cd "$REDIS_TESTS" && timeout 600 ./runtest "${flags[@]}" --single "$unit") 2>&1 |
      sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
    stop
    ok=$(grep -c '^\[ok\]' "$log" || true)
    failed=$(grep -c '^\[err\]' "$log" || true)
    aborted=$(grep -c '^\[exception\]' "$log" || true)
    record system=$system unit="$unit" passed="$ok" failed="$failed" aborted="$aborted"
    line+=$(printf ' %16s' "$ok/$((ok + failed))$([ "$aborted" = 0 ] || echo '!')")
  done
  echo "$line"
done
echo "(passed/run; ! an exception aborted the unit)"
write_result redis-suite system,unit "Redis 7.0 test suite, external mode, per unit; epochdb --durability off"
