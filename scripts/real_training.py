#!/usr/bin/env python3
"""Real PyTorch jobs under `gpuplan serve`, re-allocated round after round (`make test-torch`).

    real_training.py --python VENV/bin/python --out DIR [--planner gpuplan-mip] [--devices fake:1x4]

Starts the daemon on fake GPUs (each rank trains on the CPU, gloo), submits
the jobs of JOBS over time (examples/pytorch_ddp.py from this checkout, run
by --python), polls the job table until every job has ended, and checks:

- every job completed exactly once (one done record, in its last attempt; no
  launch after it) without a crash;
- jobs were re-allocated: some job's world size changed, and every attempt
  after the first resumed from the checkpoint its predecessor wrote on
  SIGTERM (same step and progress), with its own world size, and went on at
  the next step; no work was lost beyond that checkpoint;
- the loss continued across restarts and fell over the run;
- the daemon's model of each job came from its measurements: its gradient
  statistics are ones the job reported, and its throughput fit is not the
  linear default.

It writes DIR/allocations.jsonl (every change of a job's phase, GPUs, batch),
DIR/losses.jsonl (every evaluation, by job and attempt), DIR/jobs.json (the
daemon's `gpuplan jobs --format json` at the end), DIR/serve.log,
DIR/summary.json and, when matplotlib is importable, DIR/loss.png. Exit 0
when every check passed, 1 otherwise (each failure printed).
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_harness  # noqa: E402

REPO = serve_harness.REPO
sys.path.insert(0, str(REPO / "python"))
from gpuplan.job import read_log  # noqa: E402

#: (submit after s, name, examples, min/max GPUs, batch, max batch, lr rule)
JOBS = [
    (0, "mlp-a", 200_000, 1, 4, 64, 512, "sqrt"),
    (20, "mlp-b", 60_000, 1, 2, 64, 256, "sqrt"),
    (40, "mlp-c", 90_000, 1, 4, 128, 512, "adascale"),
    (60, "mlp-d", 30_000, 1, 1, 32, 32, "none"),
]
#: Seconds per example added to each rank's compute: the fake GPUs' own time, so that
#: four of them on two CPU cores scale as accelerators would (docs/real-training.md).
SLEEP_PER_EXAMPLE_S = 0.0005
#: Job-file keys of the checkpoint protocol; a daemon without them refuses them.
NEW_SPEC_KEYS = ("total_progress", "min_runtime_s")


def spec(python, name, examples, min_gpus, max_gpus, batch, max_batch, rule, min_runtime_s):
    # exec: SIGTERM must reach python, not an intermediate `sh -c` (docs/job-protocol.md, "The job library").
    cmd = (f"PYTHONPATH={REPO / 'python'} exec {python} {REPO / 'examples/pytorch_ddp.py'} --examples {examples} "
           f"--lr-rule {rule} --hidden 512 --sleep-per-example-s {SLEEP_PER_EXAMPLE_S} --checkpoint-interval-s 20 "
           f"--report-every 5 --eval-every 10")
    return {"name": name, "command": cmd, "min_gpus": min_gpus, "max_gpus": max_gpus, "batch_size": batch,
            "max_batch_size": max_batch, "restart_cost_s": 6.0, "grace_s": 30.0,
            "total_progress": float(examples), "min_runtime_s": float(min_runtime_s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="interpreter with torch (the jobs run it)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--bin", default=None, help="gpuplan binary (default $GPUPLAN_BIN, else $CARGO_TARGET_DIR/release/gpuplan)")
    ap.add_argument("--planner", default="gpuplan-mip")
    ap.add_argument("--devices", default="fake:1x4")
    ap.add_argument("--interval", default="3s")
    ap.add_argument("--min-runtime-s", type=float, default=15.0, help="each job's min_runtime_s")
    ap.add_argument("--timeout-s", type=float, default=900)
    a = ap.parse_args()
    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    for f in ("allocations.jsonl", "losses.jsonl", "serve.log"):
        (out / f).unlink(missing_ok=True)
    state = out / "state"
    if state.exists():
        import shutil

        shutil.rmtree(state)
    srv = serve_harness.Serve(state, ["--devices", a.devices, "--planner", a.planner, "--interval", a.interval,
                                      "--grace", "30s", "--backoff", "2s", "--time-limit", "5s"],
                              binary=a.bin, log=out / "serve.log")
    t0 = time.time()
    lacks = set()
    ids = {}
    seen = {}
    alloc = open(out / "allocations.jsonl", "w")

    def track(jobs):
        for j in jobs.values():
            key = (j["phase"], tuple(j["gpus"]), j["batch_size"], j["local_bsz"], j["accum_steps"], j["attempts"])
            if seen.get(j["id"]) != key:
                seen[j["id"]] = key
                alloc.write(json.dumps({"t": round(time.time() - t0, 2), "job": j["name"], "phase": j["phase"],
                                        "gpus": len(j["gpus"]), "batch": j["batch_size"], "local_bsz": j["local_bsz"],
                                        "accum_steps": j["accum_steps"], "attempts": j["attempts"],
                                        "restarts": j["restarts"]}) + "\n")
                alloc.flush()

    try:
        pending = list(JOBS)
        while True:
            now = time.time() - t0
            while pending and pending[0][0] <= now:
                _, name, *rest = pending.pop(0)
                s = spec(a.python, name, *rest, a.min_runtime_s)
                try:
                    ids[name] = srv.submit(s)
                except ValueError as e:
                    missing = {k for k in NEW_SPEC_KEYS if k in str(e)}
                    if not missing:
                        raise
                    lacks |= missing
                    ids[name] = srv.submit({k: v for k, v in s.items() if k not in NEW_SPEC_KEYS})
                print(f"{now:6.1f} s: submitted {name} as job {ids[name]}", flush=True)
            jobs = srv.jobs()
            track(jobs)
            if not pending and all(j["phase"] in serve_harness.FINAL for j in jobs.values()):
                break
            if now > a.timeout_s:
                raise SystemExit(f"timed out after {a.timeout_s} s: {json.dumps(jobs)[:2000]}")
            time.sleep(0.5)
        time.sleep(2 * float(a.interval.rstrip("s")))  # rounds after the end: nothing may relaunch
        track(srv.jobs())
        final = {j["id"]: j for j in json.loads(srv.cli("jobs", "--format", "json"))}
        recs = {name: {n: read_log(srv.rank_log(i, n).splitlines()) for n in srv.attempts(i)} for name, i in ids.items()}
    finally:
        srv.close()
        alloc.close()
    (out / "jobs.json").write_text(json.dumps(final, indent=1))
    with open(out / "losses.jsonl", "w") as f:
        for name, attempts in recs.items():
            for n, rs in attempts.items():
                for r in rs:
                    if "eval_loss" in r:
                        f.write(json.dumps({"job": name, "attempt": n, "step": r.get("step"), "progress": r.get("progress"),
                                            "world": r.get("world"), "batch": r.get("batch"), "eval_loss": r["eval_loss"],
                                            "eval_acc": r.get("eval_acc"), "loss": r.get("loss")}) + "\n")
    failures, summary = check(final, ids, recs, lacks)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    plot(out, recs, summary)
    print(json.dumps(summary, indent=1))
    for f_ in failures:
        print("FAILED:", f_)
    print(f"real_training: {'ok' if not failures else f'{len(failures)} failures'} in {time.time() - t0:.0f} s; output in {out}")
    return 1 if failures else 0


def check(final, ids, recs, lacks):
    """Every check of the module docstring; (failures, a summary per job)."""
    failures, summary = [], {"jobs": {}, "daemon_lacks": sorted(lacks)}
    if lacks:
        failures.append(f"the daemon refused the job-file keys {sorted(lacks)} (the checkpoint protocol's daemon side)")
    changed_world = 0
    for name, i in ids.items():
        v, attempts = final[i], recs[name]
        worlds = [next((r["world"] for r in rs if r["event"] == "start"), None) for _, rs in sorted(attempts.items())]
        batches = [next((r["batch"] for r in rs if r["event"] == "start"), None) for _, rs in sorted(attempts.items())]
        s = summary["jobs"][name] = {"id": i, "phase": v["phase"], "attempts": v["attempts"], "restarts": v["restarts"],
                                     "crashes": v["crashes"], "worlds": worlds, "batches": batches}
        if v["phase"] != "completed" or v["crashes"]:
            failures.append(f"{name}: {v['phase']} with {v['crashes']} crashes")
        if v["attempts"] != len(attempts):
            failures.append(f"{name}: the daemon counts {v['attempts']} attempts, {len(attempts)} ran")
        done = [n for n, rs in attempts.items() for r in rs if r["event"] == "done"]
        if done != [max(attempts)]:
            failures.append(f"{name}: done in attempts {done}, not once in the last")
        if len(set(worlds)) > 1:
            changed_world += 1
        last_ck = None  # the last checkpoint any earlier attempt wrote
        for n, rs in sorted(attempts.items()):
            if last_ck is not None:
                prev = attempts[n - 1] if n - 1 in attempts else []
                cks = [r for r in prev if r["event"] == "checkpoint"]
                resume = next((r for r in rs if r["event"] == "resume"), None)
                first = next((r for r in rs if r["event"] == "step"), None)
                if not cks or cks[-1]["reason"] != "stop" or prev[-1]["event"] != "stop":
                    failures.append(f"{name}: attempt {n - 1} did not end with a checkpoint on stop: {prev[-2:]}")
                if resume is None or (resume["step"], resume["progress"]) != (last_ck["step"], last_ck["progress"]):
                    failures.append(f"{name}: attempt {n} resumed at {resume} instead of {last_ck}")
                elif first is not None and first["step"] != resume["step"] + 1:
                    failures.append(f"{name}: attempt {n} went on at {first['step']}, not {resume['step'] + 1}")
            last_ck = next((r for r in reversed(rs) if r["event"] == "checkpoint"), last_ck)
        evals = [(n, r["eval_loss"]) for n, rs in sorted(attempts.items()) for r in rs if "eval_loss" in r]
        s["eval_loss_first_last"] = [evals[0][1], evals[-1][1]] if evals else None
        if not evals or evals[-1][1] > 0.8 * evals[0][1]:
            failures.append(f"{name}: the loss did not fall: {evals[:1]} -> {evals[-1:]}")
        for (n0, before), (n1, after) in zip(evals, evals[1:]):
            if n1 != n0 and after > evals[0][1] - 0.5 * (evals[0][1] - before):
                failures.append(f"{name}: the loss jumped back at attempt {n1}: {before} -> {after}")
        reported = [r for rs in attempts.values() for r in rs if r["event"] == "report" and "grad_var" in r]
        model = v.get("model")
        s["model"] = model
        if not model:
            failures.append(f"{name}: the daemon has no model of it")
        else:
            g = model["grad"]
            if not any(math.isclose(g["sqr"], r["grad_sqr"], rel_tol=1e-9) and math.isclose(g["var"], r["grad_var"], rel_tol=1e-9)
                       for r in reported):
                failures.append(f"{name}: the daemon's gradient statistics {g} are none the job reported")
        for k in ("checkpoint_progress", "checkpoint_unix_s", "total_progress", "model", "observations", "grad"):
            s[k] = v.get(k)
            if k not in v:
                failures.append(f"{name}: `gpuplan jobs --format json` has no {k} (the checkpoint protocol's daemon side)")
        s["efficiency"] = v.get("efficiency")
        logged = [r for rs in attempts.values() for r in rs if r["event"] == "checkpoint"]
        if "checkpoint_progress" in v and (not logged or v["checkpoint_progress"] != logged[-1]["progress"]):
            failures.append(f"{name}: checkpoint_progress {v['checkpoint_progress']} is not the last checkpoint the job wrote")
        if v.get("total_progress") is not None and v["total_progress"] != next(j[2] for j in JOBS if j[1] == name):
            failures.append(f"{name}: total_progress {v['total_progress']} is not its job file's")
    if changed_world == 0:
        failures.append("no job changed world size")
    most = max(summary["jobs"].values(), key=lambda s: len(set(s["worlds"])))
    summary["most_reallocated"] = most
    return failures, summary


def plot(out, recs, summary):
    """Evaluation loss against progress per job, a marker at each restart; skipped without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("real_training: no matplotlib, no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, attempts in recs.items():
        pts = [(r["progress"], r["eval_loss"], n, r.get("world")) for n, rs in sorted(attempts.items())
               for r in rs if "eval_loss" in r and "progress" in r]
        if not pts:
            continue
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, lw=1.2)
        for n, rs in sorted(attempts.items()):
            res = next((r for r in rs if r["event"] == "resume"), None)
            if res:
                ax.axvline(res["progress"], color=line.get_color(), ls=":", lw=0.8)
                ax.annotate(f"{res['from_world']}→{res['world']}", (res["progress"], ax.get_ylim()[1]),
                            color=line.get_color(), fontsize=7, rotation=90, va="top")
    ax.set_xlabel("progress (examples)")
    ax.set_ylabel("held-out loss")
    ax.set_title("PyTorch jobs under gpuplan serve (fake:1x4, CPU ranks); dotted: restart, old→new world size")
    ax.title.set_fontsize(9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=110)


if __name__ == "__main__":
    sys.exit(main())
