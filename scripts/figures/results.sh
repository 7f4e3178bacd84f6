# Sourced by a figure harness: `record FIELD=VALUE ...` notes one measured
# run; `write_result FIGURE KEYS [NOTE]` writes results/FIGURE-DATE.json
# (scripts/figures/result.py: every run, the medians of the runs grouped
# by the comma-separated KEYS, the commit, date, machine and this
# command), which scripts/figures/render.py puts in docs/figures.md.
result_runs=$(mktemp)
result_command="$0${*:+ $*}"
record() {
  python3 - "$@" >>"$result_runs" <<'PY'
import json, sys
run = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    for kind in (int, float):
        try:
            v = kind(v)
            break
        except ValueError:
            pass
    run[k] = v
print(json.dumps(run))
PY
}
write_result() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/result.py" "$1" "$result_runs" "$result_command" "$2" "${3:-}"
  rm -f "$result_runs"
}
