#!/usr/bin/env python3
"""Per-GPU slowdown tables from PAL's variability measurements.

Reads the PAL artifact's aggregated data (../shared/anchors/pal/aggregated_data,
see its SOURCE.md) and writes traces/pal/variability/{longhorn,frontera,ls6}.csv
with one row per (class, GPU): class,node,gpu,slowdown.

slowdown = the GPU's median `perf` over its runs / the median `perf` of the whole
file (PAL's normalisation, blox/cluster_state.py::_get_machine_slowdowns);
> 1 is slower. Classes follow PAL's profile map (blox/profiles.json):
A ResNet, B BERT, C BERT (PAL reuses B's profile), D PageRank. Lonestar6 has
ResNet only, so every class there uses it.

It also writes traces/pal/variability/runs/{longhorn,frontera,ls6}.csv: one row
per measured run, slowdown = that run's `perf` / the file's median. PAL's
simulator draws each GPU's slowdown independently from these runs
(`--variability-draw pal`); the per-GPU medians keep a node's GPUs together.

Usage: scripts/pal-variability.py [ANCHORS_DIR] [OUT_DIR]
"""
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/anchors/pal/aggregated_data")
out = Path(sys.argv[2] if len(sys.argv) > 2 else "traces/pal/variability")

SETS = {
    "longhorn": {"A": "sim/resnet-longhorn-agg.csv", "B": "sim/bert-longhorn-agg.csv",
                 "C": "sim/bert-longhorn-agg.csv", "D": "sim/pagerank-longhorn-agg.csv"},
    "frontera": {"A": "frontera/frontera-resnet-agg.csv", "B": "frontera/frontera-bert-agg.csv",
                 "C": "frontera/frontera-bert-agg.csv", "D": "frontera/frontera-pagerank-agg.csv"},
    "ls6": {c: "ls6/resnet-ls6-agg.csv" for c in "ABCD"},
}


def read_runs(path):
    """(node, device, perf) per run, and the file's median perf."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            try:
                perf = float(r["perf"])
                node = f'{r["cabinet"]}-{int(float(r["node"]))}'
                dev = int(float(r["device"]))
            except (KeyError, ValueError):
                continue
            rows.append((node, dev, perf))
    return rows, statistics.median(p for _, _, p in rows)


def slowdowns(path):
    rows, med = read_runs(path)
    runs = defaultdict(list)
    for node, dev, perf in rows:
        runs[(node, dev)].append(perf)
    return {k: statistics.median(v) / med for k, v in runs.items()}


out.mkdir(parents=True, exist_ok=True)
for name, classes in SETS.items():
    rows = []
    for cls, rel in classes.items():
        for (node, dev), s in sorted(slowdowns(src / rel).items()):
            rows.append((cls, node, dev, f"{s:.6f}"))
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["class", "node", "gpu", "slowdown"])
        w.writerows(rows)
    print(f"{name}: {len(rows)} rows")

(out / "runs").mkdir(parents=True, exist_ok=True)
for name, classes in SETS.items():
    rows = []
    for cls, rel in classes.items():
        runs, med = read_runs(src / rel)
        for node, dev, perf in sorted(runs):
            rows.append((cls, node, dev, f"{perf / med:.6f}"))
    with open(out / "runs" / f"{name}.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["class", "node", "gpu", "slowdown"])
        w.writerows(rows)
