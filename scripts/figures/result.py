#!/usr/bin/env python3
"""Writes a figure harness's JSON result: results/FIGURE-DATE.json.

Usage: [TITLE=...] result.py FIGURE RUNS.jsonl COMMAND KEY[,KEY...] [NOTE]

RUNS.jsonl holds one JSON object per measured run (whatever fields the
harness measured). Runs are grouped by the KEY fields; each group's
median of every other numeric field (except "round") becomes a row of
"medians". The result also records the commit, the date, the machine and
the command, so scripts/figures/render.py can print where every figure
came from.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys


def main():
    figure, runs_path, command, keys = sys.argv[1:5]
    note = sys.argv[5] if len(sys.argv) > 5 else None
    keys = [k for k in keys.split(",") if k]
    runs = [json.loads(line) for line in open(runs_path) if line.strip()]
    groups = {}
    for r in runs:
        groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    medians = []
    for group, rs in groups.items():
        row = dict(zip(keys, group))
        fields = [f for f in rs[0] if f not in keys and f != "round" and isinstance(rs[0][f], (int, float))]
        for f in fields:
            row[f] = statistics.median(r[f] for r in rs if f in r)
        row["runs"] = len(rs)
        medians.append(row)
    # The repository's commit and results/, wherever the harness ran from.
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    git = {"capture_output": True, "text": True, "cwd": top}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], **git).stdout.strip()
    # Changes to the results themselves do not make the code dirty.
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results", ":!docs/figures.md"],
        **git,
    ).stdout.strip()
    if changed:
        commit += "-dirty"
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    result = {
        "figure": figure,
        "title": os.environ.get("TITLE"),
        "commit": commit,
        "date": now.isoformat(),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
        "command": command,
        "note": note,
        "medians": medians,
        "runs": runs,
    }
    os.makedirs(os.path.join(top, "results"), exist_ok=True)
    out = f"results/{figure}-{now.date().isoformat()}.json"
    with open(os.path.join(top, out), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
