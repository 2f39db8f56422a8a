#!/usr/bin/env python3
"""Runs the Pollux artifact's own simulator and writes one JSON line per round
in gpuplan's round-log format, so `gpuplan compare-rounds` can set it beside
`gpuplan simulate --round-log` from the same start (issue 36).

    scripts/pollux-artifact-rounds.py ARTIFACT_DIR WORKLOAD --out LOG
        [--interference 0.5] [--no-avoid] [--max-rounds N]
        [--checkpoint FILE [--checkpoint-every N]]

ARTIFACT_DIR holds the artifact's simulator/ (petuum/adaptdl, branch
osdi21-artifact; see scripts/artifact-time.sh for the checkout and its
virtualenv, whose python must run this script). The artifact's code is not in
this repository: this script imports its modules from ARTIFACT_DIR and only
observes them. Two observations are added to what its own `--output` log
holds, both computed with the artifact's own functions:
- per job, `goodput`: the true progress rate (scale-invariant iterations per
  second) of the allocation the round chose, as its Job.step computes it;
- per round, `fitness`: the power mean the policy maximised, evaluated on the
  chosen allocation by the artifact's own Problem, and per job `speedup`, the
  speedup that mean was built from.
`--checkpoint FILE` saves the whole simulation (cluster, policy, rounds
written, numpy's random state) every `--checkpoint-every` rounds (default 10),
with dill since the policy keeps lambdas. Run again with the same arguments
and it resumes from the file, cutting LOG back to the rounds the checkpoint
holds: a load-2.0 run (hours on 2 cores) can be split across sessions and
writes the same rounds as one unbroken run (checked on the short workload
with --seed).
`--no-avoid` drops the interference-avoidance step of the GA's repair, as the
artifact's README tells one to by commenting out four lines (its "noavoid"
runs); the rest of the repair is unchanged.
"""
import argparse
import json
import os
import sys
from collections import OrderedDict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact_dir")
    ap.add_argument("workload")
    ap.add_argument("--out", required=True)
    ap.add_argument("--interference", type=float, default=0.0)
    ap.add_argument("--no-avoid", action="store_true")
    ap.add_argument("--max-rounds", type=int, default=0,
                    help="stop after this many rounds (0: run to the end)")
    ap.add_argument("--seed", type=int, default=None,
                    help="numpy seed (the artifact sets none)")
    ap.add_argument("--checkpoint", default=None,
                    help="pickle the run here, and resume from it if it exists")
    ap.add_argument("--checkpoint-every", type=int, default=10)
    args = ap.parse_args()
    sim_dir = os.path.join(os.path.abspath(args.artifact_dir), "simulator")
    if not os.path.isfile(os.path.join(sim_dir, "simulator.py")):
        sys.exit(f"pollux-artifact-rounds: no simulator/simulator.py in {args.artifact_dir}")
    workload_path = os.path.abspath(args.workload)
    args.out = os.path.abspath(args.out)  # paths are the caller's, not simulator/'s
    if args.checkpoint:
        args.checkpoint = os.path.abspath(args.checkpoint)
    sys.path.insert(0, sim_dir)
    os.chdir(sim_dir)  # applications.py reads traces/ relative to here
    import numpy as np
    import pandas

    if args.seed is not None:
        np.random.seed(args.seed)

    if args.no_avoid:
        _load_without_avoidance(sim_dir)
    import pollux
    import simulator

    last = {}
    orig_optimize = pollux.PolluxPolicy.optimize

    def optimize(self, jobs, nodes, base_allocations, node_template):
        allocations, desired = orig_optimize(self, jobs, nodes, base_allocations, node_template)
        jobs_od = OrderedDict(sorted(jobs.items()))
        nodes_od = OrderedDict(sorted(nodes.items()))
        base = self._allocations_to_state(base_allocations, jobs_od, nodes_od)
        problem = pollux.Problem(list(jobs_od.values()), list(nodes_od.values()), base)
        state = self._allocations_to_state(allocations, jobs_od, nodes_od)
        out = {}
        problem._evaluate(state.reshape(1, -1), out)
        speedups = problem._get_job_speedups(state[None])[0]
        last["fitness"] = float(-out["F"][0, 0])
        last["speedup"] = {k: float(s) for k, s in zip(jobs_od, speedups)}
        return allocations, desired

    pollux.PolluxPolicy.optimize = optimize
    simulator.PolluxPolicy = pollux.PolluxPolicy

    if args.checkpoint:
        try:
            import dill as pickle  # the policy keeps lambdas, which pickle refuses
        except ImportError:
            sys.exit("pollux-artifact-rounds: --checkpoint needs dill in the artifact's "
                     "virtualenv (pip install dill==0.3.8; scripts/artifact-time.sh installs it)")

    rounds = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        with open(args.checkpoint, "rb") as f:
            saved = pickle.load(f)
        cluster, rounds = saved["cluster"], saved["rounds"]
        np.random.set_state(saved["numpy_random"])
        _cut_log(args.out, rounds)
        print(f"resumed at round {rounds} (t = {cluster.current_time} s)", flush=True)
        mode = "a"
    else:
        workload = pandas.read_csv(workload_path)
        policy = pollux.PolluxPolicy()
        cluster = simulator.Cluster(workload, policy, 16, num_gpus=4,
                                    interference=args.interference)
        mode = "w"
    with open(args.out, mode) as f:
        while not cluster.all_complete():
            last.clear()
            cluster.step(60)
            rounds += 1
            f.write(json.dumps(record(cluster, last)) + "\n")
            if args.checkpoint and rounds % args.checkpoint_every == 0:
                f.flush()
                _save(args.checkpoint, cluster, rounds, np.random.get_state())
            if args.max_rounds and rounds >= args.max_rounds:
                break
    if args.checkpoint:
        _save(args.checkpoint, cluster, rounds, np.random.get_state())
    jcts = cluster.get_jcts()
    if jcts:
        print("Average JCT:", sum(jcts.values()) / len(jcts))


def _save(path, cluster, rounds, numpy_random):
    """Writes the checkpoint beside PATH and renames it over, so a run ended
    mid-write leaves the previous checkpoint whole."""
    import dill
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        dill.dump({"cluster": cluster, "rounds": rounds,
                     "numpy_random": numpy_random}, f)
    os.replace(tmp, path)


def _cut_log(path, rounds):
    """Keeps the first ROUNDS lines of the log: those the checkpoint holds."""
    with open(path) as f:
        lines = f.readlines()[:rounds]
    if len(lines) < rounds:
        sys.exit(f"pollux-artifact-rounds: {path} holds {len(lines)} rounds, "
                 f"the checkpoint {rounds}")
    with open(path, "w") as f:
        f.writelines(lines)


def _load_without_avoidance(sim_dir):
    """Loads the artifact's pollux.py with the four repair lines its README
    says to comment out for the "noavoid" runs turned into comments, as a
    user of the artifact would."""
    import importlib.util
    path = os.path.join(sim_dir, "pollux.py")
    lines = open(path).read().split("\n")
    first = next(i for i, line in enumerate(lines)
                 if line.strip().startswith("distributed = np.count_nonzero(states, axis=2)"))
    block = lines[first:first + 4]
    if not block[-1].strip().startswith("states[mask] = 0"):
        sys.exit("pollux-artifact-rounds: the artifact's avoidance lines are not where expected")
    lines[first:first + 4] = ["#" + line for line in block]
    spec = importlib.util.spec_from_loader("pollux", loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    exec(compile("\n".join(lines), path, "exec"), module.__dict__)
    sys.modules["pollux"] = module


def record(cluster, last):
    """One round in gpuplan's round-log format (docs/fidelity.md)."""
    jobs = []
    for job in cluster.jobs:
        if job.submission_time > cluster.current_time:
            continue
        placement = tuple(p for p in job.placement if p)
        entry = {
            "name": job.name,
            "gpus": sum(placement),
            "nodes": len(placement),
            "allocation": sorted(cluster.allocations.get(job.name, [])) if not job.completion_time else [],
            "batch_size": job.atomic_bsz * (job.accum_steps + 1) * sum(placement),
            "progress": float(job.progress),
            "epoch": int(job.epoch),
            "restarts": job.num_restarts or 0,
            "done": job.completion_time is not None,
        }
        if placement and job.completion_time is None and job.atomic_bsz > 0:
            entry["goodput"] = float(true_goodput(job, placement))
        if job.name in last.get("speedup", {}):
            entry["speedup"] = last["speedup"][job.name]
        jobs.append(entry)
    out = {"time": cluster.current_time, "jobs": jobs}
    if "fitness" in last:
        out["fitness"] = last["fitness"]
    return out


def true_goodput(job, placement):
    """The simulated progress rate of `placement`, as the artifact's Job.step
    computes it (no interference)."""
    app = job.application
    batch = sum(placement) * job.atomic_bsz * (job.accum_steps + 1)
    step_time, sync_time = app.get_throughput(placement, job.atomic_bsz)
    accum_time = step_time - sync_time
    grad_sqr, grad_var = app.get_grad_stats(batch, job.epoch)
    scale = batch / app.init_batch_size
    gain = (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)
    return gain / (step_time + accum_time * job.accum_steps)


if __name__ == "__main__":
    main()
