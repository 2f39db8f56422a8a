"""Drive a real `gpuplan serve` from Python (standard library only).

Used by python/tests/test_job.py (the numpy trainer, `make test`) and
scripts/real_training.py (the PyTorch scenario, `make test-torch`): start the
daemon on fake GPUs in a state directory, submit jobs, read the job table and
each attempt's rank logs, inject GPU faults, and stop everything cleanly
(jobs run on while the daemon is down, so they are cancelled first).
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FINAL = ("completed", "failed", "cancelled")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_bin():
    if os.environ.get("GPUPLAN_BIN"):
        return Path(os.environ["GPUPLAN_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache/gpuplan/target"))
    return Path(target) / "release/gpuplan"


class Serve:
    """One `gpuplan serve` on loopback; ``flags`` are serve's own (--devices, --interval, ...)."""

    def __init__(self, state, flags, binary=None, log=None):
        self.bin = Path(binary or default_bin())
        if not self.bin.is_file():
            raise FileNotFoundError(f"no gpuplan binary at {self.bin}: build it (make build-release) or set GPUPLAN_BIN")
        self.state = Path(state)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log or self.state.parent / "serve.log")
        self.state.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "GPUPLAN_TOKEN"}
        env.setdefault("GPUPLAN_LOG", "info")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(self.bin), "serve", *flags, "--state", str(self.state), "--listen", f"127.0.0.1:{self.port}"],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/v1/health", timeout=1).read()
                break
            except (OSError, urllib.error.URLError):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"gpuplan serve exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError("gpuplan serve did not come up in 30 s")
                time.sleep(0.05)
        self.token = (self.state / "token").read_text().strip()

    def req(self, method, path, body=None):
        """(status, parsed JSON reply) of one admin call."""
        data = None if body is None else json.dumps(body).encode()
        r = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def submit(self, spec):
        code, v = self.req("POST", "/v1/jobs", spec)
        if code != 201:
            raise ValueError(f"submit refused ({code}): {v}")
        return v["id"]

    def jobs(self):
        code, v = self.req("GET", "/v1/jobs")
        assert code == 200, v
        return {j["id"]: j for j in v}

    def cli(self, *args):
        """`gpuplan ARGS --server URL` with the admin token; its stdout."""
        env = {**os.environ, "GPUPLAN_TOKEN": self.token}
        p = subprocess.run([str(self.bin), *args, "--server", self.url], env=env, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"gpuplan {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p.stdout

    def fault(self, uuid, fault):
        code, v = self.req("POST", "/v1/devices/fault", {"uuid": uuid, "fault": fault})
        assert code == 200, v

    def wait_for(self, what, pred, timeout_s, every_s=0.2, on_poll=None):
        """Poll the job table until ``pred(jobs)`` is truthy; its value. Fails naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            jobs = self.jobs()
            if on_poll:
                on_poll(jobs)
            v = pred(jobs)
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}: {json.dumps(jobs)[:3000]}")
            time.sleep(every_s)

    def job_dir(self, job_id):
        return self.state / "jobs" / str(job_id)

    def attempts(self, job_id):
        """The attempt numbers that have a directory, in order."""
        d = self.job_dir(job_id)
        return sorted(int(p.name.split("-")[1]) for p in d.glob("attempt-*") if p.name.split("-")[1].isdigit())

    def rank_log(self, job_id, attempt, rank=0):
        p = self.job_dir(job_id) / f"attempt-{attempt}" / f"rank-{rank}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def close(self):
        """Cancel what still runs, wait for it, then stop the daemon."""
        try:
            if self.proc.poll() is None:
                for j in self.jobs().values():
                    if j["phase"] not in FINAL:
                        self.req("POST", f"/v1/jobs/{j['id']}/cancel")
                self.wait_for("every job to end", lambda js: all(j["phase"] in FINAL for j in js.values()), 60)
        finally:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self._log.close()
