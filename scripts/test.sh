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
# Background jobs (the lab's tests, memcheck) end with the script.
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"
# Each section's header says when it began, in seconds from the start.
start=$SECONDS
section() { echo "== $* [$((SECONDS - start)) s]"; }

section "format and lints"
cargo fmt --all -- --check
# --all-features: the lab code too (the NVM testbed's `bench nvm`).
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

section "tests: build"
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
# The lab's tests (the NVM testbed: crash simulation and SIGKILL of every
# engine; about two minutes of CPU, none of it timed) run beside the
# others at a lower priority, filling the CPU the others leave idle while
# they wait on processes, disks and timers.
cargo test --workspace --all-features --no-run
# The test binaries it built, as cargo reports them (wherever
# CARGO_TARGET_DIR puts them): `tests_of CRATE [TARGET]` lists a crate's.
cargo test --workspace --all-features --no-run --message-format=json 2>/dev/null >"$scratch/built.json"
tests_of() {
  python3 - "$scratch/built.json" "$@" <<'PY'
import json, sys
crate, target = sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("executable") and f"crates/{crate}#" in m["package_id"] and target in (None, m["target"]["name"]):
        print(m["executable"])
PY
}
section "tests: run"
lab_tests=$(tests_of epochdb-nvm)
[ -n "$lab_tests" ] || { echo "no test binaries of the lab (epochdb-nvm)" >&2; exit 1; }
(
  cd crates/epochdb-nvm
  for t in $lab_tests; do
    echo "-- $t"
    nice -n 10 "$t" || exit 1
  done
) >"$scratch/lab.log" 2>&1 &
lab_pid=$!
EPOCHDB_REQUIRE_REDIS_TOOLS=1 cargo test --workspace --all-features --exclude epochdb-nvm
section "the lab's tests (run beside the ones above)"
if ! wait "$lab_pid"; then
  cat "$scratch/lab.log"
  echo "the lab's tests failed" >&2
  exit 1
fi
cat "$scratch/lab.log"

# The examples and the `epochdb` binary as the tests built them (the same
# features, so nothing is built twice).
cargo build -q --workspace --all-features --bins --examples
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

section "examples"
# Every example runs to completion; the durable counter twice on one
# directory, so the second run counts on what the first made durable.
counter=$(mktemp -d)
for f in crates/epochdb/examples/*.rs; do
  name=$(basename "$f" .rs)
  echo "-- $name"
  "$target/debug/examples/$name" "$counter/db"
done
"$target/debug/examples/durable_counter" "$counter/db" | grep -q "^run 2 " ||
  { echo "durable_counter did not count on its first run" >&2; exit 1; }
rm -rf "$counter"

section "documentation"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
# docs/figures.md is generated from results/: it must match them.
python3 scripts/figures/render.py --check

# Miri needs a nightly component that cannot be installed here, so the
# unsafe-heavy single-threaded tests (records, the index against its model)
# and the API tests (which exercise GC, snapshot versions and record growth)
# run under valgrind's memcheck instead: any invalid access or definite leak
# fails the run. It runs beside the client libraries, which mostly wait on
# their servers and the network.
section "memcheck (beside the client libraries; its output follows theirs)"
if ! command -v valgrind >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null 2>&1 || true
fi
command -v valgrind >/dev/null || { echo "valgrind could not be installed" >&2; exit 1; }
# The engine's test binaries the tests built.
exe() {
  local path
  path=$(tests_of epochdb "$1")
  [ -n "$path" ] || { echo "no test binary $1 among those cargo built" >&2; exit 1; }
  echo "$path"
}
# EPOCHDB_ARENA=off: records and nodes from the global allocator, whose
# blocks memcheck tracks (a use after free inside the engine's arena
# would be invisible to it). The arena has its own unit tests.
memcheck() {
  EPOCHDB_ARENA=off valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no --errors-for-leak-kinds=definite "$@" --test-threads 1
}
lib=$(exe epochdb) api=$(exe api) conflicts=$(exe conflicts)
(
  memcheck "$lib" record:: catalog:: txn:: index::tests::matches_a_btreemap_model index::tests::versions_change
  memcheck "$api"
  memcheck "$conflicts"
) >"$scratch/memcheck.log" 2>&1 &
memcheck_pid=$!

section "client libraries"
# redis-py and ioredis against the server (the Rust crate is in the tests).
if ! command -v node >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq python3-pip nodejs npm) >/dev/null 2>&1 || true
fi
./scripts/client-libraries.sh "$target/debug/epochdb"

section "memcheck"
if ! wait "$memcheck_pid"; then
  cat "$scratch/memcheck.log"
  echo "memcheck failed" >&2
  exit 1
fi
cat "$scratch/memcheck.log"
echo "memcheck: no invalid access, no definite leak"
section "done"
