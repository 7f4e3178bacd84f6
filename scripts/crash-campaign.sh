#!/usr/bin/env bash
# The crash campaign: kill -9 a durable process at random
# moments, KILLS times in each of the four durability modes (log,
# log+checkpoint, delta, delta+checkpoint), and check after every recovery:
#   - every acknowledged transaction is there, nothing above pepoch, the
#     bank's total holds;
#   - a snapshot taken right after recovery sees the whole recovered state;
#   - the data directory still opens after being moved (every third kill:
#     renamed, or copied with cp -a and the original removed).
# A fresh database starts every 25 kills. This is crates/epochdb/tests/
# crash.rs with more iterations; `cargo test` (and so CI) runs 6 per mode.
#
# Usage: scripts/crash-campaign.sh [KILLS_PER_MODE]   (default 250: 1,000 kills)
set -euo pipefail
cd "$(dirname "$0")/.."
per_mode=${1:-250}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
EPOCHDB_CRASH_ITERATIONS=$per_mode cargo test -q -p epochdb --test crash -- --test-threads 1 --nocapture kill_9 2>&1 |
  tee "$log" | grep -E "crash campaign|test result|panicked" || true
status=${PIPESTATUS[0]}
awk -v secs=$(($(date +%s) - start)) '
  /^crash campaign.*relocations/ { moves += $(NF-3) + $(NF-1); next }
  /^crash campaign/ { kills += $(NF-6); acks += $(NF-4); modes++ }
  END { printf "campaign: %d modes, %d kills, %d acknowledgements checked, %d relocations, %d s\n", modes, kills, acks, moves, secs }
' "$log"
if [ "$status" -ne 0 ]; then
  echo "campaign FAILED (exit $status); the failing run is in the output above" >&2
  exit "$status"
fi
