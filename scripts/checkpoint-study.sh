#!/usr/bin/env bash
# Issue 52's measurement (docs/policy.md, "Checkpoint-aware restarts"):
# gpuplan-mip on the Pollux workloads at loads 1.0 and 2.0 and the
# Philly-sampled workloads, every job checkpointing every INTERVAL seconds
# of run time, planned three ways:
#   fixed       the restart charged the fixed penalty alone (before this issue)
#   checkpoint  the penalty plus the work since the job's last checkpoint
#   ckpt+min    that, and a minimum run time of MIN seconds
# and, for reference, `none`: jobs that checkpoint when stopped (lose nothing).
#
#   scripts/checkpoint-study.sh GPUPLAN_BIN OUT [INTERVAL [MIN]]
# Writes OUT/SET/ARM/workload-N.json (each run's summary) and prints one
# table line per (set, arm): mean avg JCT, mean p99 JCT, lost GPU-hours
# summed, restarts per job.
set -euo pipefail
bin=$1 out=$2 interval=${3:-600} min=${4:-600}
mkdir -p "$out"
sets=("pollux-1.0:traces/pollux/workloads:16x4" "pollux-2.0:traces/pollux/workloads-2.0:16x4")
for f in traces/philly-sampled/*.csv; do
  [ -f "$f" ] && { sets+=("philly-sampled:traces/philly-sampled:16x4"); break; }
done
declare -A flags=(
  [none]=""
  [fixed]="--checkpoint-interval $interval --restart-charge fixed"
  [checkpoint]="--checkpoint-interval $interval --restart-charge checkpoint"
  [ckpt+min]="--checkpoint-interval $interval --restart-charge checkpoint --min-runtime $min"
)
# Workload by workload, every arm of one before the next workload, so a
# study cut short still compares the arms on the same workloads (the table
# counts them).
for s in "${sets[@]}"; do
  IFS=: read -r name dir cluster <<< "$s"
  # SETS="philly-sampled ..." runs only those (e.g. a second stream beside the first).
  [ -n "${SETS:-}" ] && [[ " $SETS " != *" $name "* ]] && continue
  for w in "$dir"/*.csv; do
    for arm in fixed checkpoint ckpt+min none; do
      mkdir -p "$out/$name/$arm"
      res="$out/$name/$arm/$(basename "$w" .csv).json"
      [ -s "$res" ] && continue
      # shellcheck disable=SC2086
      "$bin" simulate --workload "$w" --cluster "$cluster" --policy gpuplan-mip \
        ${flags[$arm]} --format json > "$res.tmp" && mv "$res.tmp" "$res"
    done
  done
done
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
print("| set | arm | avg JCT (h) | p99 JCT (h) | lost GPU-h | restarts/job |")
print("|---|---|---|---|---|---|")
arms = ["none", "fixed", "checkpoint", "ckpt+min"]
for s in sorted(p for p in out.iterdir() if p.is_dir()):
    # Only the workloads every arm has run: the arms compare like for like.
    done = [{f.name for f in (s / a).glob("*.json")} for a in arms if (s / a).is_dir()]
    common = set.intersection(*done) if done else set()
    for arm in arms:
        runs = [json.loads((s / arm / n).read_text()) for n in sorted(common)]
        if not runs:
            continue
        sm = [r.get("summary", r) for r in runs]
        avg = statistics.mean(x["avg_jct_s"] for x in sm) / 3600
        p99 = statistics.mean(x["p99_jct_s"] for x in sm) / 3600
        lost = sum(x.get("lost_gpu_h") or 0.0 for x in sm)
        rpj = sum(x["restarts"] for x in sm) / sum(x["jobs"] for x in sm)
        print(f"| {s.name} ({len(runs)} workloads) | {arm} | {avg:.3f} | {p99:.2f} | {lost:.1f} | {rpj:.2f} |")
PY
