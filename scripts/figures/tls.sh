#!/usr/bin/env bash
# What TLS costs, epochdb serve beside redis-server, interleaved in one run:
# each server listens on a plain port and a TLS port (certificates made by
# openssl; no client certificates asked for, durability off and no AOF on
# both sides), and redis-benchmark (-t set,get -d 100 -r 1000000 -c 50
# --threads 2) runs at -P 1 and -P 16 against each port, REPS rounds, the
# systems' order alternating by round. Writes results/tls-DATE.json (the
# commit, date, machine, command, every run and the medians) and prints the
# medians as a table.
# Usage: scripts/figures/tls.sh [REPS] (default 3). Needs redis-server with
# TLS and redis-benchmark (apt install redis-server redis-tools), openssl.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
scratch=$(mktemp -d)
stop() {
  redis-cli -p 7421 shutdown nosave >/dev/null 2>&1 || true
  redis-cli -p 7423 shutdown >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$scratch"
}
trap stop EXIT

scripts/tls-certs.sh "$scratch"
tls=(--tls-cert-file "$scratch/server.crt" --tls-key-file "$scratch/server.key" --tls-ca-cert-file "$scratch/ca.crt"
  --tls-auth-clients no)

mkdir -p "$scratch/redis"
redis-server --port 7421 --tls-port 7422 "${tls[@]}" --save '' --appendonly no --daemonize yes \
  --dir "$scratch/redis" >/dev/null
$bin serve --port 7423 --tls-port 7424 "${tls[@]}" --durability off --threads 2 >/dev/null 2>&1 &
for p in 7421 7423; do
  until redis-cli -p $p ping >/dev/null 2>&1; do sleep 0.1; done
done

# Requests per run: about 3 s at the rates seen here, so redis-benchmark's
# 250 ms tick with --threads costs little; a multiple of 50 x 16.
declare -A requests=([1]=400000 [16]=3200000)
bench() { # PORT PIPELINE TEST [--tls ...] -> requests/s
  local port=$1 P=$2 t=$3
  shift 3
  redis-benchmark -p "$port" "$@" -t "$t" -d 100 -r 1000000 -c 50 -P "$P" -n "${requests[$P]}" --threads 2 --csv \
    2>/dev/null | awk -F'","' 'NR>1 {gsub(/"/,"",$2); print $2; exit}'
}
runs=$scratch/runs
for round in $(seq "$reps"); do
  order="redis epochdb"
  [ $((round % 2)) = 0 ] && order="epochdb redis"
  for P in 1 16; do
    for t in set get; do
      for system in $order; do
        base=7421
        [ $system = epochdb ] && base=7423
        echo "$round $system plain $P $t $(bench $base "$P" $t)" >>"$runs"
        echo "$round $system tls $P $t $(bench $((base + 1)) "$P" $t --tls --cacert "$scratch/ca.crt")" >>"$runs"
      done
    done
  done
done

mkdir -p results
out=results/tls-$(date -u +%Y-%m-%d).json
python3 - "$runs" "$out" "$reps" "$(git describe --always --dirty)" "$(redis-server --version | awk '{print $3}')" <<'EOF'
import json, platform, statistics, sys, datetime
runs_file, out, reps, commit, redis = sys.argv[1:]
runs = [l.split() for l in open(runs_file)]
runs = [dict(round=int(r), system=s, port=m, pipeline=int(p), test=t, rps=float(v)) for r, s, m, p, t, v in runs]
median = {}
for r in runs:
    median.setdefault((r["system"], r["port"], r["pipeline"], r["test"]), []).append(r["rps"])
median = {k: statistics.median(v) for k, v in median.items()}
rows = []
for p in (1, 16):
    for t in ("set", "get"):
        m = lambda s, port: median[(s, port, p, t)]
        rows.append(dict(pipeline=p, test=t, redis_plain=m("redis", "plain"), redis_tls=m("redis", "tls"),
                         epochdb_plain=m("epochdb", "plain"), epochdb_tls=m("epochdb", "tls"),
                         epochdb_over_redis_tls=m("epochdb", "tls") / m("redis", "tls"),
                         epochdb_tls_cost=1 - m("epochdb", "tls") / m("epochdb", "plain"),
                         redis_tls_cost=1 - m("redis", "tls") / m("redis", "plain")))
result = dict(figure="tls", commit=commit, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              machine=dict(cpus=__import__("os").cpu_count(), kernel=platform.release()), redis=redis,
              command=f"scripts/figures/tls.sh {reps}", runs=runs, medians=rows)
json.dump(result, open(out, "w"), indent=1)
print(f"# TLS cost, redis-benchmark -c 50 -d 100 --threads 2, epochdb {commit} beside redis {redis}, median of {reps} interleaved rounds ({out})")
print("| -P | test | redis rps | redis TLS rps | epochdb rps | epochdb TLS rps | TLS cost redis | TLS cost epochdb | epochdb TLS / redis TLS |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {r['pipeline']} | {r['test']} | {r['redis_plain']:.0f} | {r['redis_tls']:.0f} | {r['epochdb_plain']:.0f} | {r['epochdb_tls']:.0f} | {r['redis_tls_cost']:.0%} | {r['epochdb_tls_cost']:.0%} | {r['epochdb_over_redis_tls']:.2f}x |")
EOF
