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
echo
echo "== the same rounds planned 10 times in a row, the way pollux-ga runs in a simulation (its population carried over)"
mkdir -p "$out/bench-warm"
"$bin" bench --sizes small --planners pollux-mip,greedy,pollux-ga --warm-rounds 10 --out "$out/bench-warm" \
  | tee "$out/bench-warm/bench.txt"
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
  echo
  echo "pollux-ga is far below the best plan in these cold rounds, and that is Pollux's design, not a"
  echo "broken search: like the artifact's optimize, it seeds its GA with one state, the round's"
  echo "current allocation, and in a simulation carries its population from round to round, so a"
  echo "round rarely starts cold. Benched that way (\`--warm-rounds 10\`: the same round planned"
  echo "10 times with one planner value, the last plan and its time reported; the MIP and greedy"
  echo "keep no state and repeat their plan). At 256 GPUs and 100 jobs, 82 of them new in the same"
  echo "round, it stays far below even warm; in Pollux's own workloads jobs arrive a few per round."
  echo
  echo '```'
  cat "$out/bench-warm/bench.txt"
  echo '```'
} >> "$out/report.md"
echo
echo "== production scale: lagrange (prices + greedy, with a proven bound) and greedy from 1,024 to 100,000 GPUs of four types"
mkdir -p "$out/bench-scale"
"$bin" bench --sizes 1024x400,4096x2000,16384x8000,100000x50000 --types t4,rtx2080ti,a100,h100 \
  --planners lagrange,greedy --repeat 1 --gap 0.01 --out "$out/bench-scale" \
  | tee "$out/bench-scale/bench.txt"
{
  echo
  echo "## At production scale (\`gpuplan bench --sizes 1024x400,...,100000x50000 --types t4,rtx2080ti,a100,h100\`)"
  echo
  echo "One seeded round per size. lagrange prices each GPU type from the count relaxation's dual, lets the"
  echo "prices steer greedy, and reports the dual's value as a bound: proven is the plan's gap to it, peak_mib"
  echo "the bench process's resident peak during the solve. The MIPs beside it at these sizes, and what"
  echo "is still open: docs/formulation.md, \"At production scale\"."
  echo
  echo '```'
  cat "$out/bench-scale/bench.txt"
  echo '```'
  echo
  echo "![solve time to 100,000 GPUs](bench-scale/solve_time.svg)"
} >> "$out/report.md"
echo
echo "== teams sharing a cluster: two queues guaranteed 8 GPUs each on 4x4 (docs/tenants.md), the fair-share baseline beside the MIPs"
"$bin" sweep --workloads tests/data/queued-workload.csv --cluster 4x4 --queues examples/queues-ab.toml \
  --policies fair-share,pollux-mip,gpuplan-mip --out "$out/queues"
{
  echo
  echo "## Teams sharing the cluster (\`--queues examples/queues-ab.toml\`)"
  echo
  echo "14 jobs of two teams (tests/data/queued-workload.csv) on 4x4, each team guaranteed 8 GPUs and free to"
  echo "borrow the other's idle ones; per-queue figures and each policy's GPUs per queue over time:"
  echo "[queues/report.md](queues/report.md)."
  echo
  awk '/^### Per queue/{f=1; next} f && /^\|/{print; t=1; next} t{exit}' "$out/queues/report.md"
  echo
  for p in fair-share pollux-mip gpuplan-mip; do
    echo "![$p GPUs per queue](queues/$p/queued-workload/queues.svg)"
  done
} >> "$out/report.md"
echo
echo "report: $out/report.md (plots beside it)"
