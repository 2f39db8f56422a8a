#!/usr/bin/env bash
# `make demo`: the main job on bundled data, with a report and plots.
set -euo pipefail
bin="$1"; out="$2"
mkdir -p "$out"
echo "== goodput model fitted to every measured point of the 6 Pollux applications"
"$bin" models fit --app all | tee "$out/models.txt"
echo
echo "== workload-6 (160 jobs, 16x4 T4): the baselines (tiresias, optimus, pollux-ga) beside gpuplan's MIP policies (pollux-mip: Pollux's objective; gpuplan-mip: ours, docs/policy.md)"
"$bin" sweep --workloads traces/pollux/workloads/workload-6.csv \
  --policies tiresias,optimus,pollux-ga,pollux-mip,pollux-mip-aggregate,gpuplan-mip --out "$out"
echo
echo "== solver time against plan quality: each round solved exactly (MIP) vs greedy and the GA, by cluster size"
mkdir -p "$out/bench"
"$bin" bench --sizes small --planners pollux-mip,mip-aggregate,greedy,pollux-ga --out "$out/bench" \
  | tee "$out/bench/bench.txt"
{
  echo
  echo "## Solver time against plan quality (\`gpuplan bench --sizes small\`)"
  echo
  echo "Seeded rounds from the real profiles, 3 per size. pollux-mip solves each round to proven"
  echo "optimality (column opt: rounds proven optimal); mip-aggregate solves a smaller model of node"
  echo "aggregates, faster; greedy and the GA are heuristics. gap_to_best: how far below the best plan."
  echo
  echo '```'
  cat "$out/bench/bench.txt"
  echo '```'
  echo
  echo "![solve time by cluster size](bench/solve_time.svg)"
  echo "![objective against solve time](bench/quality_vs_time.svg)"
} >> "$out/report.md"
echo
echo "report: $out/report.md (plots beside it)"
