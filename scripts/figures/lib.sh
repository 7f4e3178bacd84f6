# Shared by the figure scripts (sourced, not run): builds the CLI, and
# defines $bin, $out, field and recover_medians (and median, from
# round-order.sh).
cargo build --release -q -p epochdb-cli
bin=target/release/epochdb
out=target/figures
mkdir -p "$out"
# field FILE KEY: the first value of "KEY" in a JSON report.
field() { grep -m1 "\"$2\"" "$1" | sed 's/.*: //; s/,$//; s/"//g'; }
source "$(dirname "${BASH_SOURCE[0]}")/round-order.sh" # median
source "$(dirname "${BASH_SOURCE[0]}")/results.sh"     # record, record_report, write_result

# recover_medians ORIG DIR TAG: recovers a fresh copy of ORIG in DIR with
# 1 and 2 threads, 3 times each, interleaved, each copy synced and read
# once so recovery reads from the page cache (as SiloR §6 measures; log
# and checkpoint files are written with O_DIRECT and not cached
# otherwise); prints each run and the medians.
recover_medians() {
  local orig=$1 dir=$2 tag=$3
  $bin inspect --data-dir "$orig" | head -5
  for run in 1 2 3; do
    for t in 1 2; do
      rm -rf "$dir"
      cp -r "$orig" "$dir"
      sync
      find "$dir" -type f -exec cat {} + > /dev/null
      $bin recover --data-dir "$dir" --threads $t --quiet --json "$out/$tag-recover-$t-$run.json" | head -1
      record round=$run directory="$tag" threads=$t recovery_s="$(field "$out/$tag-recover-$t-$run.json" seconds)"
    done
  done
  for t in 1 2; do
    s=$(for r in 1 2 3; do field "$out/$tag-recover-$t-$r.json" seconds; done | median)
    echo "$tag recovery with $t threads: median $s s"
  done
}
