#!/usr/bin/env bash
# Builds the browser explorer into web/dist/: the wasm module with Debian's
# rustc-web (no rustup target for wasm32 here; std is rebuilt with
# -Zbuild-std), wasm-bindgen's JS glue, then the site bundle (esbuild).
# Run it through `make web`, which installs the tools first (setup.sh web).
set -euo pipefail
cd "$(dirname "$0")/.."
WASM_TARGET_DIR="${WASM_TARGET_DIR:-$HOME/.cache/gpuplan/target-wasm}"
# -p gpuplan-wasm alone, so the root package's `highs` feature is not unified in.
env -u RUSTUP_TOOLCHAIN \
  RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld-16 \
  CARGO_TARGET_DIR="$WASM_TARGET_DIR" \
  /usr/bin/cargo build -p gpuplan-wasm --release --locked \
  --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort
wasm-bindgen --target web --no-typescript --out-dir web/pkg \
  "$WASM_TARGET_DIR/wasm32-unknown-unknown/release/gpuplan_wasm.wasm"
(cd web && node build.mjs)
