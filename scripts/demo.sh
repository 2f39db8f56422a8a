#!/usr/bin/env bash
# `make demo`: the main job on bundled data, with a report and plots.
set -euo pipefail
bin="$1"; out="$2"
mkdir -p "$out"
echo "== goodput model fitted to every measured point of the 6 Pollux applications"
"$bin" models fit --app all | tee "$out/models.txt"
echo
echo "== workload-6 (160 jobs, 16x4 T4) under tiresias, optimus and pollux-ga"
"$bin" sweep --workloads traces/pollux/workloads/workload-6.csv --policies tiresias,optimus,pollux-ga --out "$out"
echo
echo "report: $out/report.md (plots beside it)"
