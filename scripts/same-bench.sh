#!/usr/bin/env bash
# `gpuplan bench` objectives with two binaries, compared planner by planner
# and size by size (times are left out: they vary from run to run).
#   scripts/same-bench.sh OLD_BIN NEW_BIN [BENCH ARGS...]
set -euo pipefail
old=$1 new=$2
shift 2
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--sizes small)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$old" bench "${args[@]}" --format json > "$work/old.json" 2>/dev/null
"$new" bench "${args[@]}" --format json > "$work/new.json" 2>/dev/null
python3 - "$work/old.json" "$work/new.json" <<'PY'
import json, sys
def key(d):
    rows = d if isinstance(d, list) else d.get("rows", d)
    out = {}
    for r in rows:
        k = (r.get("planner"), r.get("gpus"), r.get("jobs"))
        out[k] = {x: v for x, v in r.items() if "ms" not in x and "time" not in x and x not in ("wall_s",)}
    return out
a, b = key(json.load(open(sys.argv[1]))), key(json.load(open(sys.argv[2])))
bad = 0
for k in sorted(set(a) | set(b), key=str):
    same = a.get(k) == b.get(k)
    bad += not same
    print(("same     " if same else "DIFFERENT"), *k, "" if same else f"{a.get(k)} vs {b.get(k)}")
sys.exit(1 if bad else 0)
PY
