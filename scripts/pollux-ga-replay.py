#!/usr/bin/env python3
"""The Pollux artifact's own GA on gpuplan's rounds: the same input to both
searches, so their fitness can be compared round by round (issue 36).

    gpuplan simulate --workload W --policy pollux-ga \\
        --dump-rounds ROUNDS --round-log OURS.jsonl
    scripts/pollux-ga-replay.py ARTIFACT_DIR ROUNDS OURS.jsonl --out OUT.jsonl \\
        [--every N] [--from-s T] [--to-s T] [--no-avoid]

For each dumped round (every Nth, from T to T), the artifact's PolluxPolicy
(one instance, so it warm-starts from its own last population as it does in
its simulator) plans the round as gpuplan saw it: each job's fitted goodput
model, allocation, age, restarts and attained service. Both plans, the
artifact's and the one gpuplan's GA chose (from OURS.jsonl), are then valued
by the artifact's own Problem (its fitness, Pollux's power mean). One JSON
line per round: time, jobs, both fitnesses, GPUs held and jobs running.

ARTIFACT_DIR as for scripts/pollux-artifact-rounds.py (run with its
virtualenv's python). The artifact's code is imported, not copied.
"""
import argparse
import glob
import json
import os
import sys
from collections import OrderedDict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact_dir")
    ap.add_argument("rounds_dir")
    ap.add_argument("ours_log")
    ap.add_argument("--out", required=True)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--from-s", type=float, default=0.0)
    ap.add_argument("--to-s", type=float, default=float("inf"))
    ap.add_argument("--no-avoid", action="store_true")
    args = ap.parse_args()
    sim_dir = os.path.join(os.path.abspath(args.artifact_dir), "simulator")
    if not os.path.isfile(os.path.join(sim_dir, "pollux.py")):
        sys.exit(f"pollux-ga-replay: no simulator/pollux.py in {args.artifact_dir}")
    rounds = sorted(glob.glob(os.path.join(os.path.abspath(args.rounds_dir), "round-*.json")))
    ours = {}
    with open(args.ours_log) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError as e:
                sys.exit(f"{args.ours_log}:{n}: {e}")
            ours[round(r["time"])] = r
    out_path = os.path.abspath(args.out)
    sys.path.insert(0, sim_dir)
    os.chdir(sim_dir)
    if args.no_avoid:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "artifact_rounds", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "pollux-artifact-rounds.py"))
        helper = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helper)
        helper._load_without_avoidance(sim_dir)
    import pollux
    from goodput import GoodputFunction, PerfParams, GradParams
    from speedup import SpeedupFunction
    from utils import JobInfo, NodeInfo

    policy = pollux.PolluxPolicy()
    picked = [r for i, r in enumerate(rounds) if i % args.every == 0]
    with open(out_path, "w") as out:
        for path in picked:
            with open(path) as f:
                rnd = json.load(f)
            now = rnd["now_s"]
            if not args.from_s <= now <= args.to_s or not rnd["jobs"]:
                continue
            nodes = {i: NodeInfo({"nvidia.com/gpu": n["gpus"]}, preemptible=False)
                     for i, n in enumerate(rnd["cluster"]["nodes"])}
            jobs, base = {}, {}
            factor = rnd["params"].get("exploration_factor", 2)
            for j in rnd["jobs"]:
                st = j["state"]
                m = j.get("model")
                if m:
                    perf = PerfParams(*[m["perf"][k] for k in (
                        "alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")])
                    grad = GradParams(m["grad"]["sqr"], m["grad"]["var"])
                    lim = m["limits"]
                    fn = SpeedupFunction(GoodputFunction(perf, grad, lim["init_batch"]),
                                         lim["max_batch"], (lim["min_local"], lim["max_local"]),
                                         accumulation=m.get("accumulation", True))
                else:
                    fn = lambda n, r: r  # noqa: E731 (as the artifact's simulator does)
                cap = min(max(factor * st.get("max_gpus_used", 0), 1), j.get("max_gpus") or 64)
                info = JobInfo(resources={"nvidia.com/gpu": 1}, speedup_fn=fn,
                               creation_timestamp=j["submit_s"],
                               attained_service=st.get("attained_gpu_s", 0.0),
                               min_replicas=0, max_replicas=max(cap, 1), preemptible=True)
                info.num_restarts = st.get("restarts", 0)
                info.age = st.get("age_s", 0.0)
                jobs[j["name"]] = info
                alloc = [g[0] if isinstance(g, list) else g for g in st.get("allocation", [])]
                if alloc:
                    base[j["name"]] = sorted(alloc)
            theirs, _ = policy.optimize(dict(jobs), dict(nodes), dict(base), nodes[0])
            mine = {x["name"]: x.get("allocation", []) for x in ours.get(round(now), {}).get("jobs", [])
                    if not x.get("done")}
            rec = {"time": now, "jobs": len(jobs)}
            for label, alloc in (("artifact", theirs), ("gpuplan", mine)):
                rec[label] = value(pollux, policy, jobs, nodes, base, alloc)
            out.write(json.dumps(rec) + "\n")
            out.flush()


def value(pollux, policy, jobs, nodes, base, alloc):
    """The artifact's fitness of `alloc`, and its GPUs and running jobs."""
    jobs_od = OrderedDict(sorted(jobs.items()))
    nodes_od = OrderedDict(sorted(nodes.items()))
    alloc = {k: v for k, v in alloc.items() if k in jobs_od}
    base_state = policy._allocations_to_state(base, jobs_od, nodes_od)
    problem = pollux.Problem(list(jobs_od.values()), list(nodes_od.values()), base_state)
    state = policy._allocations_to_state(alloc, jobs_od, nodes_od)
    out = {}
    problem._evaluate(state.reshape(1, -1), out)
    return {
        "fitness": float(-out["F"][0, 0]),
        "utility": float(-out["F"][0, 1]),
        "gpus": int(state.sum()),
        "running": int((state.sum(axis=1) > 0).sum()),
        "changed": int((state != base_state).any(axis=1).sum()),
    }


if __name__ == "__main__":
    main()
