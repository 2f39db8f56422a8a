"""gpuplan from Python: its GPU-cluster planners and its simulator, in-process.

Every call goes through the same Rust functions as the ``gpuplan`` command
line, so a round planned here gives the plan ``gpuplan plan`` prints for the
same file, and :func:`simulate` the summary of ``gpuplan simulate --format
json``. The native work runs with the GIL released.

>>> import gpuplan
>>> "gpuplan-mip" in gpuplan.policies()
True
>>> p = gpuplan.Planner("greedy", time_limit_s=5)
>>> out = p.plan({"now_s": 0, "cluster": {"nodes": [{"name": "n0", "gpus": 4, "gpu_type": "t4"}]}, "jobs": []})
>>> out["planner"], out["allocations"]
('greedy', {})

See docs/python.md in the repository for the round format and examples.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

try:
    from . import _gpuplan
except ImportError as _missing:  # a plain checkout (PYTHONPATH=python): gpuplan.job needs no native module

    class _NoExtension:
        """Stands in for the native module, so ``import gpuplan.job`` works without it.

        Every planner or simulator call then raises ImportError saying why.
        """

        def __init__(self, error: ImportError) -> None:
            self._error = error

        def __getattr__(self, name: str) -> Any:
            raise ImportError(
                f"gpuplan.{name}: the native module gpuplan._gpuplan is not in {os.path.dirname(__file__)}; "
                "install the wheel (docs/python.md). gpuplan.job works without it"
            ) from self._error

    _gpuplan = _NoExtension(_missing)  # type: ignore[assignment]

__all__ = ["policies", "default_params", "Planner", "plan", "simulate"]

#: A round: a round file's JSON object (docs/round-format.md), or its text.
Round = Union[Mapping[str, Any], str]


def policies() -> List[str]:
    """Every registered planner name, in registry order (``gpuplan policies``)."""
    return list(_gpuplan.policies())


def default_params(name: str) -> Dict[str, Any]:
    """The round parameters planner ``name`` starts from (its registry defaults).

    Every key of a round file's ``params``; a round's own ``params`` keys win
    over these, and these fill the keys a round leaves out (``gpuplan-mip``'s
    ``exploration_factor`` and ``restart_weight`` differ from Pollux's).
    Raises ``ValueError`` for an unknown name, listing the valid ones.
    """
    return json.loads(_gpuplan.default_params_json(name))


def _round_text(round: Round) -> str:
    if isinstance(round, str):
        return round
    if not isinstance(round, Mapping):
        raise TypeError(f"round must be a dict (a round file's JSON object) or its JSON text, not {type(round).__name__}")
    return json.dumps(round)


class Planner:
    """One planner with its cross-round state (warm start, GA population, queues).

    ``name`` is a registered planner (:func:`policies`); ``time_limit_s``,
    ``gap``, ``seed`` and ``threads`` are ``gpuplan plan``'s ``--time-limit``,
    ``--gap``, ``--seed`` and ``--threads``. Raises ``ValueError`` for an
    unknown name or a limit out of range. Rounds planned on one object share
    its state, as the simulator's rounds do; one round plans at a time.
    """

    def __init__(self, name: str, time_limit_s: float = 10.0, gap: float = 1e-4, seed: int = 0, threads: int = 1) -> None:
        self._raw = _gpuplan.RawPlanner(name, float(time_limit_s), float(gap), int(seed), int(threads))

    @property
    def name(self) -> str:
        """The planner's registered name."""
        return self._raw.name

    def plan(self, round: Round) -> Dict[str, Any]:
        """Plan one round; the plan as ``gpuplan plan --format json`` prints it.

        ``round`` is a round file's JSON object (or its text). The planner's
        registry defaults fill the ``params`` it leaves out. The result has
        ``planner``, ``status``, ``objective``, ``bound``, ``gap``,
        ``solve_ms``, ``reason`` (when there is one), and per job name
        ``allocations`` (a node index per GPU), ``gpus`` (``[node, index]``),
        ``changes`` (start, stop, move, resize, keep, wait) and ``hardware``.

        Raises ``ValueError`` for a bad round, listing every problem by its
        JSON path (``jobs[0] (name).min_gpus: ...``) as the CLI does, and
        ``RuntimeError`` if the planner broke a rule (a bug).
        """
        return json.loads(self._raw.plan_json("round", _round_text(round)))

    def __repr__(self) -> str:
        return f"Planner({self.name!r})"


def plan(round: Round, *, planner: str, time_limit_s: float = 10.0, gap: float = 1e-4, seed: int = 0, threads: int = 1) -> Dict[str, Any]:
    """Plan one round with a fresh planner: ``Planner(planner, ...).plan(round)``."""
    return Planner(planner, time_limit_s=time_limit_s, gap=gap, seed=seed, threads=threads).plan(round)


def simulate(
    workload: Union[str, "os.PathLike[str]"],
    policy: str,
    *,
    cluster: Optional[str] = None,
    interval_s: Optional[float] = None,
    restart_delay_s: Optional[float] = None,
    seed: Optional[int] = None,
    time_limit_s: Optional[float] = None,
    max_sim_days: Optional[float] = None,
    interference_slowdown: Optional[float] = None,
    duration_jobs: Optional[str] = None,
    trace_format: Optional[str] = None,
    skip_bad_rows: Optional[bool] = None,
    shrink_to_fit: Optional[bool] = None,
    traces: Optional[Union[str, "os.PathLike[str]"]] = None,
    p: Optional[float] = None,
    restart_penalty_s: Optional[float] = None,
    restart_weight: Optional[float] = None,
    exploration_factor: Optional[int] = None,
    left_out_cost: Optional[float] = None,
    spare_waiting: Optional[bool] = None,
    interference: Optional[str] = None,
    queues: Optional[Union[str, "os.PathLike[str]"]] = None,
    type_blind: Optional[bool] = None,
    variability_blind: Optional[bool] = None,
    placement: Optional[str] = None,
    sticky: Optional[bool] = None,
    sharing: Optional[int] = None,
) -> Dict[str, Any]:
    """Simulate a workload file under one policy; ``gpuplan simulate --format json``'s summary.

    Each keyword is the ``gpuplan simulate`` flag of the same name (``cluster``
    is ``--cluster``, ``interval_s`` is ``--interval``, ``time_limit_s`` is
    ``--time-limit``, ``max_sim_days``, ``traces`` and the rest likewise);
    ``None`` keeps the CLI's default, and for a policy parameter (``p``,
    ``restart_weight``, ``exploration_factor``, ...) the policy's own registry
    default, as an absent flag does. Raises ``ValueError`` for bad arguments
    or an unreadable workload, naming the argument or file. With ``queues``
    (a queues file, as ``--queues``) the result has one row per queue under
    ``"queues"`` (docs/tenants.md).
    """
    args: Dict[str, Any] = {"workload": os.fspath(workload), "policy": policy}
    given = {
        "cluster": cluster,
        "interval_s": interval_s,
        "restart_delay_s": restart_delay_s,
        "seed": seed,
        "time_limit_s": time_limit_s,
        "max_sim_days": max_sim_days,
        "interference_slowdown": interference_slowdown,
        "duration_jobs": duration_jobs,
        "trace_format": trace_format,
        "skip_bad_rows": skip_bad_rows,
        "shrink_to_fit": shrink_to_fit,
        "traces": None if traces is None else os.fspath(traces),
        "p": p,
        "restart_penalty_s": restart_penalty_s,
        "restart_weight": restart_weight,
        "exploration_factor": exploration_factor,
        "left_out_cost": left_out_cost,
        "spare_waiting": spare_waiting,
        "interference": interference,
        "queues": os.fspath(queues) if queues is not None else None,
        "type_blind": type_blind,
        "variability_blind": variability_blind,
        "placement": placement,
        "sticky": sticky,
        "sharing": sharing,
    }
    args.update({k: v for k, v in given.items() if v is not None})
    return json.loads(_gpuplan.simulate_json(json.dumps(args)))
