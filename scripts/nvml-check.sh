#!/usr/bin/env bash
# The NVML path on a machine with a real NVIDIA GPU (not part of `make test`:
# CI has no GPU). It checks what the fake backend cannot:
#   1. `cluster show --devices nvml` lists every GPU nvidia-smi lists, by UUID,
#      with the model name NVML reports (and the speed table's entry for it);
#   2. `serve --devices nvml` runs a job on a real GPU: the job's
#      CUDA_VISIBLE_DEVICES is a UUID that nvidia-smi resolves, the job
#      completes, `/metrics` shows the node's GPUs healthy;
#   3. SIGTERM stops the daemon cleanly.
# Usage: scripts/nvml-check.sh GPUPLAN_BINARY OUTDIR
# Prints one "nvml-check: PASS"/"FAIL: why" line per check; exits 1 on a failure.
set -uo pipefail
B=$(realpath "$1"); OUT=$(realpath -m "$2"); mkdir -p "$OUT"
S=$(mktemp -d); PORT=7199; fails=0
DEVICES=${NVML_CHECK_DEVICES:-nvml}  # fake:1x2 for a dry run of the script itself
pass() { echo "nvml-check: PASS $*"; }
fail() { echo "nvml-check: FAIL $*"; fails=$((fails + 1)); }
http_get() { # path -> body on stdout (bash /dev/tcp: no curl needed)
  exec 3<>/dev/tcp/127.0.0.1/$PORT || return 1
  printf 'GET %s HTTP/1.0\r\nHost: x\r\n\r\n' "$1" >&3
  sed '1,/^\r$/d' <&3; exec 3<&-
}

nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader >"$OUT/nvidia-smi.csv" 2>&1
cat "$OUT/nvidia-smi.csv"
mapfile -t UUIDS < <(cut -d, -f2 "$OUT/nvidia-smi.csv" | tr -d ' ')

# 1. The cluster as the planner sees it.
"$B" cluster show --devices "$DEVICES" --format json >"$OUT/cluster.json" 2>"$OUT/cluster.err"
rc=$?; cat "$OUT/cluster.json" "$OUT/cluster.err"
if [ $rc -ne 0 ]; then fail "cluster show exited $rc"; else
  missing=0
  for u in "${UUIDS[@]}"; do grep -q "$u" "$OUT/cluster.json" || missing=$((missing + 1)); done
  if [ ${#UUIDS[@]} -gt 0 ] && [ $missing -eq 0 ]; then pass "cluster show lists all ${#UUIDS[@]} GPU(s) by UUID"
  else fail "cluster show misses $missing of ${#UUIDS[@]} nvidia-smi UUIDs"; fi
fi
"$B" cluster show --devices "$DEVICES" >"$OUT/cluster.txt" 2>&1; cat "$OUT/cluster.txt"

# 2. A job on a real GPU through serve.
export GPUPLAN_TOKEN=nvml-check-token
"$B" serve --devices "$DEVICES" --interval 2s --state "$S" --listen 127.0.0.1:$PORT --grace 5s \
  >"$OUT/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 50); do http_get /v1/health >/dev/null 2>&1 && break; sleep 0.2; done
cat >"$S/job.toml" <<'EOF'
name = "nvml-probe"
command = "echo \"$CUDA_VISIBLE_DEVICES\" > \"$GPUPLAN_CHECKPOINT_DIR/visible\"; nvidia-smi --query-gpu=uuid,name,utilization.gpu --format=csv,noheader -i \"$CUDA_VISIBLE_DEVICES\" > \"$GPUPLAN_CHECKPOINT_DIR/smi\" 2>&1; sleep 6; touch \"$GPUPLAN_DONE_FILE\""
min_gpus = 1
max_gpus = 1
batch_size = 32
restart_cost_s = 5
grace_s = 5
EOF
ID=$("$B" submit "$S/job.toml" --server http://127.0.0.1:$PORT 2>&1)
echo "submitted: $ID"
ID=$(echo "$ID" | grep -o '[0-9]\+' | tail -1)
phase=""
for _ in $(seq 60); do
  http_get /metrics >"$OUT/metrics.txt" 2>/dev/null
  sleep 1
  if [ -s "$S/jobs/$ID/checkpoint/smi" ]; then phase=ran; sleep 9; break; fi
done
http_get /metrics >"$OUT/metrics-end.txt" 2>/dev/null
"$B" jobs --server http://127.0.0.1:$PORT >"$OUT/jobs.txt" 2>&1
cat "$OUT/jobs.txt"
visible=$(cat "$S/jobs/$ID/checkpoint/visible" 2>/dev/null)
cp "$S/jobs/$ID/checkpoint/smi" "$OUT/job-smi.txt" 2>/dev/null
echo "job saw CUDA_VISIBLE_DEVICES=$visible"; cat "$OUT/job-smi.txt" 2>/dev/null
if [ -n "$visible" ] && printf '%s\n' "${UUIDS[@]}" | grep -qx "$visible" && grep -q "$visible" "$OUT/job-smi.txt"; then
  pass "the job ran on GPU $visible, which nvidia-smi resolves"
else fail "job's CUDA_VISIBLE_DEVICES='$visible' is not a GPU nvidia-smi knows (phase: $phase)"; fi
if grep -qi "complet" "$OUT/jobs.txt"; then pass "the job completed"; else fail "the job did not complete"; fi
if grep -q '^gpuplan_node_healthy_gpus{.*} [1-9]' "$OUT/metrics-end.txt"; then
  pass "/metrics reports the node's GPUs"; else fail "/metrics has no node GPU lines"; fi

# 3. Clean shutdown.
kill -TERM $SERVE; for _ in $(seq 50); do kill -0 $SERVE 2>/dev/null || break; sleep 0.2; done
if kill -0 $SERVE 2>/dev/null; then fail "serve still running 10 s after SIGTERM"; kill -9 $SERVE
else wait $SERVE; rc=$?; [ $rc -eq 0 ] && pass "serve exited 0 on SIGTERM" || fail "serve exited $rc on SIGTERM"; fi
cp "$S/journal.jsonl" "$OUT/journal.jsonl" 2>/dev/null
tail -30 "$OUT/serve.log"
[ $fails -eq 0 ] && echo "nvml-check: all passed" || { echo "nvml-check: $fails failed"; exit 1; }
