#!/usr/bin/env python3
"""Pool `simulate --estimates` records (estimates.csv under OUT/SET/POLICY-WORK/workload-N/)
into the calibration table of docs/estimates.md. Usage: table.py [OUT] (default /tmp/gpuplan-estimates)."""
import csv, glob, math, os, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpuplan-estimates"

def pct(xs, q):
    xs = sorted(x for x in xs if math.isfinite(x))
    if not xs:
        return float("nan")
    pos = q / 100 * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

def num(s):
    return float(s) if s not in ("", None) else None

rows = []
for d in sorted(glob.glob(os.path.join(out, "*", "*"))):
    recs = []
    wls = sorted(glob.glob(os.path.join(d, "workload-*", "estimates.csv")))
    for f in wls:
        recs += list(csv.DictReader(open(f)))
    if not recs:
        continue
    s, pw = d.split(os.sep)[-2:]
    policy, work = pw.rsplit("-", 1)
    start_err, finish_err, waits, rel, inr, cut = [], [], [], [], 0, 0
    waited_rel, waited_err = [], []
    for r in recs:
        a_s, a_f, at = float(r["actual_start_s"]), float(r["actual_finish_s"]), float(r["at_s"])
        waits.append(a_s - at)
        if num(r["start_s"]) is not None:
            start_err.append(abs(num(r["start_s"]) - a_s))
            if a_s - at > 0:
                waited_err.append(abs(num(r["start_s"]) - a_s))
                waited_rel.append(abs(num(r["start_s"]) - a_s) / (a_s - at))
        if num(r["finish_s"]) is not None:
            finish_err.append(abs(num(r["finish_s"]) - a_f))
            rel.append(abs(num(r["finish_s"]) - a_f) / max(a_f - at, 1.0))
        lo, hi = num(r["finish_lo_s"]), num(r["finish_hi_s"])
        if lo is not None and a_f >= lo - 1e-6 and (hi is None or a_f <= hi + 1e-6):
            inr += 1
        cut += r["cut_short"] == "true"
    wait_mean = statistics.mean(waits)
    rows.append((s, policy, work, len(wls), len(recs), cut, pct(start_err, 50), pct(start_err, 90),
                 wait_mean, pct(start_err, 50) / wait_mean if wait_mean > 0 else float("nan"),
                 statistics.mean(start_err) / wait_mean if wait_mean > 0 and start_err else float("nan"),
                 len(waited_rel), pct(waited_err, 50), pct(waited_rel, 50),
                 pct(finish_err, 50), pct(finish_err, 90), pct(rel, 50), inr / len(recs)))

print("| workloads | policy | work | n (runs) | cut short | start err p50 / p90 (s) | mean wait (s) | p50 err ÷ mean wait | mean err ÷ mean wait | jobs that waited: n, err p50 (s), p50 of err ÷ own wait | finish err p50 / p90 (s) | finish err ÷ time to finish, p50 | finishes in range |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (s, p, w, nw, n, cut, s50, s90, wm, r1, r2, nwt, we, wr, f50, f90, rel, inr) in rows:
    print(f"| {s} | {p} | {w} | {n} ({nw}) | {cut} | {s50:.0f} / {s90:.0f} | {wm:.0f} | {r1:.3f} | {r2:.3f} | {nwt}, {we:.0f}, {wr:.2f} | {f50:.0f} / {f90:.0f} | {rel:.3f} | {100*inr:.0f}% |")
