#!/usr/bin/env bash
# The project's test command (README, "Quick start"; CI runs it via .ci/run).
# Needs the Rust toolchain; installs valgrind, redis-tools, pip and npm if
# missing, and redis-py and ioredis (scripts/client-libraries.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests make their data directories under the temporary directory
# (some hundreds of MB a run) and not all of them remove theirs: give this
# run a temporary directory of its own, removed when it ends.
# (Readable by all: a test reads a database there as user nobody.)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/epochdb-tests.XXXXXX")
chmod 755 "$scratch"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"

echo "== format and lints"
cargo fmt --all -- --check
# --all-features: the lab code too (the NVM testbed's `bench nvm`).
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

echo "== tests"
# The server's tests run redis-cli and redis-benchmark against it.
if ! command -v redis-benchmark >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq redis-tools) >/dev/null 2>&1 || true
fi
command -v redis-benchmark >/dev/null || { echo "redis-tools could not be installed" >&2; exit 1; }
# The protected-mode test connects from a network namespace (ip netns);
# the TLS tests make their certificates with openssl.
for tool in ip:iproute2 openssl:openssl; do
  if ! command -v "${tool%%:*}" >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq "${tool##*:}") >/dev/null 2>&1 || true
  fi
done
EPOCHDB_REQUIRE_REDIS_TOOLS=1 cargo test --workspace --all-features

echo "== examples"
# Every example runs to completion; the durable counter twice on one
# directory, so the second run counts on what the first made durable.
counter=$(mktemp -d)
for f in crates/epochdb/examples/*.rs; do
  name=$(basename "$f" .rs)
  echo "-- $name"
  cargo run -q -p epochdb --example "$name" -- "$counter/db"
done
cargo run -q -p epochdb --example durable_counter -- "$counter/db" | grep -q "^run 2 " ||
  { echo "durable_counter did not count on its first run" >&2; exit 1; }
rm -rf "$counter"

echo "== client libraries"
# redis-py and ioredis against the server (the Rust crate is in the tests).
if ! command -v node >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq python3-pip nodejs npm) >/dev/null 2>&1 || true
fi
cargo build -q -p epochdb-cli
./scripts/client-libraries.sh

echo "== documentation"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet

# Miri needs a nightly component that cannot be installed here, so the
# unsafe-heavy single-threaded tests (records, the index against its model)
# and the API tests (which exercise GC, snapshot versions and record growth)
# run under valgrind's memcheck instead: any invalid access or definite leak
# fails the run.
echo "== memcheck"
if ! command -v valgrind >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null 2>&1 || true
fi
if command -v valgrind >/dev/null; then
  # The test binaries, as cargo reports them (wherever CARGO_TARGET_DIR
  # puts them).
  built=$(cargo test -p epochdb --lib --test api --test conflicts --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
  exe() {
    local path
    path=$(grep -E "/$1-[0-9a-f]+$" <<<"$built" | head -1)
    [ -n "$path" ] || { echo "no test binary $1 in cargo's output" >&2; exit 1; }
    echo "$path"
  }
  # EPOCHDB_ARENA=off: records and nodes from the global allocator, whose
  # blocks memcheck tracks (a use after free inside the engine's arena
  # would be invisible to it). The arena has its own unit tests.
  memcheck() {
    EPOCHDB_ARENA=off valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no --errors-for-leak-kinds=definite "$@" --test-threads 1
  }
  memcheck "$(exe epochdb)" record:: catalog:: txn:: index::tests::matches_a_btreemap_model index::tests::versions_change
  for t in api conflicts; do
    memcheck "$(exe $t)"
  done
else
  echo "valgrind unavailable: memcheck skipped" >&2
  exit 1
fi
