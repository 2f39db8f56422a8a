#!/usr/bin/env python3
"""Side by side, per virtual cluster, the arms of scripts/philly-vc-study.sh:

    scripts/philly-vc-table.py OUT

For each VC (in the order of OUT/queues.toml): its guarantee, jobs, and per
arm the average JCT of its jobs (from OUT/ARM/jobs.csv, philly-N being the
Nth data row of OUT/window.csv), then borrowed and shortfall GPU-hours
where the arm ran with queues; last, each arm's overall average JCT and
GPU utilisation. Markdown on stdout. Arms without results are left out.
"""
import csv
import json
import os
import re
import sys

ARMS = ["no-queues", "strict", "fair-share", "gpuplan-mip"]


def main(out):
    vc_of = {}
    with open(os.path.join(out, "window.csv")) as f:
        for n, row in enumerate(csv.DictReader(f), start=1):
            vc_of[f"philly-{n}"] = row["cluster"]
    text = open(os.path.join(out, "queues.toml")).read()
    guarantee = dict(re.findall(r'name = "([^"]+)"\nguarantee = (\d+)', text))
    arms = {}
    for arm in ARMS:
        path = os.path.join(out, f"{arm}.json")
        if os.path.exists(path):
            arms[arm] = json.load(open(path))
    jct = {}
    for arm in arms:
        path = os.path.join(out, arm, "jobs.csv")
        if not os.path.exists(path):
            # Under queues the run's JSON has each VC's average JCT too.
            if arms[arm].get("queues"):
                jct[arm] = {q["queue"]: q["avg_jct_s"] / 3600 for q in arms[arm]["queues"]}
            continue
        per = {}
        for row in csv.DictReader(open(path)):
            per.setdefault(vc_of[row["name"]], []).append(float(row["jct_s"]))
        jct[arm] = {vc: sum(v) / len(v) / 3600 for vc, v in per.items()}
    names = list(guarantee)
    jobs = {vc: sum(1 for v in vc_of.values() if v == vc) for vc in names}
    head = ["VC", "guarantee", "jobs"] + [f"{a} JCT (h)" for a in arms if a in jct]
    queued = [a for a in arms if arms[a].get("queues")]
    head += [f"{a} borrowed / short (GPU-h)" for a in queued]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for vc in names:
        cells = [vc, guarantee[vc], str(jobs[vc])]
        cells += [f"{jct[a].get(vc, float('nan')):.3f}" for a in arms if a in jct]
        for a in queued:
            q = next((q for q in arms[a]["queues"] if q["queue"] == vc), None)
            cells.append("-" if q is None else f"{q['borrowed_gpu_s'] / 3600:.1f} / {q['shortfall_gpu_s'] / 3600:.1f}")
        print("| " + " | ".join(cells) + " |")
    print()
    print("| arm | avg JCT (h) | p99 JCT (h) | GPU utilisation | restarts | planner ms (mean) |")
    print("|---|---|---|---|---|---|")
    for a, d in arms.items():
        print(f"| {a} | {d['avg_jct_s'] / 3600:.3f} | {d['p99_jct_s'] / 3600:.2f} | {d['gpu_utilization']:.3f} | "
              f"{d['restarts']} | {d['planner_ms']['mean']:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: philly-vc-table.py OUT")
    main(sys.argv[1])
