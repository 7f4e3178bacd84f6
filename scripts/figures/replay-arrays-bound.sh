#!/usr/bin/env bash
# Do Query Fresh's replay arrays (§3.4.1) pay off here?
# A replay array lets replay skip instantiating versions: it stores
# where the newest version lives and readers materialize it. This
# script measures the most that could save on a backup, against the
# direct installs we keep, side by side in one run. It builds, in a
# scratch worktree of HEAD, two variants of the backup's `install`
# (replication/standby.rs) that no one should run for real:
#   bound   a replay array's best case: the key is looked up (our log
#           names keys, not record ids, so no replay skips the index),
#           new keys are inserted with no value, an update stores only
#           its TID, and each entry pushes (record, TID) to a vector in
#           place of the array's store; no value is copied, no old
#           version kept, nothing is ever materialized for a reader
#   nokeep  direct installs without the copies of old versions kept for
#           snapshot readers (what the version copies cost)
# Then, in turn, REPS rounds: a 1-thread durable TPC-C primary (value
# log) on CPU 0 with one `epochdb replica` under `sync` on CPU 1 (one
# replay thread), for each of HEAD, bound and nokeep. Prints medians of
# primary txn/s, backup cores, and the backup's CPU per MB of log.
# Usage: scripts/figures/replay-arrays-bound.sh [REPS] [SECONDS] (default 3 10).
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
secs=${2:-10}
source scripts/figures/lib.sh
scratch=$(mktemp -d)
trap 'git worktree remove --force "$scratch/wt" 2>/dev/null || true; rm -rf "$scratch"' EXIT

# variant NAME PYTHON-EDITS: builds HEAD with the edits as $scratch/NAME.
variant() {
  git worktree add -q -f --detach "$scratch/wt" HEAD
  (cd "$scratch/wt" && python3 -c "$2")
  CARGO_TARGET_DIR="$scratch/target" cargo build --release -q -p epochdb-cli --manifest-path "$scratch/wt/Cargo.toml"
  cp "$scratch/target/release/epochdb" "$scratch/$1"
  git worktree remove --force "$scratch/wt"
}
edit='
import sys
p = "crates/epochdb/src/replication/standby.rs"
s = open(p).read()
def sub(old, new):
    global s
    assert old in s, old
    s = s.replace(old, new, 1)
'
variant bound "$edit"'
sub("""            let fresh = Record::alloc(key, value, 0,""",
    """            s.array.push((key.as_ptr() as usize, tid.raw()));
            let _ = value;
            let fresh = Record::alloc(key, &[], 0,""")
sub("""        let keep_old = old_tid""",
    """        s.array.push((rec.as_ptr() as usize, tid.raw()));
        let _ = (value, view);
        r.tid.unlock_to(new_word);
        if true {
            return Ok(());
        }
        let keep_old = old_tid""")
sub("""    merge: columns::MergeScratch,
}""", """    merge: columns::MergeScratch,
    array: Vec<(usize, u64)>,
}""")
sub("""    let Part { w, s } = p;""", """    let Part { w, s } = p;
    s.array.clear();""")
open(p, "w").write(s)'
variant nokeep "$edit"'
sub("let keep_old = old_tid", "let keep_old = false && old_tid")
open(p, "w").write(s)'
cp "$bin" "$scratch/direct"

builds=(direct bound nokeep)
for rep in $(seq "$reps"); do
  for b in "${builds[@]}"; do
    taskset -c 0 "$scratch/$b" bench tpcc --threads 1 --duration "$secs" --warmup 1 --durability log \
      --data-dir "$scratch/db" --overwrite --replicas 1 --safety sync --replica-cpu 1 --replay-threads 1 \
      --json "$out/ra-$b-$rep.json" >/dev/null 2>&1
    record_report "$out/ra-$b-$rep.json" round=$rep build=$b
    rm -rf "$scratch"/db*
  done
done

py() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); p=r['replication']; print($1)" "$2"; }
col() { for r in $(seq "$reps"); do py "$2" "$out/ra-$1-$r.json"; done | median; }
echo "| backup install | primary txn/s | backup cores | backup CPU per MB of log (ms) | vs direct |"
echo "| --- | --- | --- | --- | --- |"
base=$(col direct "p['backup_ms_per_log_mb']")
for b in "${builds[@]}"; do
  ms=$(col "$b" "p['backup_ms_per_log_mb']")
  printf '| %s | %.0f | %.3f | %.2f | %.2f |\n' "$b" "$(col "$b" "r['throughput']")" "$(col "$b" "p['backup_cores']")" \
    "$ms" "$(python3 -c "print($ms / $base)")"
done
write_result replay-arrays-bound build
