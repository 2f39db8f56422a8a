#!/usr/bin/env bash
# Behaviour-preserving refactors prove it: run `gpuplan simulate` on a
# workload for every planner with two binaries and compare the results key
# by key, timings excepted (summary JSON, every job's row in jobs.csv, every
# round's row in rounds.csv).
#
#   scripts/same-results.sh OLD_BIN NEW_BIN [WORKLOAD [CLUSTER [POLICY...]]]
#
# SIM_FLAGS, split on spaces, goes to every simulate as more flags, e.g.
#   SIM_FLAGS="--variability longhorn --seed 2" scripts/same-results.sh ...
#
# Exit 0 when every planner gives the same results, 1 otherwise.
set -euo pipefail
old=$1 new=$2
workload=${3:-traces/pollux/workloads/workload-6.csv}
cluster=${4:-16x4}
shift $(( $# < 4 ? $# : 4 ))
policies=("$@")
read -r -a extra <<< "${SIM_FLAGS:-}"
if [ ${#policies[@]} -eq 0 ]; then
  mapfile -t policies < <("$new" policies | awk '{print $1}')
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for p in "${policies[@]}"; do
  for side in old new; do
    bin=${!side}
    mkdir -p "$work/$side/$p"
    "$bin" simulate --workload "$workload" --cluster "$cluster" --policy "$p" --format json \
      "${extra[@]}" --out "$work/$side/$p" > "$work/$side/$p/summary.json"
  done
  if python3 - "$work/old/$p" "$work/new/$p" <<'PY'
import csv, json, sys
a, b = sys.argv[1], sys.argv[2]
TIMING = {"planner_ms", "wall_s", "solve_ms"}
def summary(d):
    return {k: v for k, v in json.load(open(f"{d}/summary.json")).items() if k not in TIMING}
def rows(d, name):
    with open(f"{d}/{name}") as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]
diffs = []
sa, sb = summary(a), summary(b)
for k in sorted(set(sa) | set(sb)):
    if sa.get(k) != sb.get(k):
        diffs.append(f"summary.{k}: {sa.get(k)} vs {sb.get(k)}")
for name in ("jobs.csv", "rounds.csv"):
    ra, rb = rows(a, name), rows(b, name)
    if len(ra) != len(rb):
        diffs.append(f"{name}: {len(ra)} rows vs {len(rb)}")
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x != y:
            keys = [k for k in x if x.get(k) != y.get(k)]
            diffs.append(f"{name} row {i + 2}: " + ", ".join(f"{k} {x.get(k)} vs {y.get(k)}" for k in keys))
for d in diffs[:10]:
    print("   ", d)
sys.exit(1 if diffs else 0)
PY
  then
    echo "same      $p"
  else
    echo "DIFFERENT $p"
    status=1
  fi
done
exit $status
