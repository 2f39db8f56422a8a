#!/usr/bin/env bash
# `make test-py`: build the gpuplan wheel (maturin, from python/pyproject.toml,
# reusing the crates `cargo test` compiled in $CARGO_TARGET_DIR), install it in a fresh
# virtualenv, and run the pytest suite against the CLI binary.
#   test-py.sh TOOLS_VENV GPUPLAN_BIN
set -euo pipefail
tools="$1"; bin="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
: "${CARGO_TARGET_DIR:?CARGO_TARGET_DIR must be set (the Makefile exports it)}"
wheels="$CARGO_TARGET_DIR/wheels"
fresh="$CARGO_TARGET_DIR/py-test-venv"

# maturin builds crates/py alone: it must get the workspace's features, or it
# compiles HiGHS and every crate above serde a second time (crates/py/Cargo.toml,
# "feature parity").
python3 "$here/scripts/check-wheel-reuse.py"
rm -f "$wheels"/gpuplan-*.whl
start=$(date +%s)
(cd "$here/python" && "$tools/bin/maturin" build --release --locked --interpreter python3 --out "$wheels")
echo "test-py: wheel built in $(( $(date +%s) - start )) s"
wheel=$(ls "$wheels"/gpuplan-*.whl)

# A fresh environment each run: the wheel must install on its own.
python3 -m venv --clear "$fresh"
pytest_pin=$(grep '^pytest==' "$here/python/requirements-dev.txt")
# numpy for examples/numpy_train.py, which python/tests/test_job.py runs under
# `gpuplan serve` with this venv's interpreter (CI's python3 has no numpy).
numpy_pin=$(grep '^numpy==' "$here/python/requirements-dev.txt")
"$fresh/bin/pip" install --quiet --disable-pip-version-check "$wheel" "$pytest_pin" "$numpy_pin"
"$fresh/bin/python" -c "import gpuplan; print('gpuplan.policies():', gpuplan.policies())"
# From the repository root, so `import gpuplan` finds the installed wheel,
# not python/gpuplan (which has no native module).
cd "$here"
GPUPLAN_BIN="$bin" "$fresh/bin/pytest" -q -p no:cacheprovider python/tests
