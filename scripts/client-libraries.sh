#!/usr/bin/env bash
# Client libraries other than the Rust `redis` crate (which the server's
# tests use) against `epochdb serve`: installs redis-py and ioredis, at the
# versions pinned below, into a scratch folder (pip and npm from their
# registries), starts a durable server with a password on a fresh data
# directory, and runs scripts/clients/*: redis-py over RESP2 and RESP3,
# ioredis over RESP2. Each checks what an application leans on: AUTH and
# ACL users, strings, expiry, hashes, SCAN iterators, pipelines, MULTI,
# WATCH retried under 4 contending clients, numbered databases, errors as
# the library's exceptions. Exits non-zero if a library cannot be
# installed or a check fails.
# Usage: scripts/client-libraries.sh [EPOCHDB]   (default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
redis_py=8.1.0 ioredis=5.11.1
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin=${1:-$target/debug/epochdb}
port=7431 password=client-libraries
scratch=$(mktemp -d)
trap 'redis-cli -p $port -a $password --no-auth-warning shutdown nosave >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$scratch/py" "redis==$redis_py"
npm install -q --no-audit --no-fund --prefix "$scratch/js" "ioredis@$ioredis" >/dev/null

"$bin" serve --port $port --durability log --data-dir "$scratch/data" --requirepass $password \
  2>"$scratch/server.log" &
for _ in $(seq 100); do
  redis-cli -p $port -a $password --no-auth-warning ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p $port -a $password --no-auth-warning ping >/dev/null 2>&1 ||
  { cat "$scratch/server.log" >&2; echo "the server did not start" >&2; exit 1; }

for protocol in 2 3; do
  PYTHONPATH="$scratch/py" python3 scripts/clients/redis_py_check.py $port $password $protocol
done
NODE_PATH="$scratch/js/node_modules" node scripts/clients/ioredis_check.js $port $password
