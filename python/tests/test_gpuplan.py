"""The gpuplan package against the gpuplan CLI (`make test-py` runs these).

The CLI binary is $GPUPLAN_BIN, else $CARGO_TARGET_DIR/release/gpuplan.
"""

import ast
import copy
import inspect
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import gpuplan

REPO = Path(__file__).resolve().parents[2]
ROUNDS = [
    REPO / "tests/data/round-tiny.json",
    REPO / "tests/data/round-workload6-36jobs.json",
    REPO / "crates/solve/tests/rounds/keep-mixed-types.json",
    REPO / "crates/solve/tests/rounds/mixed-types-new-job.json",
    REPO / "crates/solve/tests/rounds/keep-interference.json",
    REPO / "crates/solve/tests/rounds/unsorted-pinned.json",
    REPO / "crates/solve/tests/rounds/dumped-with-p-inf.json",
]
# The MIP of our own, its Pollux and Sia objectives, a heuristic, a
# published baseline with state, and a randomised search (seeded).
PLANNERS = ["gpuplan-mip", "pollux-mip", "sia", "greedy", "tiresias", "pollux-ga"]
WORKLOAD = REPO / "tests/data/short-workload.csv"


def cli_path():
    env = os.environ.get("GPUPLAN_BIN")
    if env:
        return Path(env)
    target = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache/gpuplan/target"))
    return Path(target) / "release/gpuplan"


@pytest.fixture(scope="module")
def cli():
    path = cli_path()
    if not path.is_file():
        pytest.fail(f"no gpuplan binary at {path}: build it (make build-release) or set GPUPLAN_BIN")

    def run(*args, ok=True):
        p = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True)
        if ok and p.returncode != 0:
            raise AssertionError(f"gpuplan {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
        return p

    return run


def without_timing(plan):
    out = dict(plan)
    out.pop("solve_ms")
    return out


def test_policies_are_the_clis(cli):
    names = [e["name"] for e in json.loads(cli("policies", "--format", "json").stdout)]
    assert gpuplan.policies() == names
    assert "gpuplan-mip" in names and "sia" in names


def test_default_params_are_the_registrys(cli):
    entries = json.loads(cli("policies", "--format", "json").stdout)
    pollux = gpuplan.default_params("pollux-mip")
    for e in entries:
        params = gpuplan.default_params(e["name"])
        # Where a policy differs from Pollux's params, the CLI lists it.
        for key, value in e["params"].items():
            assert params[key] == value, (e["name"], key)
        for key, value in params.items():
            if key not in e["params"]:
                assert pollux.get(key) == value, (e["name"], key)
    mip = gpuplan.default_params("gpuplan-mip")
    assert mip["exploration_factor"] == 4 and mip["restart_weight"] == 2.0
    # A key at its round-file default is left out, as a round file leaves it.
    assert pollux["exploration_factor"] == 2 and "restart_weight" not in pollux


def test_unknown_names_and_bad_limits_are_value_errors():
    with pytest.raises(ValueError, match="tiresias-gittins"):
        gpuplan.default_params("nope")
    with pytest.raises(ValueError, match="valid planners"):
        gpuplan.Planner("nope")
    with pytest.raises(ValueError, match="time_limit_s"):
        gpuplan.Planner("greedy", time_limit_s=0)
    with pytest.raises(ValueError, match="gap"):
        gpuplan.Planner("greedy", gap=-1)
    # No longer raised to 1 in silence (issue 50).
    with pytest.raises(ValueError, match="threads: must be >= 1"):
        gpuplan.Planner("greedy", threads=0)
    with pytest.raises(TypeError):
        gpuplan.plan(3, planner="greedy")


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("path", ROUNDS, ids=lambda p: p.name)
def test_plan_is_the_clis_key_by_key(cli, path, planner):
    want = json.loads(cli("plan", "--input", path, "--planner", planner, "--seed", 3, "--time-limit", 30, "--format", "json").stdout)
    round = json.loads(path.read_text())
    got = gpuplan.Planner(planner, time_limit_s=30, seed=3).plan(round)
    assert set(got) == set(want)
    assert without_timing(got) == without_timing(want)
    # The one-shot form and the file's text give the same plan.
    again = gpuplan.plan(path.read_text(), planner=planner, time_limit_s=30, seed=3)
    assert without_timing(again) == without_timing(want)


def test_a_planners_registry_defaults_fill_only_what_the_round_leaves_out():
    round = json.loads((REPO / "tests/data/round-workload6-36jobs.json").read_text())
    round["params"] = {k: v for k, v in round.get("params", {}).items() if k not in ("exploration_factor", "restart_weight")}
    implicit = gpuplan.plan(round, planner="gpuplan-mip")
    explicit = copy.deepcopy(round)
    explicit["params"].update(exploration_factor=4, restart_weight=2.0)
    assert without_timing(gpuplan.plan(explicit, planner="gpuplan-mip")) == without_timing(implicit)
    # Given keys win: Pollux's values written out plan as pollux-mip's objective does.
    pollux = copy.deepcopy(round)
    pollux["params"].update(exploration_factor=2, restart_weight=1.0)
    a = gpuplan.plan(pollux, planner="gpuplan-mip")
    b = gpuplan.plan(pollux, planner="pollux-mip")
    assert a["objective"] == pytest.approx(b["objective"], rel=1e-6)


def test_bad_round_is_a_value_error_naming_every_path_the_cli_names(cli, tmp_path):
    round = json.loads((REPO / "tests/data/round-tiny.json").read_text())
    round["jobs"][0]["min_gpus"] = 99
    round["cluster"]["nodes"][1]["gpus"] = 0
    round.setdefault("params", {})["sharing"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(round))
    p = cli("plan", "--input", bad, "--planner", "greedy", ok=False)
    assert p.returncode == 2
    problems = [line.strip() for line in p.stderr.splitlines()[1:] if line.strip()]
    assert len(problems) >= 3, p.stderr
    with pytest.raises(ValueError) as e:
        gpuplan.plan(round, planner="greedy")
    message = str(e.value)
    for problem in problems:
        assert problem in message
    assert "jobs[0] (resnet-a).min_gpus" in message
    assert "cluster.nodes[1].gpus" in message
    assert "params.sharing" in message


@pytest.mark.parametrize("name", ["pinned-interference.json", "pinned-over-max.json", "dup-name.json", "p-minus-1e9.json"])
def test_rounds_the_cli_refuses_are_value_errors_with_its_lines(cli, name):
    path = REPO / "crates/solve/tests/rounds" / name
    p = cli("plan", "--input", path, "--planner", "gpuplan-mip", ok=False)
    assert p.returncode == 2, p.stdout
    problems = [line.strip() for line in p.stderr.splitlines()[1:] if line.strip()]
    assert problems, p.stderr
    with pytest.raises(ValueError) as e:
        gpuplan.plan(json.loads(path.read_text()), planner="gpuplan-mip")
    for problem in problems:
        assert problem in str(e.value)


def test_malformed_json_and_wrong_types_are_value_errors():
    with pytest.raises(ValueError, match=r"^round:1:"):
        gpuplan.plan("{", planner="greedy")
    round = json.loads((REPO / "tests/data/round-tiny.json").read_text())
    round["jobs"][0]["max_gpus"] = "many"
    with pytest.raises(ValueError, match="invalid type"):
        gpuplan.plan(round, planner="greedy")
    round["jobs"][0]["max_gpus"] = 16
    round["params"] = {"p_min": True}
    with pytest.raises(ValueError, match="p_min"):
        gpuplan.plan(round, planner="greedy")


def test_a_planner_keeps_its_state_across_rounds():
    round = json.loads((REPO / "tests/data/round-workload6-36jobs.json").read_text())
    planner = gpuplan.Planner("tiresias")
    assert planner.name == "tiresias"
    first = planner.plan(round)
    second = planner.plan(round)
    assert first["allocations"] and second["allocations"]
    assert set(second["changes"]) == {j["name"] for j in round["jobs"]}


def runs_while(work):
    """Whether this thread ran Python code while `work` ran in another.

    The switch interval is made huge, so a thread holding the GIL keeps it
    until it blocks or releases it: this thread then wakes while `work` is
    still running only if `work` released the GIL.
    """
    started, done = threading.Event(), threading.Event()
    errors = []

    def worker():
        started.set()
        try:
            work()
        except BaseException as e:  # reported below
            errors.append(e)
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        started.wait()
        ran_during = not done.is_set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    return ran_during


def test_plan_releases_the_gil():
    round = json.loads((REPO / "tests/data/round-workload6-36jobs.json").read_text())
    planner = gpuplan.Planner("pollux-ga")

    def work():
        for _ in range(3):
            planner.plan(round)

    assert runs_while(work)


def test_simulate_releases_the_gil():
    assert runs_while(lambda: gpuplan.simulate(WORKLOAD, "greedy"))


@pytest.mark.parametrize(
    "policy,flags,kwargs",
    [
        ("gpuplan-mip", [], {}),
        ("fifo", [], {}),
        ("pollux-mip", ["--cluster", "8x4", "--interval", 120, "--restart-delay", 20, "--seed", 2, "--p", -0.5],
         dict(cluster="8x4", interval_s=120, restart_delay_s=20, seed=2, p=-0.5)),
        ("gpuplan-mip", ["--exploration-factor", 3, "--restart-weight", 1.5, "--interference", "allow"],
         dict(exploration_factor=3, restart_weight=1.5, interference="allow")),
        ("pollux-mip", ["--cluster", "2x4:t4+1x4:a100", "--type-blind"],
         dict(cluster="2x4:t4+1x4:a100", type_blind=True)),
        ("fifo", ["--placement", "packed", "--sticky"], dict(placement="packed", sticky=True)),
    ],
)
def test_simulate_is_the_clis_summary(cli, policy, flags, kwargs):
    want = json.loads(cli("simulate", "--workload", WORKLOAD, "--policy", policy, "--format", "json", *flags).stdout)
    got = gpuplan.simulate(WORKLOAD, policy, **kwargs)
    assert set(got) == set(want)
    for key in ("wall_s", "planner_ms"):
        got.pop(key)
        want.pop(key)
    assert got == want


def test_simulate_with_queues_gives_the_clis_rows_per_queue(cli, tmp_path):
    workload = REPO / "tests" / "data" / "queued-workload.csv"
    queues = REPO / "examples" / "queues-ab.toml"
    want = json.loads(cli("simulate", "--workload", workload, "--policy", "fifo", "--cluster", "4x4",
                          "--queues", queues, "--format", "json").stdout)
    got = gpuplan.simulate(workload, "fifo", cluster="4x4", queues=queues)
    assert [q["queue"] for q in got["queues"]] == ["a", "b"]
    for key in ("wall_s", "planner_ms"):
        got.pop(key)
        want.pop(key)
    assert got == want
    bad = tmp_path / "bad.toml"
    bad.write_text('[[queue]]\nname = "a"\nguarantee = 8\n\n[[queue]]\nname = "b"\nparent = "x"\n')
    with pytest.raises(ValueError, match="bad.toml:7:parent: no queue named .x."):
        gpuplan.simulate(workload, "fifo", cluster="4x4", queues=bad)


def test_simulate_names_bad_arguments():
    with pytest.raises(ValueError, match="interval_s"):
        gpuplan.simulate(WORKLOAD, "fifo", interval_s=-1)
    with pytest.raises(ValueError, match="cannot read"):
        gpuplan.simulate(REPO / "no-such-workload.csv", "fifo")
    with pytest.raises(ValueError, match="valid planners"):
        gpuplan.simulate(WORKLOAD, "nope")
    with pytest.raises(ValueError, match="interference"):
        gpuplan.simulate(WORKLOAD, "fifo", interference="sometimes")
    with pytest.raises(ValueError, match="placement"):
        gpuplan.simulate(WORKLOAD, "fifo", placement="everywhere")
    with pytest.raises(TypeError):
        gpuplan.simulate(WORKLOAD, "fifo", no_such_flag=1)


def stub_signatures(path):
    """Function name -> [(parameter, kind, default source)] from a .pyi."""
    out = {}

    def params(fn):
        a = fn.args
        pos = a.posonlyargs + a.args
        defaults = [None] * (len(pos) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
        rows = [(p.arg, "positional", d) for p, d in zip(pos, defaults)]
        rows += [(p.arg, "keyword", None if d is None else ast.unparse(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        return rows

    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = params(node)
        elif isinstance(node, ast.ClassDef):
            for m in node.body:
                if isinstance(m, ast.FunctionDef) and m.name in ("__init__", "plan"):
                    out[f"{node.name}.{m.name}"] = params(m)
    return out


def runtime_signature(obj):
    rows = []
    for p in inspect.signature(obj).parameters.values():
        kind = "keyword" if p.kind == p.KEYWORD_ONLY else "positional"
        d = None if p.default is p.empty else repr(p.default)
        rows.append((p.name, kind, d))
    return rows


def test_type_stubs_match_the_package():
    pkg = Path(gpuplan.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_gpuplan.pyi").is_file()
    stubs = stub_signatures(pkg / "__init__.pyi")
    for name in ("policies", "default_params", "plan", "simulate", "Planner.__init__", "Planner.plan"):
        obj = gpuplan
        for part in name.split("."):
            obj = getattr(obj, part)
        assert stubs[name] == runtime_signature(obj), name
        assert obj.__doc__ or name.endswith("__init__"), name
    assert set(gpuplan.__all__) == {"policies", "default_params", "Planner", "plan", "simulate"}
