"""gpuplan.adapters.sia on stub job infos shaped as Sia's simulator passes
them (CI cannot fetch the artifact; nothing of it is used here)."""

import argparse
import collections
import json

import pytest

import gpuplan
from gpuplan.adapters import sia

Perf = collections.namedtuple("Perf", "alpha_c beta_c alpha_n beta_n alpha_r beta_r gamma")
Grad = collections.namedtuple("Grad", "sqr var")

# cifar10's Pollux parameters (tests/data/round-tiny.json).
CIFAR = Perf(0.0174, 0.0007, 0.1221, 0.00264, 0.0329, 0.00087, 2.07)


class Goodput:
    def __init__(self, perf, grad=Grad(1.27, 1.44), init_batch=128, stages=1):
        self._perf_params, self._grad_params, self._init_batch_size = perf, grad, init_batch
        self._num_stages = stages


class Speedup:
    def __init__(self, goodput, max_batch=4096, bsz_range=(32, 1024)):
        self._goodput_fn, self._max_batch_size = goodput, max_batch
        self._atomic_bsz_range, self._accumulation = bsz_range, True


class Node:
    def __init__(self, gpus):
        self.resources = {"nvidia.com/gpu": gpus}
        self.preemptible = False


class Info:
    """The attributes Sia's Cluster.get_sia_multi_job_info sets."""

    def __init__(self, fns, max_replicas, **kw):
        self.speedup_fn = fns
        self.max_replicas = max_replicas
        self.min_replicas = {t: 0 for t in max_replicas}
        self.creation_timestamp = kw.get("submit", 0.0)
        self.attained_service = kw.get("attained", 0.0)
        self.num_restarts = kw.get("restarts", 0)
        self.age = kw.get("age", 600.0)
        self.category = kw.get("category")
        self.scaling_underway = kw.get("scaling", False)
        self.cluster_throughput_ratios = kw.get("ratios", {})
        self.preemptible = True


NODES = {"t4": {0: Node(4), 1: Node(4)}, "a100": {0: Node(8)}}


def fast(perf, k):
    return Perf(*(v / k if n != "gamma" else v for n, v in zip(Perf._fields, perf)))


def infos():
    return {
        # Profiled on both types: the A100 model runs 3x faster.
        "cifar10-0": Info({"t4": Speedup(Goodput(CIFAR)), "a100": Speedup(Goodput(fast(CIFAR, 3)))},
                          {"t4": 8, "a100": 8}, age=1200.0, restarts=1),
        # Profiled on the T4 only: A100 derived by Sia's ratio (T4 step 2x A100's).
        "cifar10-1": Info({"t4": Speedup(Goodput(CIFAR)), "a100": None}, {"t4": 4, "a100": 4},
                          ratios={"t4": {"a100": 0.5}, "a100": {"t4": 2.0}}),
        # Never ran: no model anywhere.
        "cifar10-2": Info({"t4": None, "a100": None}, {"t4": 2, "a100": 2}),
        # Restoring a checkpoint on T4 node 1: pinned.
        "cifar10-3": Info({"t4": Speedup(Goodput(CIFAR)), "a100": None}, {"t4": 4, "a100": 4},
                          scaling=True, ratios={"t4": {"a100": 0.5}}),
    }


BASE = {"cifar10-0": ("a100", (0, 0)), "cifar10-3": ("t4", (1, 1))}


def test_nodes_are_numbered_per_type_and_mapped_back():
    nm = sia.node_map(NODES)
    assert nm.nodes == [("t4", 0), ("t4", 1), ("a100", 0)]
    assert nm.gpus == [4, 4, 8]
    assert nm.index("a100", 0) == 2
    with pytest.raises(ValueError, match="no node 5"):
        nm.index("t4", 5)


def test_round_from_sia_job_infos():
    round, nm = sia.build_round(infos(), NODES, BASE, restart_penalty=lambda name: 30.0 + len(name))
    jobs = {j["name"]: j for j in round["jobs"]}
    assert [n["gpu_type"] for n in round["cluster"]["nodes"]] == ["t4", "t4", "a100"]
    assert round["params"] == {"p": -0.5, "left_out_cost": 1.1, "spare_waiting": True, "interference": "allow"}
    # Current allocations, in gpuplan's node numbering.
    assert jobs["cifar10-0"]["state"]["allocation"] == [2, 2]
    assert jobs["cifar10-3"]["state"]["allocation"] == [1, 1]
    # The reference model is the current type's; the other type's own fit is kept.
    j0 = jobs["cifar10-0"]
    assert j0["model_type"] == "a100"
    assert j0["model"]["perf"]["alpha_c"] == pytest.approx(CIFAR.alpha_c / 3)
    assert j0["type_models"][0]["gpu_type"] == "t4"
    assert j0["type_models"][0]["model"]["perf"] == dict(zip(Perf._fields, CIFAR))
    assert j0["model"]["grad"] == {"sqr": 1.27, "var": 1.44}
    assert j0["model"]["limits"] == {"init_batch": 128, "max_batch": 4096, "min_local": 32, "max_local": 1024}
    assert j0["state"]["restarts"] == 1 and j0["state"]["age_s"] == 1200.0
    # A type without a fit: Sia's throughput ratio scales every time term.
    j1 = jobs["cifar10-1"]
    assert j1["model_type"] == "t4"
    derived = j1["type_models"][0]
    assert derived["gpu_type"] == "a100"
    assert derived["model"]["perf"]["beta_c"] == pytest.approx(CIFAR.beta_c * 0.5)
    assert derived["model"]["perf"]["gamma"] == CIFAR.gamma
    assert jobs["cifar10-2"]["model"] is None
    # Checkpoint-restore keeps its GPUs; the rest may move.
    assert jobs["cifar10-3"]["preemptible"] is False
    assert jobs["cifar10-0"]["preemptible"] is True
    assert j1["restart_penalty_s"] == 30.0 + len("cifar10-1")
    assert round["now_s"] == 1200.0


def test_the_round_plans_and_goes_back_to_sia_valid():
    round, nm = sia.build_round(infos(), NODES, BASE)
    plan = gpuplan.plan(round, planner="gpuplan-mip")
    allocs = sia.to_sia_allocations(plan, nm)
    assert sia.check_allocations(allocs, NODES, infos()) == []
    # The pinned job is where it was.
    assert allocs["cifar10-3"] == ("t4", [1, 1])
    for name, (gpu_type, nodes) in allocs.items():
        assert gpu_type in NODES and nodes == sorted(nodes)


def test_checks_catch_what_sia_would_trip_on():
    allocs = {
        "cifar10-0": ("t4", [0, 0, 0, 0, 0]),   # node 0 has 4 GPUs
        "cifar10-1": ("a100", [0, 0, 0, 0, 0, 0]),  # max_replicas 4 on a100
        "nope": ("t4", [1]),
        "cifar10-2": ("v100", [0]),
        "cifar10-3": ("t4", [0, 1]),
    }
    problems = sia.check_allocations(allocs, NODES, infos(), max_nodes={"t4": 1})
    text = "\n".join(problems)
    assert "node 0 of t4: 6 GPUs allocated, it has 4" in text
    assert "cifar10-1: 6 GPUs of a100, above its max_replicas 4" in text
    assert "nope: not a job of the round" in text
    assert "cifar10-2: unknown GPU type 'v100'" in text
    assert "cifar10-3: 2 nodes of t4, above 1" in text
    _, nm = sia.build_round(infos(), NODES, BASE)
    with pytest.raises(ValueError, match="several types"):
        sia.to_sia_allocations({"allocations": {"x": [0, 2]}}, nm)


def test_pipeline_jobs_are_refused_by_name():
    with pytest.raises(ValueError, match="pipeline"):
        sia.speedup_model(Speedup(Goodput(CIFAR, stages=2)))


def test_a_policy_subclass_of_sias_answers_rounds_and_logs_them(tmp_path):
    class SiaPolicy:  # stands in for Sia's class, as its Cluster checks isinstance
        def __init__(self, p_fairness=0.5, lambda_n=None):
            self.p_fairness = p_fairness

        def optimize(self, jobs, nodes, base_allocations):
            raise AssertionError("Sia's own ILP must not run")

    cls = sia.policy_class(SiaPolicy)
    log = tmp_path / "rounds.jsonl"
    policy = cls("gpuplan-mip", sia_kwargs={"p_fairness": -0.5}, time_limit_s=5, log_path=str(log))
    assert isinstance(policy, SiaPolicy) and policy.p_fairness == -0.5
    first = policy.optimize(infos(), NODES, BASE)
    second = policy.optimize(infos(), NODES, first)
    assert sia.check_allocations(second, NODES, infos()) == []
    assert policy.optimize({}, NODES, {}) == {}
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["round"] for e in lines] == [0, 1]
    assert all(e["status"] in ("optimal", "feasible", "fallback") and e["jobs"] == 4 for e in lines)
    assert policy.gpuplan.log == lines


def test_a_rigid_jobs_flat_throughputs_give_its_step_ratio():
    # Sia puts {type: throughput} in a rigid job's cluster_throughput_ratios.
    flat = {"t4": 100.0, "a100": 400.0}
    assert sia.step_ratio(flat, "t4", "a100") == pytest.approx(0.25)
    assert sia.step_ratio({"t4": {"a100": 0.5}}, "t4", "a100") == 0.5
    assert sia.step_ratio({"t4": {}}, "t4", "a100") is None
    assert sia.step_ratio({}, "t4", "a100") is None
    rigid = Info({"t4": Speedup(Goodput(CIFAR)), "a100": None}, {"t4": 1, "a100": 1},
                 category="rigid", ratios=flat)
    models = sia.job_models(rigid, ["t4", "a100"], None)
    assert models["type_models"][0]["model"]["perf"]["alpha_c"] == pytest.approx(CIFAR.alpha_c / 4)


def test_shared_max_replicas_caps_every_type_at_the_most():
    allocs = {"cifar10-1": ("a100", [0, 0, 0, 0, 0, 0])}  # max_replicas t4 4, a100 4
    assert sia.check_allocations(allocs, NODES, infos(), share_max_replicas=True) != []
    mixed = dict(infos())
    mixed["cifar10-1"] = Info({"t4": None, "a100": None}, {"t4": 8, "a100": 4})
    assert sia.check_allocations(allocs, NODES, mixed) != []
    assert sia.check_allocations(allocs, NODES, mixed, share_max_replicas=True) == []


def test_runner_reads_workload_lists_and_summarises_sias_logs(tmp_path):
    from gpuplan.adapters import sia_run

    assert sia_run.parse_workloads("1-3,5") == [1, 2, 3, 5]
    assert sia_run.parse_workloads("8") == [8]
    for bad in ("x", "3-1", "1-"):
        with pytest.raises(ValueError, match="--workloads"):
            sia_run.parse_workloads(bad)
    # Two records of Sia's Cluster.output_logs; JCTs come from the last.
    records = [
        {"submitted_jobs": [{"name": "a", "submission_time": 0, "completion_time": None}]},
        {"submitted_jobs": [{"name": "a", "submission_time": 0, "completion_time": 600},
                            {"name": "b", "submission_time": 100, "completion_time": 1300},
                            {"name": "c", "submission_time": 200, "completion_time": None}]},
    ]
    (tmp_path / "workload-2.log").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = sia_run.summarize(str(tmp_path))
    assert summary["jcts"] == {"workload-2": {"a": 600, "b": 1200}}
    assert summary["avgs"] == {"workload-2": 900} and summary["mean"] == 900
    with pytest.raises(SystemExit, match="no sia-simulator"):
        sia_run.simulator_dir(str(tmp_path))
    # --interference takes the round's own values, so an `avoid` arm plans.
    with pytest.raises(SystemExit):
        sia_run.main(["--sia-dir", str(tmp_path), "--policy", "sia", "--out", str(tmp_path), "--interference", "forbid"])
    assert sia.build_round(infos(), NODES, BASE, interference="avoid")[0]["params"]["interference"] == "avoid"


def test_compare_puts_arms_side_by_side(tmp_path):
    from gpuplan.adapters import sia_compare

    def run(folder, jcts, restarts, ms):
        folder.mkdir()
        jobs = [{"name": f"j{i}", "submission_time": 0, "completion_time": t, "num_restarts": restarts}
                for i, t in enumerate(jcts)]
        (folder / "workload-1.log").write_text(json.dumps({"submitted_jobs": jobs}) + "\n")
        (folder / "workload-1.stdout").write_text(
            "".join(f"Policy optimization took {m:.2f}ms, reallocating+migrating jobs took 0.1ms\n" for m in ms))

    run(tmp_path / "a", [3600, 7200], 1, [10.0, 30.0])
    run(tmp_path / "b", [1800, 3600], 0, [5.0])
    c = sia_compare.compare([("a", str(tmp_path / "a")), ("b", str(tmp_path / "b"))])
    assert c["workloads"] == ["workload-1"]
    a = c["runs"]["a"]["workload-1"]
    assert a["avg_jct_h"] == 1.5 and a["makespan_h"] == 2.0 and a["restarts"] == 2
    assert a["policy_ms_mean"] == 20.0 and a["rounds"] == 2
    assert c["summary"]["b"]["mean_ratio"] == pytest.approx(0.5)
    assert c["summary"]["b"]["geomean_ratio"] == pytest.approx(0.5)
    text = sia_compare.markdown(c)
    assert "| workload-1 | b | 0.750 |" in text


def test_slow_rounds_are_dumped_for_replay(tmp_path):
    g = sia.GpuplanSia("greedy", dump_dir=str(tmp_path), dump_over_ms=-1.0)
    g.optimize(infos(), NODES, BASE)
    dumped = json.loads((tmp_path / "round-0.json").read_text())
    assert [j["name"] for j in dumped["jobs"]] == sorted(infos())
    # The dump is a round file: it plans again as it is.
    assert gpuplan.plan(dumped, planner="greedy")["status"] in ("optimal", "feasible")


def test_extra_params_reach_the_round_and_win_over_registry_defaults():
    from gpuplan.adapters import sia_run

    assert sia_run.param_arg("restart_weight=1") == ("restart_weight", 1)
    assert sia_run.param_arg("placement=packed") == ("placement", "packed")
    with pytest.raises(argparse.ArgumentTypeError):
        sia_run.param_arg("restart_weight")
    round, _ = sia.build_round(infos(), NODES, BASE, extra_params={"restart_weight": 1.0, "exploration_factor": 8})
    assert round["params"]["restart_weight"] == 1.0 and round["params"]["exploration_factor"] == 8
    # The round still plans with them.
    assert gpuplan.plan(round, planner="gpuplan-mip")["status"] in ("optimal", "feasible")


def test_round_stats_average_what_each_round_held(tmp_path):
    from gpuplan.adapters import sia_compare

    def job(name, alloc, done=None):
        return {"name": name, "allocation": alloc, "completion_time": done}

    records = [
        {"timestamp": 60, "submitted_jobs": []},
        {"timestamp": 120, "submitted_jobs": [job("a", ["t4", [0, 0]]), job("b", None)]},
        {"timestamp": 180, "submitted_jobs": [job("a", ["a100", [0, 0, 0, 0]]), job("b", ["t4", [1]])]},
        {"timestamp": 240, "submitted_jobs": [job("a", ["a100", [0]], done=200), job("b", ["t4", [1]], done=230)]},
    ]
    d = tmp_path / "arm"
    d.mkdir()
    (d / "workload-1.log").write_text("".join(json.dumps(r) + "\n" for r in records))
    r = sia_compare.round_stats(str(d / "workload-1.log"))
    assert r["rounds"] == 2 and r["jobs"] == 2.0 and r["waiting"] == 0.5
    assert r["gpus_held"] == pytest.approx(3.5)
    assert r["gpus_by_type"] == {"a100": 2.0, "t4": 1.5}
    assert "| workload-1 | arm | 2 | 2.00 | 0.50 | 3.5 | a100 2.0, t4 1.5 |" in sia_compare.rounds_markdown([("arm", str(d))])
