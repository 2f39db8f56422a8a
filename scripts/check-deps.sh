#!/usr/bin/env bash
# Keeps the crate graph pointing one way: core knows no sibling, solve knows
# only core, sim knows core and solve, exec knows core, solve and sim (its
# estimates run the simulator forward); the Python package (py) knows
# core, solve and sim. Fails `make test` otherwise.
set -euo pipefail
check() {
  local crate="$1"; shift
  local allowed=("$crate" "$@")
  local found
  found=$(cargo tree -p "$crate" -e normal --prefix none --locked 2>/dev/null | awk '{print $1}' | grep '^gpuplan' | sort -u)
  for dep in $found; do
    local ok=0
    for a in "${allowed[@]}"; do [ "$dep" = "$a" ] && ok=1; done
    if [ $ok -eq 0 ]; then echo "check-deps: $crate must not depend on $dep" >&2; exit 1; fi
  done
}
check gpuplan-core
check gpuplan-solve gpuplan-core
check gpuplan-sim gpuplan-core gpuplan-solve
check gpuplan-exec gpuplan-core gpuplan-solve gpuplan-sim
check gpuplan-predict gpuplan-core
check gpuplan-wasm gpuplan-core gpuplan-solve gpuplan-sim
check gpuplan-py gpuplan-core gpuplan-solve gpuplan-sim
# The wasm crate alone must not reach HiGHS (C++, no wasm32 build) or rayon.
for bad in highs-sys rayon; do
  if cargo tree -p gpuplan-wasm -e normal --prefix none --locked --target wasm32-unknown-unknown 2>/dev/null | grep -q "^$bad "; then
    echo "check-deps: gpuplan-wasm must not depend on $bad" >&2; exit 1
  fi
done
echo "check-deps: crate graph ok"
# Inside every crate, and the binary, modules form layers (docs/architecture.md,
# "core's layers", "solve's layers", "The executor"): no module may reach,
# through `crate::`/`super::` paths, one that reaches it.
modules() {
  perl scripts/solve-modules.pl "$1"
}
for src in crates/core/src crates/solve/src crates/sim/src crates/exec/src crates/predict/src \
           crates/wasm/src crates/py/src src; do
  name=${src#crates/}; name=${name%/src}; [ "$name" = src ] && name=binary
  if ! loop=$(modules "$src" | tsort 2>&1 >/dev/null) || [ -n "$loop" ]; then
    echo "check-deps: module cycle inside $name:" >&2
    echo "$loop" >&2
    exit 1
  fi
  echo "check-deps: $name module graph ok (no cycle)"
done
