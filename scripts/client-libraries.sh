#!/usr/bin/env bash
# Client libraries other than the Rust `redis` crate (which the server's
# tests use) against `epochdb serve`: installs redis-py and ioredis, at the
# versions pinned below, under the target directory unless they are there
# already (pip and npm from their registries), starts a durable server with
# a password on a fresh data directory (log+checkpoint, a `--safety sync`
# replication primary with a TLS port) and a replica of it, replicating
# over TLS (certificates made by openssl), and runs scripts/clients/*:
# redis-py over RESP2 and RESP3 (and against the replica: WAIT, reads,
# READONLY, ROLE) and over TLS, ioredis over RESP2. Each checks what an
# application leans on: AUTH and ACL users, strings, expiry, hashes, SCAN
# iterators, pipelines, MULTI, WATCH retried under 4 contending clients,
# numbered databases, BGSAVE and LASTSAVE, errors as the library's
# exceptions. Exits non-zero if a library cannot be installed or a check
# fails.
# Usage: scripts/client-libraries.sh [EPOCHDB]   (default: the debug build)
#        scripts/client-libraries.sh --install    (install them, run nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
redis_py=8.1.0 ioredis=5.11.1
target=${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')}
bin=${1:-$target/debug/epochdb}
# Installed once per version, under the target directory; a later run
# reuses them.
libs=$target/client-libraries
py=$libs/redis-py-$redis_py js=$libs/ioredis-$ioredis
if [ ! -f "$py/.installed" ]; then
  echo "installing redis-py $redis_py into $py"
  rm -rf "$py"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$py" "redis==$redis_py"
  touch "$py/.installed"
fi
if [ ! -f "$js/.installed" ]; then
  echo "installing ioredis $ioredis into $js"
  rm -rf "$js"
  npm install -q --no-audit --no-fund --prefix "$js" "ioredis@$ioredis" >/dev/null
  touch "$js/.installed"
fi
[ "$bin" != --install ] || exit 0

port=7431 replica=7432 repl=7433 tls_port=7434 password=client-libraries
scratch=$(mktemp -d)
stop() {
  for p in $replica $port; do
    redis-cli -p $p -a $password --no-auth-warning shutdown nosave >/dev/null 2>&1 || true
  done
  wait
  rm -rf "$scratch"
}
trap stop EXIT

# A CA and a certificate it signed for localhost, for the TLS port and
# for replication.
tls=$scratch/tls
scripts/tls-certs.sh "$tls"
tls_args=(--tls-cert-file "$tls/server.crt" --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.crt"
  --tls-replication yes)

# Waits until the server on port $1 answers, or fails with its log ($2).
up() {
  for _ in $(seq 100); do
    redis-cli -p "$1" -a $password --no-auth-warning ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  cat "$2" >&2
  echo "the server on port $1 did not start" >&2
  exit 1
}
"$bin" serve --port $port --durability log+checkpoint --data-dir "$scratch/data" --requirepass $password \
  --replicate-listen 127.0.0.1:$repl --safety sync --tls-port $tls_port "${tls_args[@]}" 2>"$scratch/server.log" &
up $port "$scratch/server.log"
"$bin" serve --port $replica --durability log --data-dir "$scratch/replica" --requirepass $password \
  --replicaof 127.0.0.1:$repl "${tls_args[@]}" 2>"$scratch/replica.log" &
up $replica "$scratch/replica.log"

for protocol in 2 3; do
  PYTHONPATH="$py" python3 scripts/clients/redis_py_check.py $port $password $protocol $replica
done
PYTHONPATH="$py" python3 scripts/clients/redis_py_tls_check.py $tls_port $password "$tls/ca.crt" \
  "$tls/server.crt" "$tls/server.key"
NODE_PATH="$js/node_modules" node scripts/clients/ioredis_check.js $port $password
