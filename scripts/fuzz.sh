#!/usr/bin/env bash
# Fuzz every trace loader for SECONDS each (default 60) and print run counts.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); stable Rust with
# RUSTC_BOOTSTRAP=1 for the sanitizer flag. Not part of `make test`.
set -euo pipefail
SECONDS_EACH="${1:-60}"
cd "$(dirname "$0")/../fuzz"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/gpuplan/fuzz}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
cargo fuzz build -O
for t in $(cargo fuzz list); do
  mkdir -p "corpus/$t"
  out=$(cargo fuzz run -O "$t" "corpus/$t" ../crates/sim/tests/malformed -- \
    -max_total_time="$SECONDS_EACH" -rss_limit_mb=1024 2>&1) || { echo "$out" | tail -40; echo "fuzz: $t FAILED"; exit 1; }
  echo "$t: $(echo "$out" | grep -oE 'Done [0-9]+ runs in [0-9]+ second' | tail -1)"
done
