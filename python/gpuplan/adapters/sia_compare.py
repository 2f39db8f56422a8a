"""Side by side: runs of Sia's simulator, one folder per arm.

    python -m gpuplan.adapters.sia_compare sia-own=DIR1 sia=DIR2 gpuplan-mip=DIR3

Each folder holds ``workload-N.log`` (Sia's ``Cluster.output_logs``) and
``workload-N.stdout`` (what the simulator printed), as
:mod:`gpuplan.adapters.sia_run` writes them, or as Sia's own
``multi_simulator.py --output DIR/workload-N.log`` does with its output
redirected. Per workload and arm it reads, from the log's last record:
average and p99 JCT, makespan (the last completion) and restarts (the sum
of ``num_restarts``); and from the printed ``Policy optimization took X ms``
lines, the policy's time per round (mean, p50, p99). Then, per arm against
the first: the mean over the workloads all arms finished, and the mean and
geometric mean of per-workload ratios. Markdown on stdout (``--json`` for
data). ``--rounds`` instead reads every record of each log: what the
cluster did round by round (jobs present and waiting, GPUs held, by type).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

from gpuplan.adapters.sia_run import last_jobs

_POLICY_MS = re.compile(r"Policy optimization took ([0-9.]+)ms")


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return s[k]


def read_run(log_path: str) -> Optional[Dict[str, Any]]:
    """One workload's figures from Sia's log (and its stdout beside it);
    ``None`` if the log is empty or a job never finished."""
    jobs = last_jobs(log_path)
    if not jobs or any(j["completion_time"] is None for j in jobs):
        return None
    jcts = [j["completion_time"] - j["submission_time"] for j in jobs]
    out: Dict[str, Any] = {
        "jobs": len(jobs),
        "avg_jct_h": sum(jcts) / len(jcts) / 3600.0,
        "p99_jct_h": percentile(jcts, 99) / 3600.0,
        "makespan_h": max(j["completion_time"] for j in jobs) / 3600.0,
        "restarts": sum(int(j.get("num_restarts") or 0) for j in jobs),
    }
    stdout = log_path[: -len(".log")] + ".stdout"
    if os.path.exists(stdout):
        with open(stdout, errors="replace") as f:
            ms = [float(m.group(1)) for m in _POLICY_MS.finditer(f.read())]
        if ms:
            out["policy_ms_mean"] = sum(ms) / len(ms)
            out["policy_ms_p50"] = percentile(ms, 50)
            out["policy_ms_p99"] = percentile(ms, 99)
            out["rounds"] = len(ms)
    return out


def compare(arms: Sequence[tuple]) -> Dict[str, Any]:
    """``arms``: (name, folder) pairs, the first the baseline."""
    runs: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for name, folder in arms:
        runs[name] = {}
        for path in sorted(glob.glob(os.path.join(folder, "workload-*.log"))):
            w = os.path.basename(path)[: -len(".log")]
            r = read_run(path)
            if r is not None:
                runs[name][w] = r
    names = [a for a, _ in arms]
    common = sorted(set.intersection(*(set(runs[a]) for a in names)) if names else set(),
                    key=lambda w: int(w.split("-")[-1]))
    base = names[0] if names else None
    summary: Dict[str, Any] = {}
    for a in names:
        if not common:
            break
        avg = [runs[a][w]["avg_jct_h"] for w in common]
        ratios = [runs[a][w]["avg_jct_h"] / runs[base][w]["avg_jct_h"] for w in common]
        summary[a] = {
            "mean_avg_jct_h": sum(avg) / len(avg),
            "mean_ratio": sum(ratios) / len(ratios),
            "geomean_ratio": math.exp(sum(math.log(r) for r in ratios) / len(ratios)),
        }
    return {"arms": names, "baseline": base, "workloads": common, "runs": runs, "summary": summary}


def markdown(c: Dict[str, Any]) -> str:
    lines = []
    keys = [("avg_jct_h", "avg JCT (h)", 3), ("p99_jct_h", "p99 JCT (h)", 2), ("makespan_h", "makespan (h)", 2),
            ("restarts", "restarts", 0), ("policy_ms_mean", "policy ms mean", 1), ("policy_ms_p99", "policy ms p99", 1)]
    lines.append("| workload | arm | " + " | ".join(k[1] for k in keys) + " |")
    lines.append("|---|---|" + "---|" * len(keys))
    every = sorted({w for a in c["arms"] for w in c["runs"][a]}, key=lambda w: int(w.split("-")[-1]))
    for w in every:
        for a in c["arms"]:
            r = c["runs"][a].get(w)
            if r is None:
                continue
            cells = []
            for k, _, d in keys:
                v = r.get(k)
                cells.append("–" if v is None else (f"{v:.{d}f}" if d else str(v)))
            lines.append(f"| {w} | {a} | " + " | ".join(cells) + " |")
    if c["summary"]:
        lines.append("")
        lines.append(f"Over the {len(c['workloads'])} workloads every arm finished "
                     f"({', '.join(c['workloads'])}), ratios against {c['baseline']}:")
        lines.append("")
        lines.append("| arm | mean avg JCT (h) | mean ratio | geometric mean ratio |")
        lines.append("|---|---|---|---|")
        for a, s in c["summary"].items():
            lines.append(f"| {a} | {s['mean_avg_jct_h']:.3f} | {s['mean_ratio']:.3f} | {s['geomean_ratio']:.3f} |")
    return "\n".join(lines)


def round_stats(log_path: str) -> Optional[Dict[str, Any]]:
    """What the cluster did round by round, from every record of Sia's log:
    the mean over rounds with unfinished jobs of jobs present, jobs waiting
    (no GPUs), GPUs held, and GPUs held per type. ``None`` without a log."""
    if not os.path.exists(log_path):
        return None
    n = present = waiting = held = 0
    by_type: Dict[str, int] = {}
    with open(log_path) as f:
        for line in f:
            if not line.strip():
                continue
            jobs = [j for j in json.loads(line).get("submitted_jobs", []) if j.get("completion_time") is None]
            if not jobs:
                continue
            n += 1
            present += len(jobs)
            for j in jobs:
                alloc = j.get("allocation") or [None, []]
                if not alloc[1]:
                    waiting += 1
                    continue
                held += len(alloc[1])
                by_type[alloc[0]] = by_type.get(alloc[0], 0) + len(alloc[1])
    if n == 0:
        return None
    return {
        "rounds": n,
        "jobs": present / n,
        "waiting": waiting / n,
        "gpus_held": held / n,
        "gpus_by_type": {t: g / n for t, g in sorted(by_type.items())},
    }


def rounds_markdown(arms: Sequence[tuple]) -> str:
    """Per workload and arm, :func:`round_stats` as a markdown table."""
    lines = ["| workload | arm | rounds | jobs | waiting | GPUs held | by type |", "|---|---|---|---|---|---|---|"]
    names = sorted({os.path.basename(p)[: -len(".log")] for _, d in arms for p in glob.glob(os.path.join(d, "workload-*.log"))},
                   key=lambda w: int(w.split("-")[-1]) if w.split("-")[-1].isdigit() else 0)
    for w in names:
        for name, d in arms:
            r = round_stats(os.path.join(d, f"{w}.log"))
            if r is None:
                continue
            types = ", ".join(f"{t} {g:.1f}" for t, g in r["gpus_by_type"].items())
            lines.append(f"| {w} | {name} | {r['rounds']} | {r['jobs']:.2f} | {r['waiting']:.2f} | {r['gpus_held']:.1f} | {types} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuplan.adapters.sia_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("arms", nargs="+", help="NAME=DIR, the first the baseline")
    ap.add_argument("--json", action="store_true", help="print the data as JSON")
    ap.add_argument("--rounds", action="store_true",
                    help="instead: what each arm did round by round (jobs waiting, GPUs held, by type)")
    args = ap.parse_args(argv)
    arms = []
    for a in args.arms:
        name, sep, folder = a.partition("=")
        if not sep or not os.path.isdir(folder):
            ap.error(f"{a}: expected NAME=DIR with DIR a folder")
        arms.append((name, folder))
    if args.rounds:
        print(rounds_markdown(arms))
        return 0
    c = compare(arms)
    print(json.dumps(c, indent=2) if args.json else markdown(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
