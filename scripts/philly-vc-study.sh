#!/usr/bin/env bash
# Issue 35's Philly virtual-cluster study (docs/tenants.md, "The Philly
# study"): a 14-day window of traces/pollux/philly.csv, every SCALE-th job
# (by submission) on a cluster of 2048/SCALE GPUs, so the load stays the
# full trace's on cluster-2048; jobs as Pollux applications
# (--duration-jobs pollux); each virtual cluster a queue guaranteed
# floor(GPUs x its share of the window's GPU-time).
#
#   philly-vc-study.sh GPUPLAN OUT [START_DAY [SCALE [DAYS [ARMS...]]]]
#
# ARMS (default all, each skipped if OUT/ARM.json exists, so a stopped
# study resumes arm by arm):
#   no-queues      gpuplan-mip, one pool (today)
#   strict         gpuplan-mip, guarantees as hard partitions (borrow_limit 0, lend false)
#   fair-share     the fair-share baseline under the queues
#   gpuplan-mip    gpuplan-mip under the queues (borrowing and reclaim)
set -euo pipefail
bin="${1:?usage: philly-vc-study.sh GPUPLAN OUT [START_DAY [SCALE [DAYS [ARMS...]]]]}"
out="${2:?usage: philly-vc-study.sh GPUPLAN OUT [START_DAY [SCALE [DAYS [ARMS...]]]]}"
start_day="${3:-21}"
scale="${4:-8}"
days="${5:-14}"
shift $(( $# < 5 ? $# : 5 ))
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=(no-queues strict fair-share gpuplan-mip)
root="$(cd "$(dirname "$0")/.." && pwd)"
gpus=$(( 2048 / scale ))
nodes=$(( gpus / 8 ))
mkdir -p "$out"

# The window, the queues and the strict partition, written once.
if [ ! -s "$out/window.csv" ]; then
  python3 - "$root/traces/pollux/philly.csv" "$out" "$start_day" "$scale" "$days" "$gpus" <<'PY'
import csv, collections, datetime, math, sys
src, out, start_day, scale, days, gpus = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
fmt = "%Y-%m-%d %H:%M:%S"
rows = list(csv.DictReader(open(src)))
t = [datetime.datetime.strptime(r["timestamp"], fmt) for r in rows]
t0 = min(t) + datetime.timedelta(days=start_day)
t1 = t0 + datetime.timedelta(days=days)
picked = sorted((ti, i) for i, ti in enumerate(t) if t0 <= ti < t1 and int(rows[i]["num_gpus"]) <= gpus)
sel = [rows[i] for k, (_, i) in enumerate(picked) if k % scale == 0]
with open(f"{out}/window.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["timestamp", "duration", "num_gpus", "gpu_time", "cluster"])
    w.writeheader()
    for r in sel:
        w.writerow({k: r[k] for k in w.fieldnames})
share, largest = collections.Counter(), collections.Counter()
for r in sel:
    share[r["cluster"]] += float(r["gpu_time"])
    largest[r["cluster"]] = max(largest[r["cluster"]], int(r["num_gpus"]))
total = sum(share.values())
# Each VC first gets its largest job (else, partitioned, that job never
# runs), then the rest of the GPUs by GPU-time share, rounded down.
base = sum(largest.values())
if base > gpus:
    sys.exit(f"the VCs' largest jobs need {base} GPUs together, more than {gpus}: use a smaller SCALE")
guarantee = {vc: largest[vc] + math.floor((gpus - base) * g / total) for vc, g in share.items()}
def queues(strict):
    s = (f"# Philly virtual clusters as queues: days {start_day}..{start_day + days} of philly.csv, every {scale}th job,\n"
         f"# {gpus} GPUs; each guaranteed its largest job's GPUs plus floor(the {gpus - base} GPUs left x its share\n"
         f"# of the window's GPU-time)" + (", as a hard partition (no borrowing, no lending)" if strict else "") + ".\n")
    for vc, g in share.most_common():
        s += (f"\n# {100 * g / total:.1f}% of the GPU-time, largest job {largest[vc]} GPUs\n"
              f"[[queue]]\nname = \"{vc}\"\nguarantee = {guarantee[vc]}\n")
        if strict:
            s += "borrow_limit = 0\nlend = false\n"
    return s
open(f"{out}/queues.toml", "w").write(queues(False))
open(f"{out}/queues-strict.toml", "w").write(queues(True))
print(f"window: {len(sel)} jobs in {len(share)} VCs, {total / 3600:.0f} GPU-h, on {gpus} GPUs", file=sys.stderr)
PY
fi

common=(simulate --workload "$out/window.csv" --duration-jobs pollux --cluster "${nodes}x8" --format json)
for arm in "${arms[@]}"; do
  [ -s "$out/$arm.json" ] && { echo "$arm: done before ($out/$arm.json)"; continue; }
  case "$arm" in
    no-queues) args=(--policy gpuplan-mip) ;;
    strict) args=(--policy gpuplan-mip --queues "$out/queues-strict.toml") ;;
    fair-share) args=(--policy fair-share --queues "$out/queues.toml") ;;
    gpuplan-mip) args=(--policy gpuplan-mip --queues "$out/queues.toml") ;;
    *) echo "philly-vc-study.sh: unknown arm $arm" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  # --out keeps each job's result (jobs.csv: philly-N is the Nth data row
  # of window.csv, whose cluster column is the job's VC), for per-VC
  # figures of the arm without queues too.
  if "$bin" "${common[@]}" "${args[@]}" --out "$out/$arm" > "$out/$arm.json.tmp" 2> "$out/$arm.err"; then
    mv "$out/$arm.json.tmp" "$out/$arm.json"
    echo "$arm: $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"
  else
    echo "$arm: failed after $(( $(date +%s) - start )) s: $(tail -1 "$out/$arm.err")" | tee -a "$out/times.txt"
  fi
done
