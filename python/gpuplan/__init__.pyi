# Type stubs of the gpuplan package (docs/python.md); a test checks them
# against the runtime signatures.
import os
from typing import Any, Dict, List, Mapping, Optional, Union

Round = Union[Mapping[str, Any], str]

def policies() -> List[str]: ...
def default_params(name: str) -> Dict[str, Any]: ...

class Planner:
    def __init__(self, name: str, time_limit_s: float = 10.0, gap: float = 1e-4, seed: int = 0, threads: int = 1) -> None: ...
    @property
    def name(self) -> str: ...
    def plan(self, round: Round) -> Dict[str, Any]: ...

def plan(round: Round, *, planner: str, time_limit_s: float = 10.0, gap: float = 1e-4, seed: int = 0, threads: int = 1) -> Dict[str, Any]: ...
def simulate(
    workload: Union[str, os.PathLike[str]],
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
    traces: Optional[Union[str, os.PathLike[str]]] = None,
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
) -> Dict[str, Any]: ...
