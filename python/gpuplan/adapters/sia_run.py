"""Run a policy in Sia's own simulator: Sia's own ILP or a gpuplan planner.

    python -m gpuplan.adapters.sia_run --sia-dir CHECKOUT --policy gpuplan-mip \\
        --workloads 1-8 --out DIR

``CHECKOUT`` is a checkout of github.com/siasosp23/artifacts (it has no
licence, so nothing of it is in this repository; ``--sia-dir`` may also name
its ``sia-simulator`` folder). ``--policy sia-own`` runs Sia's own
``SiaPolicy`` (its ILP); any other name is a gpuplan planner
(``gpuplan.policies()``), wrapped by :func:`gpuplan.adapters.sia.policy_class`
so that Sia's ``Cluster`` builds the same per-type job infos for it as for
its own policy. Either way the loop is Sia's: its ``Cluster`` advances every
job by its own ground truth and calls the policy every ``--interval``
seconds until all jobs complete, set up as Sia's ``multi_simulator.py`` sets
it up for ``--policy sia`` (valid configurations, rigid jobs' seeded
profiles). Sia's flags are the defaults: p = -0.5, lambda_n = 1.1,
lambda_a = 0.01, 60 s rounds, projected throughputs, shared max replicas.

For each workload ``N`` it writes, under ``--out``:

- ``workload-N.log``: Sia's own per-round log (``Cluster.output_logs``),
  which Sia's ``utils/print_run_stats.py`` reads;
- ``workload-N.stdout``: everything the simulator printed;
- ``workload-N.rounds.jsonl`` (gpuplan planners): one line per round with
  status, objective, bound and solve ms (:class:`GpuplanSia`);
- ``workload-N.json``: average JCT, makespan, wall and planner time.

Then ``summary.json`` (Sia's format: ``jcts``, ``avgs``, ``mean``) over every
``workload-*.log`` in ``--out``, and ``stats.txt``: Sia's own
``print_run_stats.py`` on them (run with ``--no-stats`` to skip). A workload
whose log exists is skipped, so an interrupted series resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: What Sia's own runs use (its run_experiment.sh): p, lambda_n, lambda_a, interval.
SIA_FLAGS = {"p": -0.5, "lambda_n": 1.1, "lambda_a": 0.01, "interval": 60}


def parse_workloads(spec: str) -> List[int]:
    """``1-8``, ``1,3,5`` or ``2`` to a sorted list of workload numbers."""
    out = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"--workloads: {part!r} is not N or N-M")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if hi < lo:
            raise ValueError(f"--workloads: {part!r} runs backwards")
        out.update(range(lo, hi + 1))
    return sorted(out)


def simulator_dir(sia_dir: str) -> str:
    """The ``sia-simulator`` folder of a checkout (or the folder itself)."""
    for cand in (os.path.join(sia_dir, "sia-simulator"), sia_dir):
        if os.path.isfile(os.path.join(cand, "cluster.py")) and os.path.isfile(os.path.join(cand, "sia.py")):
            return os.path.abspath(cand)
    raise SystemExit(f"--sia-dir {sia_dir}: no sia-simulator (cluster.py, sia.py) there")


def last_jobs(log_path: str) -> Optional[List[Dict[str, Any]]]:
    """The jobs of the last record of Sia's log (``Cluster.output_logs``:
    one JSON record per round); ``None`` for an empty log."""
    last = None
    with open(log_path) as f:
        for line in f:
            if line.strip():
                last = line
    return None if last is None else json.loads(last)["submitted_jobs"]


def summarize(out_dir: str) -> Dict[str, Any]:
    """Sia's ``summary.json`` from every ``workload-*.log`` in ``out_dir``:
    each job's JCT from the last record, as Sia's ``Cluster.get_jcts``."""
    summary: Dict[str, Any] = {"jcts": {}, "avgs": {}}
    for path in sorted(glob.glob(os.path.join(out_dir, "workload-*.log"))):
        name = os.path.basename(path)[: -len(".log")]
        jobs = last_jobs(path)
        if jobs is None:
            continue
        jcts = {j["name"]: j["completion_time"] - j["submission_time"] for j in jobs if j["completion_time"] is not None}
        summary["jcts"][name] = jcts
        summary["avgs"][name] = sum(jcts.values()) / len(jcts) if jcts else 0.0
    if summary["avgs"]:
        summary["mean"] = sum(summary["avgs"].values()) / len(summary["avgs"])
    return summary


def sia_stats(sim_dir: str, workload_dir: str, out_dir: str, interval: int) -> str:
    """Sia's own ``print_run_stats.py`` on the workloads that have logs.

    It reads every CSV of its ``--workload_dir`` and insists each has a
    summary, so it is given a folder of links to only those run."""
    summary = json.load(open(os.path.join(out_dir, "summary.json")))
    with tempfile.TemporaryDirectory() as tmp:
        for name in summary["jcts"]:
            os.symlink(os.path.join(workload_dir, name + ".csv"), os.path.join(tmp, name + ".csv"))
        res = subprocess.run(
            [sys.executable, os.path.join(sim_dir, "utils", "print_run_stats.py"),
             f"--workload_dir={tmp}", f"--output_dir={out_dir}", f"--interval={interval}"],
            cwd=sim_dir, capture_output=True, text=True,
        )
    return res.stdout + res.stderr


def make_policy(args: argparse.Namespace, workload: int, sia_mod: Any, cfg: Any) -> Any:
    """Sia's own ``SiaPolicy`` or a gpuplan planner dressed as one."""
    sia_kwargs = dict(
        p_fairness=args.p, restart_penalty=30, lambda_a=args.lambda_a, lambda_n=args.lambda_n,
        project_throughputs=True, share_max_replicas=True, enable_bsz_tuning=True,
    )
    if args.policy == "sia-own":
        return sia_mod.SiaPolicy(**sia_kwargs)
    from gpuplan.adapters.sia import policy_class

    cls = policy_class(sia_mod.SiaPolicy)
    rounds = os.path.join(args.out, f"workload-{workload}.rounds.jsonl")
    if os.path.exists(rounds):
        os.remove(rounds)
    return cls(
        args.policy, sia_kwargs=sia_kwargs, p=args.p, lambda_n=args.lambda_n,
        time_limit_s=args.time_limit, seed=args.seed, interference=args.interference,
        restart_penalty=sia_mod.get_restart_penalty, max_nodes=cfg.cluster_max_physical_nnodes,
        share_max_replicas=True, log_path=rounds,
        dump_dir=args.dump_dir, dump_over_ms=args.dump_over_ms, extra_params=args.param,
    )


def param_arg(text: str) -> Tuple[str, Any]:
    """`KEY=VALUE` of --param, the value read as JSON (else as a string)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def run_workload(args: argparse.Namespace, sim_dir: str, workload: int) -> Optional[Dict[str, Any]]:
    """One workload in Sia's loop; its per-workload JSON, or None if done before."""
    log = os.path.join(args.out, f"workload-{workload}.log")
    if os.path.exists(log):
        print(f"workload-{workload}: {log} exists, skipped")
        return None
    csv = os.path.join(sim_dir, "workloads", args.workload_set, f"workload-{workload}.csv")
    if not os.path.isfile(csv):
        raise SystemExit(f"{csv}: no such workload")
    import pandas  # Sia's simulator needs it; so does its workload file

    import simulator_config as cfg  # type: ignore[import-not-found]
    import sia as sia_mod  # type: ignore[import-not-found]
    from cluster import Cluster  # type: ignore[import-not-found]

    ngpus = {k: cfg.cluster_ngpus_per_node[k] for k in cfg.cluster_nnodes}
    start = time.time()
    cpu0 = time.process_time()
    policy_s = 0.0
    rounds = 0
    with open(os.path.join(args.out, f"workload-{workload}.stdout"), "w") as sink, contextlib.redirect_stdout(sink):
        policy = make_policy(args, workload, sia_mod, cfg)
        policy.populate_valid_configs(cfg.cluster_nnodes, ngpus, cfg.cluster_max_physical_nnodes)
        cluster = Cluster(pandas.read_csv(csv), policy, cfg.cluster_nnodes, ngpus,
                          max_physical_nodes=cfg.cluster_max_physical_nnodes)
        for job in cluster.jobs:
            if job.category == "rigid":
                job.seed_profiles_rigid(ngpus)
        optimize = policy.optimize

        def timed(*a: Any, **k: Any) -> Any:
            nonlocal policy_s, rounds
            t0 = time.perf_counter()
            try:
                return optimize(*a, **k)
            finally:
                policy_s += time.perf_counter() - t0
                rounds += 1

        policy.optimize = timed
        while not cluster.all_complete():
            cluster.step(args.interval)
            if args.max_rounds and cluster.current_time >= args.max_rounds * args.interval:
                break
        jcts = cluster.get_jcts()
    tmp = log + ".tmp"
    cluster.output_logs(tmp)
    result = {
        "workload": f"workload-{workload}",
        "policy": args.policy,
        "jobs": len(cluster.jobs),
        "completed": len(jcts),
        "avg_jct_h": (sum(jcts.values()) / len(jcts) / 3600.0) if jcts else None,
        "makespan_h": cluster.current_time / 3600.0,
        "rounds": rounds,
        "policy_ms_mean": 1e3 * policy_s / rounds if rounds else None,
        "wall_s": time.time() - start,
        "cpu_s": time.process_time() - cpu0,
        "flags": {k: getattr(args, k) for k in ("p", "lambda_n", "lambda_a", "interval", "time_limit", "interference", "param")},
    }
    if args.max_rounds and not cluster.all_complete():
        result["stopped_after_rounds"] = args.max_rounds
    os.replace(tmp, log)
    with open(os.path.join(args.out, f"workload-{workload}.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuplan.adapters.sia_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sia-dir", required=True, help="checkout of siasosp23/artifacts (or its sia-simulator folder)")
    ap.add_argument("--policy", required=True, help="sia-own (Sia's ILP) or a gpuplan planner, e.g. gpuplan-mip, sia")
    ap.add_argument("--workloads", default="1-8", help="workload numbers: 1-8, 1,3 (default 1-8)")
    ap.add_argument("--workload-set", default="philly", help="folder under sia-simulator/workloads (default philly)")
    ap.add_argument("--out", required=True, help="output folder (made if absent)")
    ap.add_argument("--interval", type=int, default=SIA_FLAGS["interval"])
    ap.add_argument("--p", type=float, default=SIA_FLAGS["p"])
    ap.add_argument("--lambda-n", type=float, default=SIA_FLAGS["lambda_n"])
    ap.add_argument("--lambda-a", type=float, default=SIA_FLAGS["lambda_a"], help="Sia's own policy only")
    ap.add_argument("--time-limit", type=float, default=10.0, help="gpuplan planners: seconds per round")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--interference", choices=["allow", "avoid"], default="allow",
                    help="gpuplan planners (Sia's simulator never charges for interference)")
    ap.add_argument("--dump-over-ms", type=float, default=float("inf"),
                    help="gpuplan planners: write each round whose solve took longer to --dump-dir")
    ap.add_argument("--dump-dir", default=None, help="where --dump-over-ms writes round-N.json (made if absent)")
    ap.add_argument("--param", action="append", type=param_arg, default=[], metavar="KEY=VALUE",
                    help="gpuplan planners: a round param (JSON value), e.g. restart_weight=1; repeatable; "
                         "wins over the planner's registry defaults")
    ap.add_argument("--max-rounds", type=int, default=0, help="stop each workload after this many rounds (0: run to the end)")
    ap.add_argument("--no-stats", action="store_true", help="skip Sia's print_run_stats.py")
    args = ap.parse_args(argv)
    args.param = dict(args.param)
    if args.policy != "sia-own":
        import gpuplan

        if args.policy not in gpuplan.policies():
            ap.error(f"--policy {args.policy}: not sia-own nor one of {', '.join(gpuplan.policies())}")
    try:
        workloads = parse_workloads(args.workloads)
    except ValueError as e:
        ap.error(str(e))
    sim_dir = simulator_dir(args.sia_dir)
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    if args.dump_dir:
        args.dump_dir = os.path.abspath(args.dump_dir)
        os.makedirs(args.dump_dir, exist_ok=True)
    sys.path.insert(0, sim_dir)
    os.chdir(sim_dir)
    for w in workloads:
        res = run_workload(args, sim_dir, w)
        if res is not None:
            print(json.dumps(res))
    summary = summarize(args.out)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=4)
    if summary.get("avgs"):
        print("average JCT (h):", {k: round(v / 3600, 3) for k, v in summary["avgs"].items()},
              "mean", round(summary["mean"] / 3600, 3))
        if not args.no_stats:
            stats = sia_stats(sim_dir, os.path.join(sim_dir, "workloads", args.workload_set), args.out, args.interval)
            with open(os.path.join(args.out, "stats.txt"), "w") as f:
                f.write(stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
