#!/usr/bin/env bash
# Calibration runs of `gpuplan simulate --estimates` (docs/estimates.md).
# Usage: run.sh SET POLICY WORK [EVERY] [WORKLOADS...]
#   SET: pollux-1.0 | pollux-2.0 | philly  (which workloads and cluster flags)
#   WORK: declared | history
# Each run's estimates.json (and estimates.csv) goes to $OUT/SET/POLICY-WORK/WORKLOAD/;
# $OUT defaults to /tmp/gpuplan-estimates; summary.json files are copied here.
set -euo pipefail
BIN=${BIN:-gpuplan}
OUT=${OUT:-/tmp/gpuplan-estimates}
HERE=$(cd "$(dirname "$0")" && pwd)
SET=$1 POLICY=$2 WORK=$3 EVERY=${4:-1}
shift 4 || shift $#
case $SET in
  pollux-1.0) DIR=traces/pollux/workloads; FLAGS=() ;;
  pollux-2.0) DIR=traces/pollux/workloads-2.0; FLAGS=() ;;
  philly) DIR=traces/pal/philly; FLAGS=(--cluster 16x4 --interval 360) ;;
  *) echo "unknown set $SET" >&2; exit 2 ;;
esac
WLS=("$@")
[ ${#WLS[@]} -gt 0 ] || WLS=(1 2 3 4 5 6 7 8)
for w in "${WLS[@]}"; do
  d=$OUT/$SET/$POLICY-$WORK/workload-$w
  [ -f "$d/estimates.json" ] && continue
  mkdir -p "$d"
  start=$(date +%s)
  "$BIN" simulate --workload "$DIR/workload-$w.csv" --policy "$POLICY" "${FLAGS[@]}" \
    --estimates --estimate-work "$WORK" --estimate-every "$EVERY" --estimate-budget 5 \
    --out "$d" --format json > "$d/summary.json" 2> "$d/stderr.txt"
  echo "$SET $POLICY $WORK workload-$w: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
  k=$HERE/$SET/$POLICY-$WORK
  mkdir -p "$k"
  cp "$d/estimates.json" "$k/workload-$w.json"
done
