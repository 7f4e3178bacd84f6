# Sourced by a figure harness: `record FIELD=VALUE ...` notes one measured
# run; `write_result FIGURE KEYS [NOTE]` writes results/FIGURE-DATE.json
# (scripts/figures/result.py: every run, the medians of the runs grouped
# by the comma-separated KEYS, the commit, date, machine and this
# command), which scripts/figures/render.py puts in docs/figures.md.
[ -n "${result_runs:-}" ] && return 0 # sourced once
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
# record_report REPORT FIELD=VALUE ...: a run from an `epochdb bench` JSON
# report: its throughput, durable latency p50 and p99 (ms) and, with
# backups, their lags and CPU, beside the fields given.
record_report() {
  local report=$1
  shift
  record "$@" $(python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
out = {"txn_per_s": r.get("throughput")}
lat = (r.get("durability") or {}).get("durable_latency_us") or {}
if lat:
    out["durable_p50_ms"] = lat["p50"] / 1000
    out["durable_p99_ms"] = lat["p99"] / 1000
x = r.get("replication")
if x:
    out["persist_lag_p99_epochs"] = x["persist_lag_epochs"]["p99"]
    out["replay_lag_p99_epochs"] = x["replay_lag_epochs"]["p99"]
    out["backup_cores"] = x["backup_cores"]
print(" ".join(f"{k}={v}" for k, v in out.items() if v is not None))
PY
)
}
write_result() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/result.py" "$1" "$result_runs" "$result_command" "$2" "${3:-}"
  rm -f "$result_runs"
}
