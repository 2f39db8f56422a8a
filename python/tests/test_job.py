"""gpuplan.job, the job side of the protocol: its parts alone, then the numpy trainer under `gpuplan serve`.

The end-to-end test starts the real daemon ($GPUPLAN_BIN, else
$CARGO_TARGET_DIR/release/gpuplan) on two fake GPUs and runs
examples/numpy_train.py from the checkout (PYTHONPATH=python, no native
module) with this interpreter, which must have numpy (scripts/test-py.sh
installs the pin of python/requirements-dev.txt).
"""

import http.server
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gpuplan import job as gj

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples/numpy_train.py"
PYPATH = str(REPO / "python")


def records(text):
    return gj.read_log(text.splitlines())


@pytest.fixture(autouse=True)
def _sigterm_kept():
    """A Job built here takes SIGTERM over (catch_sigterm): give pytest its own back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)
    gj._sigterm.clear()


# --- parts ---


def test_job_imports_from_a_checkout_without_the_native_module(tmp_path):
    code = (
        "import gpuplan.job, gpuplan\n"
        "assert gpuplan.__file__.startswith(%r), gpuplan.__file__\n"
        "try:\n    gpuplan.policies()\nexcept ImportError as e:\n    print('refused:', e)\n" % PYPATH
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": PYPATH})
    assert p.returncode == 0, p.stderr
    assert "refused: gpuplan.policies: the native module" in p.stdout


def test_environment_defaults_outside_gpuplan_and_values_under_it():
    alone = gj.Job(env=gj.JobEnv.from_environ({}), default_batch_size=48)
    assert (alone.rank, alone.world_size, alone.batch_size, alone.local_bsz, alone.micro_steps) == (0, 1, 48, 48, 1)
    assert not alone.env.managed and alone.checkpoint_path is None and alone.reporter.url is None
    env = gj.JobEnv.from_environ({
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000",
        "GPUPLAN_BATCH_SIZE": "192", "GPUPLAN_LOCAL_BSZ": "32", "GPUPLAN_ACCUM_STEPS": "2",
        "GPUPLAN_CHECKPOINT_DIR": "/ck", "GPUPLAN_DONE_FILE": "/ck/done", "GPUPLAN_ATTEMPT": "3",
        "GPUPLAN_REPORT_URL": "http://127.0.0.1:1/v1/jobs/7/report", "GPUPLAN_JOB_TOKEN_FILE": "/t",
    })
    j = gj.Job(env=env, lr_rule="linear")
    assert (j.rank, j.world_size, j.batch_size, j.local_bsz, j.accum_steps, j.micro_steps) == (1, 2, 192, 32, 2, 3)
    assert (env.master_addr, env.master_port, env.attempt, env.managed) == ("10.0.0.1", 4000, 3, True)
    assert j.checkpoint_path == "/ck/gpuplan-checkpoint"
    assert j.split_sizes() == [32, 32, 32], "accumulation: one gradient per micro-batch"
    assert alone.split_sizes() == [24, 24], "one rank, no accumulation: two halves"
    assert j.reporter.url is None, "only rank 0 reports"
    assert not j.checkpoint_due(), "only rank 0 writes checkpoints"
    assert j.lr(0.1) == pytest.approx(0.1), "M0 is this first batch until a checkpoint says otherwise"
    j.m0 = 64.0
    assert j.lr(0.1) == pytest.approx(0.3)


def test_learning_rate_rules():
    assert gj.lr_scale("none", 256, 64) == 1
    assert gj.lr_scale("linear", 256, 64) == 4
    assert gj.lr_scale("sqrt", 256, 64) == 2
    assert gj.lr_scale("adascale", 256, 64) == 1, "no statistics yet: no gain"
    assert gj.lr_scale("adascale", 256, 64, (1.0, 0.0)) == 1, "no noise: a larger batch does not help"
    assert gj.lr_scale("adascale", 256, 64, (1e-9, 1.0)) == pytest.approx(4, rel=1e-6), "pure noise: linear"
    assert gj.lr_scale("adascale", 256, 64, (1.0, 1.0)) == pytest.approx(2 / 1.25)
    with pytest.raises(ValueError, match="unknown learning-rate rule"):
        gj.lr_scale("cubic", 2, 1)


@pytest.mark.parametrize("n,sizes", [(8, 16), (4, 32), (2, [7, 9])])
def test_gradient_noise_is_unbiased(n, sizes):
    """Replicas, micro-batches or unequal halves: the mean estimate meets the true |g|^2 and tr(Sigma)/M0."""
    rng = np.random.default_rng(1)
    dim, sigma, m0 = 500, 0.5, 64
    g = rng.normal(0, 0.05, dim)
    per = [sizes] * n if isinstance(sizes, int) else sizes
    est = []
    for _ in range(400):
        grads = [g + rng.normal(0, sigma / math.sqrt(b), dim) for b in per]
        est.append(gj.grad_noise(grads, sizes, m0))
    sqr, var = np.mean(est, axis=0)
    assert sqr == pytest.approx(g @ g, rel=0.05)
    assert var == pytest.approx(dim * sigma**2 / m0, rel=0.05)


def test_gradient_noise_smoothing_and_its_checkpoint():
    gn = gj.GradientNoise(0.5)
    assert gn.value() is None
    gn.update(0.0, 0.0)
    assert gn.value() is None, "no noise and no gradient: nothing to report"
    gn = gj.GradientNoise(0.5)
    gn.update(-1.0, 2.0)
    assert gn.value() == (2e-6, 2.0), "|g|^2 below its noise: floored, the noise scale stays finite"
    gn.update(5.0, -4.0)
    assert gn.value() == (pytest.approx((0.25 * -1 + 0.5 * 5) / 0.75), 0.0)
    other = gj.GradientNoise(0.5)
    other.load(gn.state())
    assert other.value() == gn.value()


class _Daemon:
    """A stand-in report endpoint: records bodies; ``refuse_new`` answers as a daemon without checkpoint keys."""

    def __init__(self, refuse_new=False):
        self.bodies, self.refuse_new = [], refuse_new
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.headers["Authorization"] == "Bearer tok"
                bad = [k for k in gj.NEW_REPORT_KEYS if k in body] if outer.refuse_new else []
                code, reply = (400, {"error": f"report: unknown field `{bad[0]}`, expected one of ..."}) if bad else (200, {"ok": True})
                if not bad:
                    outer.bodies.append(body)
                data = json.dumps(reply).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1/jobs/1/report"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_reports_survive_a_daemon_restart_and_an_older_daemon(tmp_path, capsys):
    tok = tmp_path / "token"
    tok.write_text("tok\n")
    # The daemon is down: submitting never blocks, and what failed rides on the next report.
    port = _free_port()
    r = gj.Reporter(f"http://127.0.0.1:{port}/v1/jobs/1/report", str(tok), timeout_s=0.5)
    t = time.monotonic()
    r.submit({"checkpoint_progress": 100.0, "checkpoint_step": 3})
    assert time.monotonic() - t < 0.1
    r.flush(3.0)
    time.sleep(0.5)
    assert r.failed == 1 and r.sent == 0, "a failed report waits for the next one, never retried in a loop"
    # ... then it is back (a stand-in on another port: what matters is the merge).
    d = _Daemon()
    r.url = d.url
    r.submit({"step": 10, "step_time_s": 0.1, "local_bsz": 8})
    assert r.flush(5.0)
    assert d.bodies[-1] == {"step": 10, "step_time_s": 0.1, "local_bsz": 8, "checkpoint_progress": 100.0, "checkpoint_step": 3}
    r.close()
    d.close()
    err = capsys.readouterr().err
    assert err.count("report failed") == 1, err
    assert "reports arrive again" in err
    # A daemon without the checkpoint keys: step reports still arrive, checkpoint-only ones are dropped.
    old = _Daemon(refuse_new=True)
    r = gj.Reporter(old.url, str(tok))
    r.submit({"step": 1, "step_time_s": 0.2, "local_bsz": 4, "total_progress": 9.0, "checkpoints_on_stop": True})
    r.flush(5.0)
    r.submit({"checkpoint_progress": 5.0, "checkpoint_step": 1})
    r.flush(5.0)
    r.submit({"step": 2, "step_time_s": 0.3, "local_bsz": 4, "total_progress": 9.0})
    r.flush(5.0)
    r.close()
    old.close()
    assert old.bodies == [{"step": 1, "step_time_s": 0.2, "local_bsz": 4}, {"step": 2, "step_time_s": 0.3, "local_bsz": 4}]
    assert capsys.readouterr().err.count("does not know the checkpoint keys") == 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_star_group_gathers_and_agrees():
    port, world, out = _free_port(), 3, {}

    def rank(r):
        env = gj.JobEnv(rank=r, world_size=world, master_addr="127.0.0.1", master_port=port)
        g = gj.StarGroup(env, timeout_s=20)
        out[r] = (g.allgather(bytes([r]) * (r + 1)), g.any(r == 2), g.any(False))
        g.close()

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert out == {r: ([b"\x00", b"\x01\x01", b"\x02\x02\x02"], True, False) for r in range(world)}


def test_checkpoints_are_atomic_and_restore_the_counters(tmp_path):
    env = gj.JobEnv(checkpoint_dir=str(tmp_path), batch_size=64)
    j = gj.Job(env=env)
    assert j.restore(default="fresh") == "fresh"
    j.step_count, j.progress = 7, 448.0
    j.report_gradients(sqr=2.0, var=1.0)
    j.checkpoint({"w": [1, 2]})
    assert sorted(os.listdir(tmp_path)) == ["gpuplan-checkpoint"], "no temporary file is left"
    k = gj.Job(env=gj.JobEnv(checkpoint_dir=str(tmp_path), batch_size=128, world_size=2))
    assert k.restore() == {"w": [1, 2]}
    assert (k.step_count, k.progress, k.resumed_from, k.m0) == (7, 448.0, (7, 448.0), 64.0)
    assert k.noise.value() == j.noise.value()


def _trainer_env(ck, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPLAN_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env.update(PYTHONPATH=PYPATH, GPUPLAN_CHECKPOINT_DIR=str(ck), GPUPLAN_DONE_FILE=str(ck / "done"), **extra)
    return env


def test_sigterm_stops_with_a_checkpoint_and_the_next_run_resumes_from_it(tmp_path):
    """Outside gpuplan: SIGTERM -> checkpoint at the step boundary -> exit 143; a rerun goes on from that step."""
    ck = tmp_path / "ck"
    ck.mkdir()
    p = subprocess.Popen([sys.executable, str(TRAINER), "--examples", "1e9", "--sleep-per-example-s", "0.0002"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_trainer_env(ck))
    lines = []
    for line in p.stdout:
        lines.append(line)
        if '"step": 20,' in line:
            break
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    first = records("".join(lines) + out)
    stop_ck = [r for r in first if r["event"] == "checkpoint"][-1]
    assert stop_ck["reason"] == "stop" and stop_ck["step"] >= 20
    assert first[-1]["event"] == "stop" and first[-1]["step"] == stop_ck["step"]
    assert not (ck / "done").exists()
    # Resume: ten more steps of 32 examples, then done.
    until = stop_ck["progress"] + 320
    p = subprocess.run([sys.executable, str(TRAINER), "--examples", str(until)], capture_output=True, text=True,
                       env=_trainer_env(ck, GPUPLAN_ATTEMPT="2"), timeout=60)
    assert p.returncode == 0, p.stderr
    second = records(p.stdout)
    resume = next(r for r in second if r["event"] == "resume")
    assert (resume["step"], resume["progress"]) == (stop_ck["step"], stop_ck["progress"])
    steps = [r["step"] for r in second if r["event"] == "step"]
    assert steps == list(range(stop_ck["step"] + 1, stop_ck["step"] + 11))
    assert [r["event"] for r in second if r["event"] != "report"][-1] == "done" and (ck / "done").exists()


# --- under `gpuplan serve` ---

sys.path.insert(0, str(REPO / "scripts"))
import serve_harness  # noqa: E402

#: Job-file keys of the checkpoint protocol (docs/job-protocol.md); a daemon without them refuses them.
NEW_SPEC_KEYS = {"total_progress", "min_runtime_s"}
A_EXAMPLES, B_EXAMPLES = 60_000, 6_000


def _spec(name, examples, max_gpus, batch, extra_args=""):
    # exec: SIGTERM must reach python, not an intermediate `sh -c` (docs/job-protocol.md, "The job library").
    cmd = (f"PYTHONPATH={PYPATH} exec {sys.executable} {TRAINER} --examples {examples} --sleep-per-example-s 0.0005 "
           f"--checkpoint-interval-s 2 --report-every 5 {extra_args}")
    return {"name": name, "command": cmd, "min_gpus": 1, "max_gpus": max_gpus, "batch_size": batch,
            "max_batch_size": batch * 2, "restart_cost_s": 2.0, "grace_s": 20.0,
            "total_progress": float(examples), "min_runtime_s": 0.0}


class Run:
    """What the scenario left: the daemon's views, each job's records by attempt, and what the daemon lacked."""

    def __init__(self):
        self.lacks, self.views, self.cli, self.recs, self.state = set(), {}, {}, {}, None
        self.modelled = {}  # per job, its last view with a fitted model while it ran

    def watch(self, jobs):
        for i, j in jobs.items():
            if j["phase"] == "running" and j.get("model"):
                self.modelled[i] = j


def _submit(srv, run, spec):
    try:
        return srv.submit(spec)
    except ValueError as e:
        missing = {k for k in NEW_SPEC_KEYS if k in str(e)}
        if not missing:
            raise
        run.lacks |= missing  # an older daemon: test_daemon_keeps_the_checkpoint_protocol fails on it
        return srv.submit({k: v for k, v in spec.items() if k not in NEW_SPEC_KEYS})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Two fake GPUs; job a (1-2 GPUs) runs alone, job b (1 GPU) arrives, b ends, a gets its GPU back."""
    binary = serve_harness.default_bin()
    if not binary.is_file():
        pytest.fail(f"no gpuplan binary at {binary}: build it (make build-release) or set GPUPLAN_BIN")
    tmp = tmp_path_factory.mktemp("serve")
    run = Run()
    run.state = tmp / "state"
    srv = serve_harness.Serve(run.state, ["--devices", "fake:1x2", "--interval", "1s", "--planner", "gpuplan-mip",
                                          "--grace", "20s", "--backoff", "1s", "--time-limit", "2s"])
    try:
        a = _submit(srv, run, _spec("numpy-a", A_EXAMPLES, 2, 64))
        srv.wait_for("job a to report steps", lambda js: js[a]["phase"] == "running" and js[a]["step"] >= 20, 40,
                     on_poll=run.watch)
        b = _submit(srv, run, _spec("numpy-b", B_EXAMPLES, 1, 32))
        srv.wait_for("both jobs to complete", lambda js: all(js[i]["phase"] in serve_harness.FINAL for i in (a, b)), 150,
                     on_poll=run.watch)
        time.sleep(3)  # three more rounds: nothing may relaunch a completed job
        run.views = srv.jobs()
        run.cli = {j["id"]: j for j in json.loads(srv.cli("jobs", "--format", "json"))}
        run.ids = (a, b)
        for i in (a, b):
            run.recs[i] = {n: records(srv.rank_log(i, n)) for n in srv.attempts(i)}
        run.done_files = {i: sorted(p.name for p in (srv.job_dir(i) / "checkpoint").iterdir()) for i in (a, b)}
    finally:
        srv.close()
    return run


def test_numpy_jobs_complete_exactly_once(served):
    for i in served.ids:
        v = served.views[i]
        assert v["phase"] == "completed" and v["crashes"] == 0, v
        attempts = served.recs[i]
        assert v["attempts"] == len(attempts), "no launch after completion"
        done = [(n, r) for n, rs in attempts.items() for r in rs if r["event"] == "done"]
        assert len(done) == 1 and done[0][0] == max(attempts), f"one done, in the last attempt: {done}"
        assert "gpuplan-done" in served.done_files[i], served.done_files[i]


def test_a_stopped_job_resumes_from_its_checkpoint_with_its_new_world_size(served):
    a, _ = served.ids
    v, attempts = served.views[a], served.recs[a]
    assert v["restarts"] >= 1 and len(attempts) >= 2, f"job a was never re-allocated: {v}"
    worlds = [next(r for r in attempts[n] if r["event"] == "start")["world"] for n in sorted(attempts)]
    assert len(set(worlds)) > 1, f"job a kept one world size: {worlds}"
    prev = None
    for n in sorted(attempts):
        recs = attempts[n]
        if prev is not None:
            # The previous attempt stopped on SIGTERM: checkpoint at a step boundary, then exit.
            stop_ck = [r for r in prev if r["event"] == "checkpoint"][-1]
            assert stop_ck["reason"] == "stop" and prev[-1]["event"] == "stop", prev[-3:]
            resume = next(r for r in recs if r["event"] == "resume")
            assert (resume["step"], resume["progress"]) == (stop_ck["step"], stop_ck["progress"])
            start = next(r for r in recs if r["event"] == "start")
            assert resume["world"] == start["world"] and resume["from_world"] == stop_ck_world(prev)
            first = next(r for r in recs if r["event"] == "step")
            assert first["step"] == resume["step"] + 1, "no step lost or repeated"
        prev = recs


def stop_ck_world(recs):
    return next(r for r in recs if r["event"] == "start")["world"]


def test_the_loss_falls_and_continues_across_restarts(served):
    a, _ = served.ids
    evals = [(n, r["eval_loss"]) for n, rs in sorted(served.recs[a].items()) for r in rs if "eval_loss" in r]
    initial, final = evals[0][1], evals[-1][1]
    assert final < 0.6 * initial, evals
    for (n0, before), (n1, after) in zip(evals, evals[1:]):
        if n1 != n0:
            # The first evaluation after a restart continues the curve, far from the fresh model's.
            assert after < initial - 0.5 * (initial - before), (n0, before, n1, after)


def _reported(served, i):
    return [r for rs in served.recs[i].values() for r in rs if r["event"] == "report" and "grad_var" in r]


def _is_reported(grad, reported):
    return any(math.isclose(grad["sqr"], r["grad_sqr"], rel_tol=1e-9) and math.isclose(grad["var"], r["grad_var"], rel_tol=1e-9)
               for r in reported)


def test_the_daemon_fits_the_jobs_own_measurements(served):
    """While job a runs, the planner's model of it has its step-time fit and the gradient statistics it reported.

    (Job b runs a few seconds: both jobs measure their noise, only a's model is checked.)
    """
    for i in served.ids:
        assert _reported(served, i), "the job measured its gradient noise (replicas or halves)"
    a, _ = served.ids
    reported = _reported(served, a)
    view = served.modelled.get(a)
    assert view is not None, "job a never showed a fitted model while it ran"
    grad = view["model"]["grad"]
    # Not the daemon's noiseless default: statistics the job itself sent.
    assert grad["var"] > 0 and _is_reported(grad, reported), (grad, reported[-3:])
    assert view["model"]["perf"]["beta_c"] > 0, view["model"]["perf"]


def test_daemon_records_checkpoints_and_total_progress(served):
    """The daemon's side of the checkpoint keys: job file, reports, `gpuplan jobs --format json`.

    Needs the daemon change of issue 52 (a daemon without it fails here).
    """
    assert not served.lacks, f"the daemon refused the job-file keys {sorted(served.lacks)}"
    for i, total in zip(served.ids, (A_EXAMPLES, B_EXAMPLES)):
        view = served.cli[i]
        missing = [k for k in ("checkpoint_progress", "checkpoint_unix_s", "total_progress") if k not in view]
        assert not missing, f"`gpuplan jobs --format json` lacks {missing}: {sorted(view)}"
        logged = [r for rs in served.recs[i].values() for r in rs if r["event"] == "checkpoint"]
        # The last checkpoint the job wrote and reported (its stop or periodic one).
        assert view["checkpoint_progress"] == logged[-1]["progress"], (view["checkpoint_progress"], logged[-3:])
        assert view["submit_unix_s"] <= view["checkpoint_unix_s"] <= view["finished_unix_s"]
        assert view["total_progress"] == total


def test_daemon_shows_its_fit_and_the_jobs_measurements(served):
    """`gpuplan jobs --format json` per job: `model` (the fit), `observations`, `grad`, from the job's own reports.

    The listing shows a fit the daemon has made (it does not fit to answer): job a's, which ran
    through rounds after its reports; job b, a few seconds long, may have ended before any round
    fitted it, so its `model` may be null, but its measurements are there.
    """
    a, _ = served.ids
    for i in served.ids:
        view = served.cli[i]
        missing = [k for k in ("model", "observations", "grad") if k not in view]
        assert not missing, f"`gpuplan jobs --format json` lacks {missing}: {sorted(view)}"
        model = view["model"] or (served.modelled.get(i) or {}).get("model")
        if i == a:
            assert model and model["perf"]["beta_c"] > 0, model
        ran_with = {r["local_bsz"] for rs in served.recs[i].values() for r in rs if r["event"] == "report" and "local_bsz" in r}
        assert view["observations"] and {o["local_bsz"] for o in view["observations"]} <= ran_with, view["observations"]
        assert _is_reported(view["grad"], _reported(served, i)), view["grad"]
