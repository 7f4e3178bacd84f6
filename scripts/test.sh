#!/usr/bin/env bash
# The project's test command (README, "Quick start"; CI runs it via .ci/run).
# Needs the Rust toolchain; installs what is missing of redis-tools,
# valgrind, iproute2, openssl, pip and npm (apt), and of redis-py and
# ioredis (scripts/client-libraries.sh).
#
# On two cores it takes about as long as building the tests and running
# them: everything that needs no cargo lock and no other result runs
# beside something else. The installs run during the build; the lints,
# the documentation, the doctests and the lab's tests run at a lower
# priority beside the tests, on the CPU they leave idle while they wait on
# processes, disks and timers; what is left of them runs beside the
# client libraries and memcheck.
# Each part's output is printed when it ends; the script fails if any part
# failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests make their data directories under the temporary directory
# (some hundreds of MB a run) and not all of them remove theirs: give this
# run a temporary directory of its own, removed when it ends.
# (Readable by all: a test reads a database there as user nobody.)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/epochdb-tests.XXXXXX")
chmod 755 "$scratch"
# Background jobs end with the script.
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"
# Each section's header says when it began, in seconds from the start.
start=$SECONDS
section() { echo "== $* [$((SECONDS - start)) s]"; }
# `finish NAME PID`: waits for a background part, prints its log, and
# stops the script if it failed.
finish() {
  local ok=0
  wait "$2" || ok=$?
  section "$1 (ran beside the others)"
  cat "$scratch/$1.log"
  [ "$ok" = 0 ] || { echo "$1 failed" >&2; exit 1; }
}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export CARGO_TARGET_DIR=$target

section "format"
cargo fmt --all -- --check

section "install what is missing (beside the build)"
# The server's tests run redis-cli and redis-benchmark; the protected-mode
# test connects from a network namespace (ip); the TLS tests make their
# certificates with openssl; memcheck is valgrind's; the client libraries
# are installed with pip and npm.
missing=()
for tool in redis-benchmark:redis-tools ip:iproute2 openssl:openssl valgrind:valgrind node:nodejs npm:npm; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool##*:}")
done
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
echo "missing: ${missing[*]:-nothing}"
(
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  ./scripts/client-libraries.sh --install
) >"$scratch/install.log" 2>&1 &
install_pid=$!

section "tests: build"
cargo test --workspace --all-features --no-run
# What it built, as cargo reports it: `built [CRATE [TARGET]]` lists test
# binaries (all, a crate's, or one target's) as "CRATE EXECUTABLE" lines.
cargo test --workspace --all-features --no-run --message-format=json 2>/dev/null >"$scratch/built.json"
built() {
  python3 - "$scratch/built.json" "$@" <<'PY'
import json, os, sys
crate, target = (sys.argv[2:] + [None, None])[:2]
for line in open(sys.argv[1]):
    m = json.loads(line)
    name = os.path.basename(os.path.dirname(m.get("manifest_path", "")))
    if m.get("executable") and m["profile"]["test"] and crate in (None, name) and target in (None, m["target"]["name"]):
        print(name, m["executable"])
PY
}
finish install "$install_pid"

# Beside the tests, at a lower priority. The lab's tests (the NVM testbed:
# crash simulation and SIGKILL of every engine) need no cargo; the lints,
# the documentation and the doctests take cargo's lock, which the tests,
# run straight from their binaries, leave free.
built epochdb-nvm >"$scratch/lab.list"
[ -s "$scratch/lab.list" ] || { echo "no test binaries of the lab (epochdb-nvm)" >&2; exit 1; }
(
  cd crates/epochdb-nvm
  while read -r _ t; do
    echo "-- $(basename "$t")"
    nice -n 10 "$t" </dev/null
  done <"$scratch/lab.list"
) >"$scratch/lab.log" 2>&1 &
lab_pid=$!
(
  set -e
  echo "-- clippy"
  # --all-features: the lab code too (the NVM testbed's `bench nvm`).
  nice -n 10 cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings
  echo "-- rustdoc"
  # With the environment cargo clippy gives clippy-driver, rustdoc finds
  # our crates' metadata where clippy left it instead of checking them
  # again; any other environment only costs that check.
  driver=$(dirname "$(rustup which cargo 2>/dev/null || command -v cargo)")/clippy-driver
  clippy_env=()
  [ ! -x "$driver" ] || clippy_env=(RUSTC_WORKSPACE_WRAPPER="$driver" CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")
  env "${clippy_env[@]}" RUSTDOCFLAGS="-D warnings" nice -n 10 cargo doc --no-deps --workspace --all-features --quiet
  echo "-- doctests"
  nice -n 10 cargo test --workspace --all-features --doc --quiet
  # docs/figures.md is generated from results/: it must match them.
  echo "-- docs/figures.md matches results/"
  python3 scripts/figures/render.py --check
) >"$scratch/lints.log" 2>&1 &
lints_pid=$!

section "tests: run"
# Every test binary but the lab's, each from its crate's directory, as
# cargo test would run it.
built | grep -v '^epochdb-nvm ' >"$scratch/tests.list"
while read -r crate t; do
  echo "-- $crate: $(basename "$t")"
  (cd "crates/$crate" && EPOCHDB_REQUIRE_REDIS_TOOLS=1 "$t" -q </dev/null)
done <"$scratch/tests.list"

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

# Miri needs a nightly component that cannot be installed here, so the
# unsafe-heavy single-threaded tests (records, the index against its model)
# and the API tests (which exercise GC, snapshot versions and record growth)
# run under valgrind's memcheck instead: any invalid access or definite leak
# fails the run. It runs beside the client libraries (and what is left of
# the lab's tests and the lints), which mostly wait on their servers.
one() {
  local path
  path=$(built epochdb "$1" | cut -d' ' -f2)
  [ -n "$path" ] || { echo "no test binary $1 among those cargo built" >&2; exit 1; }
  echo "$path"
}
# EPOCHDB_ARENA=off: records and nodes from the global allocator, whose
# blocks memcheck tracks (a use after free inside the engine's arena
# would be invisible to it). The arena has its own unit tests.
memcheck() {
  EPOCHDB_ARENA=off valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no --errors-for-leak-kinds=definite "$@" --test-threads 1
}
lib=$(one epochdb) api=$(one api) conflicts=$(one conflicts)
(
  memcheck "$lib" record:: catalog:: txn:: index::tests::matches_a_btreemap_model index::tests::versions_change
  memcheck "$api"
  memcheck "$conflicts"
  echo "memcheck: no invalid access, no definite leak"
) >"$scratch/memcheck.log" 2>&1 &
memcheck_pid=$!

section "client libraries"
# redis-py and ioredis against the server (the Rust crate is in the tests).
./scripts/client-libraries.sh "$target/debug/epochdb"

finish lab "$lab_pid"
finish lints "$lints_pid"
finish memcheck "$memcheck_pid"
section "done: every part passed"
