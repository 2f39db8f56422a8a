#!/usr/bin/env bash
# `make test-torch` (not part of `make test`): real PyTorch jobs under
# `gpuplan serve --devices fake:1x4 --planner gpuplan-mip`, re-allocated round
# after round (scripts/real_training.py says what it checks).
#   test-torch.sh GPUPLAN_BIN OUT_DIR
# The virtualenv (~/.cache/gpuplan/torch-venv, or $TORCH_VENV) is made once and
# reinstalled only when python/requirements-torch.txt changes.
set -euo pipefail
bin="$1"; out="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${TORCH_VENV:-$HOME/.cache/gpuplan/torch-venv}"
req="$here/python/requirements-torch.txt"
if ! cmp -s "$req" "$venv/.requirements-torch.txt"; then
  echo "test-torch: torch, numpy, matplotlib ($(grep -v '^#' "$req" | tr '\n' ' ')) into $venv (several GB the first time)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.requirements-torch.txt"
fi
"$venv/bin/python" -c 'import torch, numpy, matplotlib; print("test-torch: torch", torch.__version__)'
GPUPLAN_BIN="$bin" "$venv/bin/python" "$here/scripts/real_training.py" --python "$venv/bin/python" --out "$out"
