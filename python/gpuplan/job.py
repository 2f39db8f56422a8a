"""The job side of the gpuplan job protocol (docs/job-protocol.md), in pure Python.

A training script run by ``gpuplan serve`` uses it to read what the daemon
chose (world size, batch, micro-batch, accumulation steps), to scale its
learning rate, to measure and report its step times and gradient statistics,
to stop together on SIGTERM with a checkpoint, to resume from it, and to mark
itself done. Run outside gpuplan it trains as one rank and reports nothing.

It needs the standard library only: numpy is imported by
:func:`grad_noise` alone, torch by the ``torch_*`` helpers alone, and the
Rust extension (``gpuplan._gpuplan``) not at all, so a job can use it from a
plain checkout (``PYTHONPATH=python``)::

    from gpuplan.job import Job

    with Job(total_progress=200_000, checkpoint_interval_s=60) as job:
        state = job.restore(default=new_state())       # new_state() at the first attempt
        lr = job.lr(0.1)                               # scaled to job.batch_size
        while job.progress < job.total_progress:
            if job.should_stop():                      # SIGTERM on any rank
                job.stop(state)                        # checkpoint, report, exit 143
            with job.step() as st:                     # times the step, reports every N
                sizes = job.split_sizes()              # micro-batches, or two halves of one
                grads = []
                for n in sizes:
                    with st.accum():                   # compute-only part
                        grads.append(compute(n))
                job.report_gradients(grads, sizes)     # the gradient noise Pollux needs
                st.loss = ...
            if job.checkpoint_due():
                job.checkpoint(state)                  # rank 0 writes, atomically
        job.done()                                     # done-file; SIGTERM ignored

See examples/numpy_train.py (numpy, ranks joined by :class:`StarGroup`) and
examples/pytorch_ddp.py (torch.distributed through :func:`torch_init`).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    "JobEnv",
    "Job",
    "Step",
    "GradientNoise",
    "Reporter",
    "StarGroup",
    "grad_noise",
    "grad_noise_from_norms",
    "lr_scale",
    "catch_sigterm",
    "read_log",
    "torch_init",
    "torch_train_step",
]

#: Exit status after a stop on SIGTERM (128 + 15), as the protocol expects.
EXIT_STOPPED = 143
#: Prefix of the JSON lines the job logs on rank 0 (steps, checkpoints, stops).
LOG_PREFIX = "gpuplan.job "
#: Report keys a daemon older than the checkpoint protocol refuses.
NEW_REPORT_KEYS = ("checkpoint_progress", "checkpoint_step", "checkpoints_on_stop", "total_progress")


_sigterm = threading.Event()  # set by the SIGTERM handler, read by Job.should_stop


def _on_sigterm(signum: int, frame: Any) -> None:
    _sigterm.set()


def catch_sigterm() -> None:
    """From now on SIGTERM only sets a flag that :meth:`Job.should_stop` reads.

    :class:`Job` installs this when it is built; a script that imports
    something slow first (torch takes seconds) calls it before, so a stop
    that arrives during the import is not fatal to a rank: every rank then
    stops at the same step, after the checkpoint. Main thread only.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _env_int(environ: Dict[str, str], key: str, default: Optional[int]) -> Optional[int]:
    value = environ.get(key, "")
    return int(value) if value.strip() else default


@dataclass(frozen=True)
class JobEnv:
    """What gpuplan gives one rank, read from its environment (docs/job-protocol.md).

    Every field has a default for a run outside gpuplan: one rank, no
    reports, no done-file, the batch the script asks for.
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    #: Total batch = world_size x local_bsz x (accum_steps + 1).
    batch_size: Optional[int] = None
    local_bsz: Optional[int] = None
    accum_steps: int = 0
    checkpoint_dir: Optional[str] = None
    done_file: Optional[str] = None
    report_url: Optional[str] = None
    token_file: Optional[str] = None
    attempt: int = 1
    job_id: Optional[str] = None
    job_name: Optional[str] = None
    node: Optional[str] = None

    @classmethod
    def from_environ(cls, environ: Optional[Dict[str, str]] = None) -> "JobEnv":
        """Read the variables gpuplan sets; absent ones take the defaults."""
        e = dict(os.environ if environ is None else environ)
        return cls(
            rank=_env_int(e, "RANK", 0) or 0,
            local_rank=_env_int(e, "LOCAL_RANK", 0) or 0,
            world_size=_env_int(e, "WORLD_SIZE", 1) or 1,
            master_addr=e.get("MASTER_ADDR") or "127.0.0.1",
            master_port=_env_int(e, "MASTER_PORT", 29500) or 29500,
            batch_size=_env_int(e, "GPUPLAN_BATCH_SIZE", None),
            local_bsz=_env_int(e, "GPUPLAN_LOCAL_BSZ", None),
            accum_steps=_env_int(e, "GPUPLAN_ACCUM_STEPS", 0) or 0,
            checkpoint_dir=e.get("GPUPLAN_CHECKPOINT_DIR") or None,
            done_file=e.get("GPUPLAN_DONE_FILE") or None,
            report_url=e.get("GPUPLAN_REPORT_URL") or None,
            token_file=e.get("GPUPLAN_JOB_TOKEN_FILE") or None,
            attempt=_env_int(e, "GPUPLAN_ATTEMPT", 1) or 1,
            job_id=e.get("GPUPLAN_JOB_ID") or None,
            job_name=e.get("GPUPLAN_JOB_NAME") or None,
            node=e.get("GPUPLAN_NODE") or None,
        )

    @property
    def managed(self) -> bool:
        """Whether gpuplan started this rank (it has somewhere to report)."""
        return self.report_url is not None


# --- Gradient statistics (Pollux, Qiao et al., OSDI'21; AdaptDL's estimator) ---


def grad_noise_from_norms(
    mean_sqr_norm: float, sqr_norm_of_mean: float, n: int, examples_each: float, m0: float
) -> Tuple[float, float]:
    """|g|^2 and tr(Sigma) at batch ``m0`` from ``n`` independent gradient estimates.

    ``mean_sqr_norm`` is the mean over the n estimates of |g_i|^2 (each the
    mean gradient of ``examples_each`` examples; for unequal groups pass the
    harmonic mean of their sizes), ``sqr_norm_of_mean`` is |mean_i g_i|^2.
    Each g_i has variance tr(Sigma_1)/b about the true g, so
    E[mean |g_i|^2 - |mean g_i|^2] = tr(Sigma_1)(n-1)/(n b): both moments are
    unbiased. The variance is returned per batch ``m0`` (the job's initial
    batch), the ``grad_var`` the daemon expects; its noise scale is
    m0 * var / sqr. Either value may come out negative on noisy estimates:
    smooth them (:class:`GradientNoise`) before use.
    """
    if n < 2:
        raise ValueError("gradient noise needs at least 2 independent gradients")
    spread = (mean_sqr_norm - sqr_norm_of_mean) * n / (n - 1)  # tr(Sigma_1) / b
    per_example = spread * examples_each  # tr(Sigma_1)
    sqr = sqr_norm_of_mean - per_example / (n * examples_each)
    return sqr, per_example / m0


def grad_noise(grads: Sequence[Any], examples_each: Union[float, Sequence[float]], m0: float) -> Tuple[float, float]:
    """:func:`grad_noise_from_norms` on flat gradient arrays (numpy, or anything numpy reads).

    ``grads`` are n >= 2 independent mean gradients: one per replica, per
    accumulation micro-batch, or per half of one micro-batch;
    ``examples_each`` their batch size (one number, or one per gradient:
    the harmonic mean is exact for two halves of unequal size).
    """
    import numpy as np

    g = np.stack([np.asarray(x, dtype=np.float64).ravel() for x in grads])
    n = g.shape[0]
    if isinstance(examples_each, (int, float)):
        b = float(examples_each)
    else:
        sizes = [float(s) for s in examples_each]
        b = len(sizes) / sum(1.0 / s for s in sizes)
    mean_sqr = float(np.mean(np.einsum("ij,ij->i", g, g)))
    mean = g.mean(axis=0)
    return grad_noise_from_norms(mean_sqr, float(mean @ mean), n, b, m0)


class GradientNoise:
    """Exponential moving averages of |g|^2 and tr(Sigma), bias-corrected.

    Single estimates are noisy (and can be negative), so, as AdaptDL does,
    the job reports and scales its learning rate by their smoothed values.
    ``smoothing`` is the weight of the past per update.
    """

    def __init__(self, smoothing: float = 0.9) -> None:
        self.smoothing = smoothing
        self.sqr = 0.0
        self.var = 0.0
        self.weight = 0.0  # 1 - smoothing^updates: the bias correction

    def update(self, sqr: float, var: float) -> None:
        if not (math.isfinite(sqr) and math.isfinite(var)):
            return
        s = self.smoothing
        self.sqr = s * self.sqr + (1 - s) * sqr
        self.var = s * self.var + (1 - s) * var
        self.weight = s * self.weight + (1 - s)

    #: Floor of |g|^2 relative to tr(Sigma): caps the noise scale at a million times M0.
    SQR_FLOOR = 1e-6

    def value(self) -> Optional[Tuple[float, float]]:
        """(|g|^2, tr(Sigma)) smoothed, or None before any usable update.

        As AdaptDL does, negative averages are clamped: tr(Sigma) at 0, and
        |g|^2 (below the noise of its estimate late in training) at
        ``SQR_FLOOR`` times tr(Sigma), so the daemon's noise scale stays finite.
        """
        if self.weight <= 0:
            return None
        sqr, var = self.sqr / self.weight, max(self.var / self.weight, 0.0)
        sqr = max(sqr, self.SQR_FLOOR * var)
        if sqr <= 0:
            return None
        return sqr, var

    def state(self) -> Dict[str, float]:
        return {"sqr": self.sqr, "var": self.var, "weight": self.weight}

    def load(self, st: Dict[str, float]) -> None:
        self.sqr, self.var, self.weight = float(st["sqr"]), float(st["var"]), float(st["weight"])


# --- Learning-rate scaling ---

LR_RULES = ("none", "linear", "sqrt", "adascale")


def lr_scale(rule: str, batch_size: float, m0: float, noise: Optional[Tuple[float, float]] = None) -> float:
    """The factor a learning rate tuned at batch ``m0`` is multiplied by at ``batch_size``.

    With S = batch_size / m0:

    - ``none``: 1.
    - ``linear``: S (Goyal et al., 2017), for SGD at moderate S.
    - ``sqrt``: sqrt(S) (Krizhevsky, 2014), the rule Pollux's paper (Qiao et
      al., OSDI'21) discusses for Adam-type optimizers, where AdaScale's
      gain does not apply; the library's default, as the safer of the two
      without statistics.
    - ``adascale``: AdaScale's gain r = (var + sqr) / (var / S + sqr)
      (Johnson et al., 2020), the rule Pollux uses for SGD: between 1 (no
      gradient noise: a larger batch does not help) and S (pure noise: it
      helps linearly). ``noise`` is (|g|^2, tr(Sigma) at m0); without it,
      1 (no statistics yet).
    """
    s = batch_size / m0
    if rule == "none":
        return 1.0
    if rule == "linear":
        return s
    if rule == "sqrt":
        return math.sqrt(s)
    if rule == "adascale":
        if noise is None:
            return 1.0
        sqr, var = noise
        gain = (var + sqr) / (var / s + sqr)
        return min(max(gain, min(1.0, s)), max(1.0, s))
    raise ValueError(f"unknown learning-rate rule {rule!r}: one of {', '.join(LR_RULES)}")


# --- Reports ---


class Reporter:
    """Posts reports to the daemon from a background thread, never blocking training.

    A report that fails to arrive (the daemon restarting, a time-out) is
    merged into the next one, so a checkpoint's keys reach the daemon with
    the next report that does; failures are logged once per run of failures.
    A daemon older than the checkpoint protocol answers 400 to its keys: the
    reporter then drops them (until the daemon is next unreachable, when it
    may come back newer) and sends the rest, so step times still arrive. A
    400 for anything else is logged and the report dropped: sending it again
    would get the same answer.
    """

    def __init__(self, url: Optional[str], token_file: Optional[str], timeout_s: float = 2.0) -> None:
        self.url, self.token_file, self.timeout_s = url, token_file, timeout_s
        self.legacy = False  # the daemon refused the checkpoint keys
        self.sent = 0
        self.failed = 0
        self._pending: Dict[str, Any] = {}
        self._carry: Dict[str, Any] = {}  # what failed, sent with the next report
        self._busy = False
        self._failing = False
        self._cv = threading.Condition()
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        if url:
            self._thread = threading.Thread(target=self._run, name="gpuplan-reporter", daemon=True)
            self._thread.start()

    def submit(self, body: Dict[str, Any]) -> None:
        """Queue ``body``; keys of a report not yet sent are kept unless ``body`` sets them anew."""
        if not self.url:
            return
        with self._cv:
            if not self._pending and self._carry:
                self._pending, self._carry = self._carry, {}
            self._pending.update(body)
            self._cv.notify()

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for what is queued to be sent (or given up); True if it was."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout_s: float = 2.0) -> None:
        self.flush(timeout_s)
        with self._cv:
            self._closed = True
            self._cv.notify()

    def _token(self) -> str:
        # Read at each report: the token lives in a 0600 file, never in the environment.
        if not self.token_file:
            return ""
        with open(self.token_file) as f:
            return f.read().strip()

    def _post(self, body: Dict[str, Any]) -> Tuple[int, str]:
        req = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token()}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def _strip(self, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """``body`` for an older daemon: no checkpoint keys, and nothing if no step time is left."""
        out = {k: v for k, v in body.items() if k not in NEW_REPORT_KEYS}
        return out if "step_time_s" in out and "local_bsz" in out else None

    def _log(self, msg: str) -> None:
        print(f"gpuplan.job: {msg}", file=sys.stderr, flush=True)

    def _keep(self, body: Dict[str, Any]) -> None:
        """Hold a report that did not arrive for the next one (whose own keys win)."""
        with self._cv:
            self._carry = {**self._carry, **body}

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if self._closed and not self._pending:
                    return
                body, self._pending = self._pending, {}
                self._busy = True
            try:
                self._send(body)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _send(self, body: Dict[str, Any]) -> None:
        to_send = self._strip(body) if self.legacy else body
        if to_send is None:
            return
        try:
            code, text = self._post(to_send)
        except Exception as e:  # the daemon is down or restarting: keep it for the next report
            self.failed += 1
            self.legacy = False  # it may come back newer
            if not self._failing:
                self._log(f"report failed ({e}); retrying with the next report")
            self._failing = True
            self._keep(body)
            return
        if code == 400 and not self.legacy and "unknown field" in text and any(k in body for k in NEW_REPORT_KEYS):
            self.legacy = True
            self._log("the daemon does not know the checkpoint keys (an older gpuplan): sending step reports without them")
            self._send(body)
            return
        if code >= 500:
            self.failed += 1
            if not self._failing:
                self._log(f"report refused ({code}: {text.strip()}); retrying with the next report")
            self._failing = True
            self._keep(body)
            return
        if code >= 400:
            self.failed += 1
            if not self._failing:
                self._log(f"report refused ({code}: {text.strip()}); dropped")
            self._failing = True
            return
        if self._failing:
            self._log("reports arrive again")
        self._failing = False
        self.sent += 1


# --- Ranks without torch: a small TCP collective through rank 0 ---


class StarGroup:
    """All ranks of an attempt joined through rank 0 over TCP (MASTER_ADDR:MASTER_PORT).

    For trainers without torch.distributed (the numpy example): every
    collective sends each rank's bytes to rank 0, which sends everyone the
    list. Fine for small models and a handful of ranks; a rank that dies
    makes the others fail (a crash, which gpuplan relaunches).
    """

    _LEN = struct.Struct("!Q")

    def __init__(self, env: JobEnv, timeout_s: float = 120.0) -> None:
        self.rank, self.world = env.rank, env.world_size
        self.peers: List[socket.socket] = []
        self.sock: Optional[socket.socket] = None
        if self.world == 1:
            return
        deadline = time.monotonic() + timeout_s
        if self.rank == 0:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((env.master_addr, env.master_port))
            srv.listen(self.world)
            srv.settimeout(timeout_s)
            by_rank: Dict[int, socket.socket] = {}
            while len(by_rank) < self.world - 1:
                conn, _ = srv.accept()
                conn.settimeout(None)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                by_rank[struct.unpack("!I", self._recv_exact(conn, 4))[0]] = conn
            srv.close()
            self.peers = [by_rank[r] for r in sorted(by_rank)]
        else:
            while True:
                try:
                    s = socket.create_connection((env.master_addr, env.master_port), timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(struct.pack("!I", self.rank))
            self.sock = s

    @staticmethod
    def _recv_exact(s: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("a rank of this job went away")
            buf += chunk
        return bytes(buf)

    def _send_frame(self, s: socket.socket, data: bytes) -> None:
        s.sendall(self._LEN.pack(len(data)) + data)

    def _recv_frame(self, s: socket.socket) -> bytes:
        (n,) = self._LEN.unpack(self._recv_exact(s, 8))
        return self._recv_exact(s, n)

    def allgather(self, data: bytes) -> List[bytes]:
        """Every rank's ``data``, in rank order, on every rank."""
        if self.world == 1:
            return [data]
        if self.rank == 0:
            parts = [data] + [self._recv_frame(p) for p in self.peers]
            packed = b"".join(self._LEN.pack(len(x)) + x for x in parts)
            for p in self.peers:
                self._send_frame(p, packed)
            return parts
        assert self.sock is not None
        self._send_frame(self.sock, data)
        packed = self._recv_frame(self.sock)
        out, i = [], 0
        while i < len(packed):
            (n,) = self._LEN.unpack_from(packed, i)
            out.append(packed[i + 8 : i + 8 + n])
            i += 8 + n
        return out

    def any(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on any."""
        return any(x == b"\x01" for x in self.allgather(b"\x01" if flag else b"\x00"))

    def close(self) -> None:
        for s in self.peers + ([self.sock] if self.sock else []):
            try:
                s.close()
            except OSError:
                pass
        self.peers, self.sock = [], None


# --- The job ---


class Step:
    """One optimizer step being timed (:meth:`Job.step`).

    ``accum()`` times the compute-only parts (the daemon's ``accum_time_s``);
    ``untimed()`` leaves a part out of the step time (an evaluation for the
    log: the daemon fits training steps); set ``loss`` and ``extra`` for the
    log, and ``timed = False`` for a step whose time does not describe the
    configuration (e.g. one computed in two halves).
    """

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.accum_s: List[float] = []
        self.excluded_s = 0.0
        self.loss: Optional[float] = None
        self.timed = True
        self.extra: Dict[str, Any] = {}

    @contextmanager
    def accum(self) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.accum_s.append(time.perf_counter() - t)

    @contextmanager
    def untimed(self) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.excluded_s += time.perf_counter() - t


class Job:
    """One rank of a training job under gpuplan: its configuration, reports, stops and checkpoints.

    Arguments (all optional):

    - ``total_progress``: the progress at which training is complete, in the
      units of :attr:`progress` (examples processed, or M0-equivalent
      examples under ``adascale``); reported so the daemon can estimate
      start and finish times.
    - ``default_batch_size``: the batch outside gpuplan (default 32).
    - ``base_batch_size``: M0, the batch the learning rate was tuned at and
      the gradient variance is normalised to; default the first attempt's
      ``GPUPLAN_BATCH_SIZE`` (kept in the checkpoint; a crash before the first
      checkpoint falls back to this attempt's batch): the job file's
      ``batch_size``.
    - ``lr_rule``: how :meth:`lr` scales (:func:`lr_scale`), default ``sqrt``.
    - ``checkpoint_interval_s``: seconds between periodic checkpoints
      (:meth:`checkpoint_due`); ``None`` for none but the one on stop.
    - ``checkpoint_dir``: default ``GPUPLAN_CHECKPOINT_DIR``; without either,
      nothing is written.
    - ``report_every``: steps between reports (rank 0), default 10.
    - ``log_every``: steps between the JSON step lines on rank 0's stdout.
    - ``grad_smoothing``: weight of the past in the moving averages of the
      gradient statistics (:class:`GradientNoise`), per measurement.
    - ``group``: how ranks agree (``any(flag)``, ``close()``); :func:`torch_init`
      sets a torch one, ``"star"`` makes a :class:`StarGroup`; default none
      (one rank, or ranks that never need to agree).
    - ``save`` / ``load``: ``save(obj, path)`` and ``load(path)`` of the
      checkpoint; default pickle (``torch_init`` sets torch.save/torch.load).
    """

    CHECKPOINT_NAME = "gpuplan-checkpoint"

    def __init__(
        self,
        *,
        total_progress: Optional[float] = None,
        default_batch_size: int = 32,
        base_batch_size: Optional[int] = None,
        lr_rule: str = "sqrt",
        checkpoint_interval_s: Optional[float] = 600.0,
        checkpoint_dir: Optional[str] = None,
        checkpoints_on_stop: bool = True,
        report_every: int = 10,
        log_every: int = 1,
        grad_smoothing: float = 0.98,
        group: Any = None,
        save: Optional[Callable[[Any, str], None]] = None,
        load: Optional[Callable[[str], Any]] = None,
        report_timeout_s: float = 2.0,
        env: Optional[JobEnv] = None,
    ) -> None:
        if lr_rule not in LR_RULES:
            raise ValueError(f"unknown learning-rate rule {lr_rule!r}: one of {', '.join(LR_RULES)}")
        self.env = env or JobEnv.from_environ()
        e = self.env
        self.rank, self.local_rank, self.world_size = e.rank, e.local_rank, e.world_size
        self.accum_steps = e.accum_steps
        #: Micro-batches per optimizer step per rank (accumulation steps + 1).
        self.micro_steps = e.accum_steps + 1
        if e.batch_size is not None:
            self.batch_size = e.batch_size
            self.local_bsz = e.local_bsz or max(1, e.batch_size // (e.world_size * self.micro_steps))
        elif e.local_bsz is not None:
            self.local_bsz = e.local_bsz
            self.batch_size = e.local_bsz * e.world_size * self.micro_steps
        else:
            self.local_bsz = max(1, default_batch_size // (e.world_size * self.micro_steps))
            self.batch_size = self.local_bsz * e.world_size * self.micro_steps
        self._m0_given = base_batch_size
        self.m0 = float(base_batch_size or self.batch_size)
        self.total_progress = total_progress
        self.lr_rule = lr_rule
        self.checkpoint_interval_s = checkpoint_interval_s
        self.checkpoint_dir = checkpoint_dir or e.checkpoint_dir
        self.checkpoints_on_stop = checkpoints_on_stop and self.checkpoint_dir is not None
        self.report_every = max(1, report_every)
        self.log_every = max(1, log_every)
        self.noise = GradientNoise(grad_smoothing)
        self._save = save or _pickle_save
        self._load = load or _pickle_load
        #: Optimizer steps done (across attempts) and progress made.
        self.step_count = 0
        self.progress = 0.0
        self.epoch: Optional[int] = None
        #: (step, progress) of the checkpoint this attempt resumed from, or None.
        self.resumed_from: Optional[Tuple[int, float]] = None
        catch_sigterm()  # before joining the other ranks, which can take a while
        self.reporter = Reporter(e.report_url if e.rank == 0 else None, e.token_file, report_timeout_s)
        self.group = StarGroup(e) if group == "star" else group
        self._last_ckpt = time.monotonic()
        self._times: List[Tuple[float, Optional[float]]] = []
        self._attempt_steps = 0
        self._t_start = time.time()

    # -- context --

    def __enter__(self) -> "Job":
        self.log("start", attempt=self.env.attempt, world=self.world_size, batch=self.batch_size,
                 local_bsz=self.local_bsz, accum_steps=self.accum_steps, node=self.env.node)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Send what is queued (a short wait) and leave the group."""
        self.reporter.close(2.0)
        if self.group is not None and hasattr(self.group, "close"):
            self.group.close()

    @property
    def stop_requested(self) -> bool:
        """Whether this rank got SIGTERM (see :func:`catch_sigterm`)."""
        return _sigterm.is_set()

    @property
    def is_chief(self) -> bool:
        """Rank 0: the one that reports, writes checkpoints and the done-file."""
        return self.rank == 0

    # -- configuration --

    def lr(self, base_lr: float) -> float:
        """``base_lr`` (tuned at batch M0) scaled to this attempt's batch by ``lr_rule``.

        Call it every step under ``adascale`` (the gain follows the gradient
        statistics); under the other rules it is fixed for the attempt.
        """
        return base_lr * lr_scale(self.lr_rule, self.batch_size, self.m0, self.noise.value())

    def split_sizes(self) -> List[int]:
        """The pieces this rank computes one gradient each for, in examples.

        ``micro_steps`` micro-batches of ``local_bsz``; on one rank without
        accumulation, the two halves of the micro-batch, so that there are
        two independent gradients to measure the noise from (with several
        ranks, the replicas' gradients serve).
        """
        if self.micro_steps > 1 or self.world_size > 1 or self.local_bsz < 2:
            return [self.local_bsz] * self.micro_steps
        return [self.local_bsz // 2, self.local_bsz - self.local_bsz // 2]

    def progress_per_step(self) -> float:
        """What one optimizer step adds to :attr:`progress`.

        The batch size in examples; under ``adascale`` the gain times M0
        (AdaScale's scale-invariant iterations, in examples at M0), so that
        a larger batch counts only as much as it helps.
        """
        if self.lr_rule == "adascale":
            return lr_scale("adascale", self.batch_size, self.m0, self.noise.value()) * self.m0
        return float(self.batch_size)

    # -- stopping --

    def should_stop(self) -> bool:
        """True on every rank once any rank got SIGTERM (call it once per step on every rank)."""
        if self.group is not None and self.world_size > 1:
            return bool(self.group.any(self.stop_requested))
        return self.stop_requested

    def stop(self, state: Any = None) -> None:
        """After SIGTERM: checkpoint ``state`` (rank 0), report it, and exit 143."""
        if self.checkpoints_on_stop and state is not None:
            self.checkpoint(state, reason="stop")
        self.log("stop", step=self.step_count, progress=self.progress)
        self.reporter.flush(5.0)
        self.close()
        sys.stdout.flush()
        raise SystemExit(EXIT_STOPPED)

    def done(self) -> None:
        """Training is complete: ignore SIGTERM from now on, and create the done-file (rank 0).

        The done-file makes gpuplan count the job complete whatever the exit
        codes; ignoring SIGTERM keeps a late stop from turning the exit into
        143 while the interpreter shuts down (docs/job-protocol.md).
        """
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.is_chief and self.env.done_file:
            open(self.env.done_file, "w").close()
        self.log("done", step=self.step_count, progress=self.progress, wall_s=round(time.time() - self._t_start, 3))
        self._report_now(final=True)
        self.reporter.flush(5.0)

    # -- steps --

    @contextmanager
    def step(self) -> Iterator[Step]:
        """Time one optimizer step; on leaving it, count it, log it and report every ``report_every``."""
        st = Step()
        yield st
        elapsed = time.perf_counter() - st.t0 - st.excluded_s
        self.step_count += 1
        self._attempt_steps += 1
        self.progress += self.progress_per_step()
        # An attempt's first step warms up (allocation, first collectives): not timed.
        if st.timed and self._attempt_steps > 1:
            accum = sum(st.accum_s) / len(st.accum_s) if st.accum_s else None
            self._times.append((elapsed, accum))
        if self.step_count % self.log_every == 0:
            self.log("step", step=self.step_count, loss=st.loss, progress=self.progress, world=self.world_size,
                     batch=self.batch_size, step_time_s=round(elapsed, 6), **st.extra)
        if self.step_count % self.report_every == 0:
            self._report_now()

    def report_gradients(
        self,
        grads: Optional[Sequence[Any]] = None,
        examples_each: Union[float, Sequence[float], None] = None,
        *,
        sqr: Optional[float] = None,
        var: Optional[float] = None,
    ) -> None:
        """Add one gradient-noise measurement, reported (smoothed) with the next report.

        Either ``grads`` (n >= 2 independent flat gradients, each the mean over
        ``examples_each`` examples: per replica, per micro-batch, or per half
        of a micro-batch; :func:`grad_noise`) or ``sqr`` and ``var`` already
        computed (:func:`grad_noise_from_norms`, normalised to :attr:`m0`).
        A single gradient is ignored: it has no spread.
        """
        if grads is not None:
            if examples_each is None:
                raise ValueError("report_gradients: give examples_each with grads")
            if len(grads) < 2:
                return  # one gradient has no spread to measure (see split_sizes)
            sqr, var = grad_noise(grads, examples_each, self.m0)
        if sqr is None or var is None:
            raise ValueError("report_gradients: give grads, or sqr and var")
        self.noise.update(sqr, var)

    def _report_now(self, final: bool = False) -> None:
        body: Dict[str, Any] = {"step": self.step_count, "progress": self.progress}
        if self._times:
            body["step_time_s"] = sum(t for t, _ in self._times) / len(self._times)
            accums = [a for _, a in self._times if a is not None]
            if accums:
                body["accum_time_s"] = sum(accums) / len(accums)
            body["local_bsz"] = self.local_bsz
            body["accum_steps"] = self.accum_steps
            self._times = []
        noise = self.noise.value()
        if noise is not None:
            body["grad_sqr"], body["grad_var"] = noise
        if self.epoch is not None:
            body["epoch"] = self.epoch
        if self.total_progress is not None:
            body["total_progress"] = self.total_progress
        if self.checkpoints_on_stop:
            body["checkpoints_on_stop"] = True
        if "step_time_s" in body or final:
            self.reporter.submit(body)
            self.log("report", **body)

    # -- checkpoints --

    @property
    def checkpoint_path(self) -> Optional[str]:
        return os.path.join(self.checkpoint_dir, self.CHECKPOINT_NAME) if self.checkpoint_dir else None

    def checkpoint_due(self) -> bool:
        """Whether ``checkpoint_interval_s`` has passed since the last checkpoint (rank 0 decides alone)."""
        return (
            self.is_chief
            and self.checkpoint_path is not None
            and self.checkpoint_interval_s is not None
            and time.monotonic() - self._last_ckpt >= self.checkpoint_interval_s
        )

    def checkpoint(self, state: Any, reason: str = "periodic") -> None:
        """Write ``state`` with the job's own counters (rank 0; atomic: tmp file, fsync, rename) and report it."""
        self._last_ckpt = time.monotonic()
        path = self.checkpoint_path
        if not self.is_chief or path is None:
            return
        meta = {
            "step": self.step_count,
            "progress": self.progress,
            "epoch": self.epoch,
            "m0": self.m0,
            "noise": self.noise.state(),
            "world_size": self.world_size,
            "batch_size": self.batch_size,
            "attempt": self.env.attempt,
            "unix_s": time.time(),
        }
        tmp = f"{path}.tmp.{os.getpid()}"
        self._save({"gpuplan": meta, "state": state}, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.log("checkpoint", step=self.step_count, progress=self.progress, reason=reason)
        body: Dict[str, Any] = {"checkpoint_progress": self.progress, "checkpoint_step": self.step_count}
        if self.checkpoints_on_stop:
            body["checkpoints_on_stop"] = True
        if self.total_progress is not None:
            body["total_progress"] = self.total_progress
        self.reporter.submit(body)

    def restore(self, default: Any = None) -> Any:
        """The state of the last checkpoint (counters, M0 and gradient statistics restored too), else ``default``."""
        path = self.checkpoint_path
        if path is None or not os.path.exists(path):
            self.log("fresh", step=0)
            return default
        saved = self._load(path)
        meta = saved["gpuplan"]
        self.step_count = int(meta["step"])
        self.progress = float(meta["progress"])
        self.epoch = meta.get("epoch")
        if self._m0_given is None:
            self.m0 = float(meta["m0"])
        self.noise.load(meta["noise"])
        self.resumed_from = (self.step_count, self.progress)
        self.log("resume", step=self.step_count, progress=self.progress, from_world=meta.get("world_size"),
                 from_batch=meta.get("batch_size"), world=self.world_size, batch=self.batch_size)
        return saved["state"]

    # -- log --

    def log(self, event: str, **fields: Any) -> None:
        """One JSON line on rank 0's stdout (``gpuplan.job {...}``): what the job did, for plots and tests."""
        if not self.is_chief:
            return
        rec = {"event": event, "t": round(time.time(), 3), "attempt": self.env.attempt}
        rec.update({k: v for k, v in fields.items() if v is not None})
        print(LOG_PREFIX + json.dumps(rec), flush=True)


def _pickle_save(obj: Any, path: str) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def _pickle_load(path: str) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)


def read_log(lines: Sequence[str]) -> List[Dict[str, Any]]:
    """The records a job logged (:meth:`Job.log`) among a rank log's lines."""
    out = []
    for line in lines:
        i = line.find(LOG_PREFIX)
        if i >= 0:
            try:
                out.append(json.loads(line[i + len(LOG_PREFIX) :]))
            except ValueError:
                pass
    return out


# --- torch helpers (torch imported here only) ---


class _TorchGroup:
    """Agreement across ranks through torch.distributed (all_reduce of a flag)."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def any(self, flag: bool) -> bool:
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def torch_init(job: Job, backend: Optional[str] = None) -> Any:
    """Join the attempt's ranks with torch.distributed and return this rank's device.

    NCCL on the GPU named by LOCAL_RANK when CUDA is available, gloo on the
    CPU otherwise (rendezvous ``env://``: MASTER_ADDR/PORT, RANK,
    WORLD_SIZE). Checkpoints become torch.save/torch.load files (mapped to
    this device), and :meth:`Job.should_stop` agrees across ranks.
    """
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{job.local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if job.world_size > 1 and not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", job.env.master_addr)
        os.environ.setdefault("MASTER_PORT", str(job.env.master_port))
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"), init_method="env://",
                                rank=job.rank, world_size=job.world_size)
        job.group = _TorchGroup(device)
    job._save = lambda obj, path: torch.save(obj, path)
    job._load = lambda path: torch.load(path, map_location=device, weights_only=False)
    return device


def torch_train_step(job: Job, st: Step, model: Any, optimizer: Any, loss_fn: Callable[[Any, Any], Any],
                     micro_batches: Sequence[Tuple[Any, Any]], lr: Optional[float] = None) -> float:
    """One data-parallel optimizer step with the gradient statistics Pollux needs; the mean loss.

    ``micro_batches`` are this rank's ``job.micro_steps`` (inputs, targets)
    pairs of ``job.local_bsz`` examples. Gradients are accumulated over them,
    averaged across ranks by one all_reduce of the flat gradient (what DDP
    does, without its overlap), and the optimizer stepped (at ``lr`` if
    given). The noise is measured from what the step already has: the
    replicas' gradients with several ranks, the micro-batches' with
    accumulation, and otherwise, every other step, the two halves of the
    micro-batch (that step is then not timed: two half passes are not the
    configuration's step time).
    """
    import torch
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer.zero_grad(set_to_none=False)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)

    def flat() -> Any:
        return torch.cat([p.grad.reshape(-1) for p in params])

    split = job.world_size == 1 and job.micro_steps == 1 and job.step_count % 2 == 1
    pieces: List[Tuple[Any, Any]] = []
    if split:
        x, y = micro_batches[0]
        h = max(1, len(x) // 2)
        pieces = [(x[:h], y[:h]), (x[h:], y[h:])]
        st.timed = False
    else:
        pieces = list(micro_batches)
    sizes = [len(x) for x, _ in pieces]
    total = float(sum(sizes))
    per_piece: List[Any] = []
    losses = 0.0
    prev = None
    for x, y in pieces:
        with st.accum():
            loss = loss_fn(model(x), y)
            (loss * (len(x) / total)).backward()
        losses += float(loss.detach()) * len(x) / total
        if len(pieces) > 1:
            now = flat().detach().clone()
            # Each piece's own mean gradient, from the running sum's increments.
            per_piece.append((now - (prev if prev is not None else 0)) * (total / len(x)))
            prev = now
    local = flat().detach()
    if job.world_size > 1:
        mean = local.clone()
        dist.all_reduce(mean)
        mean /= job.world_size
        sq = (local @ local).reshape(1)
        dist.all_reduce(sq)
        b = total  # each replica's gradient is over its whole local batch
        sqr, var = grad_noise_from_norms(float(sq) / job.world_size, float(mean @ mean), job.world_size, b, job.m0)
        job.report_gradients(sqr=sqr, var=var)
        lt = torch.tensor([losses], device=local.device)
        dist.all_reduce(lt)
        losses = float(lt) / job.world_size
        i = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(mean[i : i + n].view_as(p))
            i += n
    elif len(per_piece) > 1:
        g = torch.stack(per_piece)
        b = len(sizes) / sum(1.0 / s for s in sizes)
        sq = float((g * g).sum(1).mean())
        m = g.mean(0)
        sqr, var = grad_noise_from_norms(sq, float(m @ m), len(per_piece), b, job.m0)
        job.report_gradients(sqr=sqr, var=var)
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    optimizer.step()
    if local.is_cuda:
        torch.cuda.synchronize()
    st.loss = losses
    return losses
