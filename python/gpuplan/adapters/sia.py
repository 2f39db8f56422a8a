"""gpuplan's planners inside Sia's simulator.

Sia's simulator (the artifact of "Sia: Heterogeneity-aware, goodput-optimized
ML-cluster scheduling", SOSP'23) calls ``policy.optimize(job_infos,
node_infos, base_allocations)`` once a round and builds its per-type job
infos only for subclasses of its own ``SiaPolicy``. This module turns such a
call into one gpuplan round, plans it with a :class:`gpuplan.Planner` kept
across rounds, checks the plan, and hands Sia back its allocations:

- :func:`build_round`: job infos and node infos to a round dict
  (docs/round-format.md). Each job's per-type Pollux throughput and gradient
  parameters come from its speedup functions; a type it has no parameters
  for gets its reference model scaled by Sia's own throughput ratio
  (``cluster_throughput_ratios``), as Sia values it; a job in
  checkpoint-restore (``scaling_underway``) is pinned where it is; each
  job's restart penalty comes from a callable (the runner passes Sia's own);
  Sia's nodes ``{type: {index: NodeInfo}}`` are numbered into one list, and
  the returned :class:`NodeMap` maps them back.
- :func:`to_sia_allocations` and :func:`check_allocations`: the plan back to
  ``{job: (type, [node index per GPU])}``, and every problem Sia would trip
  on (capacity, one type per job, more GPUs than the job's ``max_replicas``
  on that type, more nodes than allowed).
- :class:`GpuplanSia`: the per-round loop with its log (status, objective,
  solve ms per round); :func:`policy_class` makes it a subclass of Sia's
  ``SiaPolicy`` so that Sia's ``Cluster`` accepts it.

Nothing here imports Sia: the artifact has no licence, so none of its code
or data is in this repository. The runner (:mod:`gpuplan.adapters.sia_run`) takes
the path of a checkout, imports ``SiaPolicy`` from it and passes it to
:func:`policy_class`. The unit tests use stub job infos.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import gpuplan

#: Sia's allocations: job name -> (GPU type, node index within the type, one per GPU).
SiaAllocations = Dict[str, Tuple[str, List[int]]]

_PERF_KEYS = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")


@dataclass
class NodeMap:
    """Sia's ``(type, index)`` nodes numbered as one gpuplan node list."""

    #: gpuplan node index -> (Sia type, Sia node index).
    nodes: List[Tuple[str, int]] = field(default_factory=list)
    #: GPUs on each gpuplan node.
    gpus: List[int] = field(default_factory=list)

    def index(self, gpu_type: str, node: int) -> int:
        """The gpuplan index of Sia's node ``node`` of ``gpu_type``."""
        try:
            return self.nodes.index((gpu_type, node))
        except ValueError:
            raise ValueError(f"no node {node} of type {gpu_type!r} in the cluster") from None


def node_map(node_infos: Mapping[str, Mapping[int, Any]]) -> NodeMap:
    """Number Sia's nodes: types in the order Sia lists them, nodes by index."""
    m = NodeMap()
    for gpu_type, nodes in node_infos.items():
        for idx in sorted(nodes):
            m.nodes.append((gpu_type, int(idx)))
            m.gpus.append(int(nodes[idx].resources.get("nvidia.com/gpu", 0)))
    return m


def speedup_model(speedup_fn: Any) -> Optional[Dict[str, Any]]:
    """A gpuplan job model from one of Sia's speedup functions; ``None`` when
    the job has no throughput model on that type yet.

    Reads the Pollux parameters the function was built from (its goodput
    function's ``_perf_params`` and ``_grad_params``, the initial batch
    size) and its batch limits (``_max_batch_size``, ``_atomic_bsz_range``,
    ``_accumulation``). Pipeline-parallel jobs (several stages) are refused.
    """
    if speedup_fn is None or not hasattr(speedup_fn, "_goodput_fn"):
        return None
    g = speedup_fn._goodput_fn
    if g is None:
        return None
    if getattr(g, "_num_stages", 1) > 1:
        raise ValueError("pipeline-parallel jobs (num_stages > 1) have no gpuplan model")
    perf = g._perf_params
    grad = g._grad_params
    lo, hi = speedup_fn._atomic_bsz_range
    return {
        "perf": {k: float(getattr(perf, k)) for k in _PERF_KEYS},
        "grad": {"sqr": float(grad.sqr), "var": float(grad.var)},
        "limits": {
            "init_batch": int(g._init_batch_size),
            "max_batch": int(speedup_fn._max_batch_size),
            "min_local": int(lo),
            "max_local": int(hi),
        },
        "accumulation": bool(speedup_fn._accumulation),
    }


def scaled_model(model: Dict[str, Any], step_time_ratio: float) -> Dict[str, Any]:
    """``model`` on a type where every step takes ``step_time_ratio`` times as
    long (Sia's throughput ratio source/destination): compute and network
    terms scaled alike, so throughput scales by its inverse at every size."""
    if not (step_time_ratio > 0 and math.isfinite(step_time_ratio)):
        raise ValueError(f"throughput ratio must be finite and > 0, got {step_time_ratio}")
    out = json.loads(json.dumps(model))
    for k in _PERF_KEYS:
        if k != "gamma":
            out["perf"][k] *= step_time_ratio
    return out


def step_ratio(ratios: Mapping[str, Any], src: str, dst: str) -> Optional[float]:
    """How many times longer a step takes on ``dst`` than on ``src``, from a
    job info's ``cluster_throughput_ratios``: Sia's nested
    ``{src: {dst: xput_src / xput_dst}}``, or, for a rigid job, the flat
    ``{type: throughput}`` Sia puts there instead; ``None`` when unknown."""
    inner = ratios.get(src)
    if isinstance(inner, Mapping):
        r = inner.get(dst)
        return None if r is None else float(r)
    if inner is not None and ratios.get(dst):
        return float(inner) / float(ratios[dst])
    return None


def job_models(info: Any, types: Sequence[str], current: Optional[str]) -> Dict[str, Any]:
    """A job's ``model``, ``model_type`` and ``type_models`` round keys.

    The reference type is the job's current one where it has a model there,
    else the first type (in cluster order) where it has one. Types without a
    model are derived from the reference through Sia's
    ``cluster_throughput_ratios[reference][type]``.
    """
    fns = getattr(info, "speedup_fn", None) or {}
    fns = fns if isinstance(fns, Mapping) else {t: fns for t in types}
    models = {t: speedup_model(fns.get(t)) for t in types}
    have = [t for t in types if models[t] is not None]
    if not have:
        return {"model": None}
    ref = current if current in have else have[0]
    ratios = getattr(info, "cluster_throughput_ratios", None) or {}
    type_models = []
    for t in types:
        if t == ref:
            continue
        m = models[t]
        if m is None:
            r = step_ratio(ratios, ref, t)
            if r is None:
                continue  # gpuplan's type-speed table values it
            m = scaled_model(models[ref], float(r))
        type_models.append({"gpu_type": t, "model": m})
    out: Dict[str, Any] = {"model": models[ref], "model_type": ref}
    if type_models:
        out["type_models"] = type_models
    return out


def build_round(
    job_infos: Mapping[str, Any],
    node_infos: Mapping[str, Mapping[int, Any]],
    base_allocations: Mapping[str, Tuple[str, Sequence[int]]],
    *,
    p: float = -0.5,
    lambda_n: float = 1.1,
    interference: str = "allow",
    restart_penalty: Optional[Callable[[str], float]] = None,
    max_nodes_per_job: Optional[int] = None,
    extra_params: Optional[Mapping[str, Any]] = None,
) -> Tuple[Dict[str, Any], NodeMap]:
    """One gpuplan round from one call of Sia's ``optimize``, and its node map.

    ``p`` and ``lambda_n`` are Sia's fairness exponent and the cost of a job
    left without GPUs (round params ``p`` and ``left_out_cost``); restarts are
    charged as Sia charges them (``spare_waiting``: only to running jobs),
    each job's penalty from ``restart_penalty(job_name)``. ``interference``
    is ``allow`` by default: Sia's simulator never charges for it.
    """
    nm = node_map(node_infos)
    types = list(node_infos.keys())
    cluster = {
        "nodes": [
            {"name": f"{t}-{i}", "gpus": g, "gpu_type": t} for (t, i), g in zip(nm.nodes, nm.gpus)
        ]
    }
    now_s = 0.0
    jobs = []
    for jid, name in enumerate(sorted(job_infos)):
        info = job_infos[name]
        cur_type, cur_nodes = base_allocations.get(name, (None, ()))
        alloc = [nm.index(cur_type, n) for n in cur_nodes] if cur_type is not None else []
        max_r = getattr(info, "max_replicas", {}) or {}
        max_r = max_r if isinstance(max_r, Mapping) else {t: max_r for t in types}
        max_gpus = max([int(v) for v in max_r.values()] or [1])
        rigid = getattr(info, "category", None) in ("rigid", "scale-gpus")
        # Sia caps growth at twice the most replicas profiled; gpuplan's
        # planners apply their own cap to the most GPUs used.
        used = max(len(alloc), max(1, max_gpus // 2))
        age = float(getattr(info, "age", 0.0) or 0.0)
        submit = float(getattr(info, "creation_timestamp", 0.0) or 0.0)
        now_s = max(now_s, submit + age)
        pinned = bool(getattr(info, "scaling_underway", False)) and bool(alloc)
        job: Dict[str, Any] = {
            "id": jid,
            "name": name,
            "app": name.split("-")[0],
            "submit_s": submit,
            "requested_gpus": max_gpus if rigid else 1,
            "batch_size": 0,
            "min_gpus": max_gpus if rigid else 1,
            "max_gpus": max_gpus,
            # A job restoring a checkpoint keeps its GPUs (Sia: preserve_ckpt_allocs).
            "preemptible": not pinned,
            "state": {
                "progress": 0.0,
                "epoch": 0,
                "attained_gpu_s": float(getattr(info, "attained_service", 0.0) or 0.0),
                "age_s": age,
                "restarts": int(getattr(info, "num_restarts", 0) or 0),
                "allocation": alloc,
                "max_gpus_used": used,
                "batch_size": 0,
                "local_bsz": 0,
                "accum_steps": 0,
            },
        }
        job.update(job_models(info, types, cur_type))
        if restart_penalty is not None:
            job["restart_penalty_s"] = float(restart_penalty(name))
        jobs.append(job)
    params: Dict[str, Any] = {
        "p": p,
        "left_out_cost": lambda_n,
        "spare_waiting": True,
        "interference": interference,
    }
    if max_nodes_per_job is not None:
        params["max_nodes_per_job"] = max_nodes_per_job
    # Round-file keys for ablations (`restart_weight`, `exploration_factor`):
    # a round's own params win over the planner's registry defaults.
    params.update(extra_params or {})
    return {"now_s": now_s, "cluster": cluster, "jobs": jobs, "params": params}, nm


def to_sia_allocations(plan: Mapping[str, Any], nm: NodeMap) -> SiaAllocations:
    """A gpuplan plan's allocations as Sia's ``{job: (type, [node per GPU])}``.

    Raises ``ValueError`` for a job whose GPUs span types (Sia runs a job on
    one type)."""
    out: SiaAllocations = {}
    for name, nodes in plan["allocations"].items():
        if not nodes:
            continue
        places = [nm.nodes[n] for n in nodes]
        types = sorted({t for t, _ in places})
        if len(types) != 1:
            raise ValueError(f"{name}: GPUs on several types {types}")
        out[name] = (types[0], sorted(i for _, i in places))
    return out


def check_allocations(
    allocs: Mapping[str, Tuple[str, Sequence[int]]],
    node_infos: Mapping[str, Mapping[int, Any]],
    job_infos: Mapping[str, Any],
    max_nodes: Optional[Mapping[str, int]] = None,
    share_max_replicas: bool = False,
) -> List[str]:
    """Every problem Sia's simulator would trip on, each naming the job or node.

    Checks: each job known and on one existing type; no node over its GPUs;
    no more GPUs than the job's ``max_replicas`` on that type (the most over
    its types with ``share_max_replicas``, as Sia's own policy then caps
    every type); no more nodes than ``max_nodes[type]`` (Sia's
    ``max_physical_nodes``), where given.
    """
    problems = []
    used: Dict[Tuple[str, int], int] = {}
    for name, (gpu_type, nodes) in allocs.items():
        if name not in job_infos:
            problems.append(f"{name}: not a job of the round")
            continue
        if gpu_type not in node_infos:
            problems.append(f"{name}: unknown GPU type {gpu_type!r}")
            continue
        for n in nodes:
            if n not in node_infos[gpu_type]:
                problems.append(f"{name}: no node {n} of type {gpu_type!r}")
            used[(gpu_type, n)] = used.get((gpu_type, n), 0) + 1
        max_r = getattr(job_infos[name], "max_replicas", None)
        if isinstance(max_r, Mapping) and gpu_type in max_r:
            cap = max(max_r.values()) if share_max_replicas else max_r[gpu_type]
            if len(nodes) > cap:
                problems.append(f"{name}: {len(nodes)} GPUs of {gpu_type}, above its max_replicas {cap}")
        if max_nodes and gpu_type in max_nodes and len(set(nodes)) > max_nodes[gpu_type]:
            problems.append(f"{name}: {len(set(nodes))} nodes of {gpu_type}, above {max_nodes[gpu_type]}")
    for (gpu_type, n), k in sorted(used.items()):
        info = node_infos.get(gpu_type, {}).get(n)
        cap = info.resources.get("nvidia.com/gpu", 0) if info is not None else 0
        if info is not None and k > cap:
            problems.append(f"node {n} of {gpu_type}: {k} GPUs allocated, it has {cap}")
    return problems


class GpuplanSia:
    """Sia's ``optimize`` answered by a gpuplan planner, round after round.

    Keeps one :class:`gpuplan.Planner` (its warm start and state carry across
    rounds) and ``log``: one dict per round with ``round``, ``jobs``,
    ``status``, ``objective``, ``bound``, ``solve_ms`` and ``wall_ms``
    (written as JSON lines to ``log_path`` too, when given). A round whose
    solve took more than ``dump_over_ms`` is written to
    ``dump_dir/round-N.json``, for ``gpuplan plan`` to replay.
    """

    def __init__(
        self,
        planner: str = "gpuplan-mip",
        *,
        p: float = -0.5,
        lambda_n: float = 1.1,
        time_limit_s: float = 10.0,
        seed: int = 0,
        interference: str = "allow",
        restart_penalty: Optional[Callable[[str], float]] = None,
        max_nodes: Optional[Mapping[str, int]] = None,
        share_max_replicas: bool = False,
        log_path: Optional[str] = None,
        dump_dir: Optional[str] = None,
        dump_over_ms: float = float("inf"),
        extra_params: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.planner = gpuplan.Planner(planner, time_limit_s=time_limit_s, seed=seed)
        self.extra_params = dict(extra_params or {})
        self.p, self.lambda_n, self.interference = p, lambda_n, interference
        self.restart_penalty = restart_penalty
        self.max_nodes = dict(max_nodes) if max_nodes else None
        self.share_max_replicas = share_max_replicas
        self.log_path = log_path
        self.dump_dir, self.dump_over_ms = dump_dir, dump_over_ms
        self.log: List[Dict[str, Any]] = []

    def optimize(self, job_infos, node_infos, base_allocations) -> SiaAllocations:
        """One round: Sia's arguments in, Sia's allocations out.

        Raises ``RuntimeError`` listing every problem when the plan would
        break Sia's rules (a bug in the adapter or the planner)."""
        if not job_infos:
            return {}
        t0 = time.perf_counter()
        round, nm = build_round(
            job_infos,
            node_infos,
            base_allocations,
            p=self.p,
            lambda_n=self.lambda_n,
            interference=self.interference,
            restart_penalty=self.restart_penalty,
            extra_params=self.extra_params,
        )
        plan = self.planner.plan(round)
        allocs = to_sia_allocations(plan, nm)
        problems = check_allocations(allocs, node_infos, job_infos, self.max_nodes, self.share_max_replicas)
        if problems:
            raise RuntimeError("gpuplan's plan breaks Sia's rules:\n  " + "\n  ".join(problems))
        entry = {
            "round": len(self.log),
            "jobs": len(job_infos),
            "status": plan["status"],
            "objective": plan["objective"],
            "bound": plan.get("bound"),
            "solve_ms": plan["solve_ms"],
            "wall_ms": (time.perf_counter() - t0) * 1e3,
        }
        if self.dump_dir and plan["solve_ms"] > self.dump_over_ms:
            # The very round planned, for `gpuplan plan FILE` to replay.
            with open(f"{self.dump_dir}/round-{entry['round']}.json", "w") as f:
                json.dump(round, f)
        self.log.append(entry)
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
        return allocs


def policy_class(sia_policy: type) -> type:
    """A subclass of Sia's ``SiaPolicy`` (pass the class, imported from a Sia
    checkout) whose ``optimize`` is :meth:`GpuplanSia.optimize`; Sia's
    ``Cluster`` builds its per-type job infos for it as for its own policy.

    Keyword arguments of the class: those of :class:`GpuplanSia`, plus
    ``sia_kwargs`` (a dict) for ``SiaPolicy.__init__`` (its
    ``populate_valid_configs``, which Sia's driver calls, stays Sia's).
    """

    class GpuplanSiaPolicy(sia_policy):  # type: ignore[misc, valid-type]
        def __init__(self, planner: str = "gpuplan-mip", *, sia_kwargs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
            sia_policy.__init__(self, **(sia_kwargs or {}))
            self.gpuplan = GpuplanSia(planner, **kwargs)

        def optimize(self, jobs, nodes, base_allocations):
            return self.gpuplan.optimize(jobs, nodes, base_allocations)

    GpuplanSiaPolicy.__name__ = GpuplanSiaPolicy.__qualname__ = f"Gpuplan{sia_policy.__name__}"
    return GpuplanSiaPolicy
