#!/usr/bin/env python3
"""Derive gpuplan's per-GPU-type compute scalings (crates/core/src/gpu_speed.rs).

Gavel's table (simulation_throughputs.json, iterations/s of each model alone
on one GPU, "null" at scale 1) gives k80 and p100 relative to v100 per model:
the geometric mean over the model's batch sizes. T4, RTX 2080 Ti and A100 are
not in it; for them (and to anchor v100 to T4) the ratio is the geometric
mean of the FP32 TFLOPS ratio and the memory-bandwidth ratio of the public
datasheets. Prints the compute time multipliers relative to T4 (< 1: faster).

usage: scripts/gpu-types.py [/work/shared/anchors/traces/gavel/simulation_throughputs.json]
"""
import json, math, sys

path = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/anchors/traces/gavel/simulation_throughputs.json"
d = json.load(open(path))
# Public datasheet figures: FP32 TFLOPS, memory bandwidth GB/s.
SHEET = {"t4": (8.1, 320), "rtx2080ti": (13.4, 616), "v100": (15.7, 900), "a100": (19.5, 1555),
         "h100": (67.0, 3350), "h200": (67.0, 4800)}  # H100 SXM5, H200 SXM
def speed_vs_t4(t):
    f, b = SHEET[t]; f0, b0 = SHEET["t4"]
    return math.sqrt(f / f0 * b / b0)
GAVEL = ["ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation"]
for model in GAVEL:
    out = []
    for t in ["k80", "p100"]:
        logs = []
        for k, v in d["v100"].items():
            name, scale = k.strip("()").rsplit(",", 1)
            if int(scale) != 1 or not name.strip("'").startswith(model + " ") and name.strip("'") != model:
                continue
            a, b = d[t].get(k, {}).get("null", 0.0), v["null"]
            if a > 0 and b > 0:
                logs.append(math.log(a / b))
        r = math.exp(sum(logs) / len(logs))  # type speed / v100 speed
        out.append((t, r, len(logs)))
    v = speed_vs_t4("v100")
    cells = ", ".join(f"{t}: speed/v100 {r:.3f} over {n} batch sizes -> time x {1 / (r * v):.3f}" for t, r, n in out)
    print(f"{model}: {cells}")
for t in SHEET:
    print(f"{t}: speed/t4 {speed_vs_t4(t):.3f} -> time x {1 / speed_vs_t4(t):.3f}")
