#!/usr/bin/env python3
"""Issue 31's acceptance check: every round file under every live planner.

    scripts/check-bounds.py GPUPLAN_BIN DIR [--time-limit S] [--planners a,b]

For each file in DIR (*.json, except *-plan.json) it runs
`gpuplan plan --input FILE --planner P --format json --time-limit S` for
every planner of `gpuplan policies` that runs live (srtf and optimus read
the simulator's oracle) and reports, per file:
  - a run that exits 2 saying "(a bug)", or exits other than 0/2;
  - a plan whose `bound` is below its own objective (beyond 1e-6 relative),
    or below another planner's objective on the same file beyond the
    bound's own gap;
  - `status: optimal` with no bound;
  - a run longer than max(1.1 x S, S + 1) seconds.
Exit 0 when nothing is reported, 1 otherwise. Prints one line per finding
and a summary.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

ORACLE = {"srtf", "optimus"}


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    binary, folder = args[0], Path(args[1])
    limit = 5.0
    only = None
    rest = args[2:]
    while rest:
        flag = rest.pop(0)
        if flag == "--time-limit":
            limit = float(rest.pop(0))
        elif flag == "--planners":
            only = rest.pop(0).split(",")
        else:
            print(f"unknown flag {flag}")
            return 2
    out = subprocess.run([binary, "policies"], capture_output=True, text=True, check=True).stdout
    planners = [l.split()[0] for l in out.splitlines() if l.strip()]
    planners = [p for p in planners if p not in ORACLE and (only is None or p in only)]
    files = sorted(f for f in folder.glob("*.json") if not f.name.endswith("-plan.json"))
    findings = []
    runs = 0
    for f in files:
        plans = {}
        for p in planners:
            t0 = time.monotonic()
            r = subprocess.run(
                [binary, "plan", "--input", str(f), "--planner", p, "--format", "json",
                 "--time-limit", str(limit)],
                capture_output=True, text=True,
            )
            wall = time.monotonic() - t0
            runs += 1
            if wall > max(1.1 * limit, limit + 1.0):
                findings.append(f"{f.name} {p}: {wall:.1f} s at --time-limit {limit}")
            if r.returncode == 2:
                if "(a bug)" in r.stderr:
                    findings.append(f"{f.name} {p}: exit 2 (a bug): {r.stderr.strip()[:200]}")
                continue
            if r.returncode != 0:
                findings.append(f"{f.name} {p}: exit {r.returncode}: {r.stderr.strip()[:200]}")
                continue
            plans[p] = json.loads(r.stdout)
        for p, v in plans.items():
            bound, obj, gap = v.get("bound"), v.get("objective"), v.get("gap") or 0.0
            if v.get("status") == "optimal" and bound is None:
                findings.append(f"{f.name} {p}: optimal without a bound")
            if bound is None or obj is None:
                continue
            tol = 1e-6 * max(1.0, abs(bound))
            if bound < obj - tol:
                findings.append(f"{f.name} {p}: bound {bound:.6g} below its own objective {obj:.6g} ({v.get('status')})")
            for q, w in plans.items():
                o = w.get("objective")
                if q == p or o is None:
                    continue
                slack = max(tol, abs(gap) * max(abs(bound), abs(o)))
                if bound < o - slack:
                    findings.append(
                        f"{f.name} {p}: bound {bound:.6g} ({v.get('status')}, gap {gap:.3g}) below {q}'s objective {o:.6g}")
    for line in findings:
        print(line)
    print(f"check-bounds: {len(files)} files x {len(planners)} planners = {runs} runs, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
