# The two commands of the README: `make demo` and `make test`.
# Both install what is missing first (scripts/setup.sh), idempotently.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
# Outside the clone so a fresh clone on the same machine reuses the HiGHS build.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/gpuplan/target
CARGO ?= cargo
GPUPLAN := $(CARGO_TARGET_DIR)/release/gpuplan
REPORT ?= report

.PHONY: setup demo test fmt-check clippy unit build-release deps-check

setup:
	@bash scripts/setup.sh native

build-release: setup
	$(CARGO) build --release --locked --bin gpuplan

demo: build-release web
	@bash scripts/demo.sh "$(GPUPLAN)" "$(REPORT)"
	@echo "explorer: http://localhost:$(WEB_PORT)/  (serve it with: make serve)"

fmt-check: setup
	$(CARGO) fmt --all -- --check

clippy: setup
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings

unit: setup
	$(CARGO) test --release --workspace --locked

# The binary the Python and browser tests run: the one `cargo test` builds for
# tests/cli.rs (a no-op after `unit`). `cargo build --bin gpuplan` resolves
# fewer features (no dev-dependencies, no other members) and would compile the
# workspace and most of its dependencies a second time; `make demo` uses it.
.PHONY: test-bin
test-bin: setup
	$(CARGO) test --release --workspace --locked --no-run

deps-check: setup
	bash scripts/check-deps.sh

test: fmt-check clippy deps-check unit test-py test-web
	@echo "make test: all checks passed"

# The Python package (crates/py + python/, docs/python.md): its PyO3 layer
# under clippy (the workspace's clippy compiles the JSON API alone), then
# the wheel built by maturin, installed in a fresh virtualenv and tested
# against the CLI (scripts/test-py.sh).
PY_VENV ?= $(HOME)/.cache/gpuplan/py-venv
.PHONY: setup-py clippy-py test-py

setup-py:
	@PY_VENV="$(PY_VENV)" bash scripts/setup.sh py

clippy-py: setup-py
	$(CARGO) clippy --release --workspace --all-targets --locked --features gpuplan-py/python -- -D warnings

test-py: setup-py clippy-py test-bin
	bash scripts/test-py.sh "$(PY_VENV)" "$(GPUPLAN)"

# Real PyTorch jobs under `gpuplan serve` on fake GPUs (not part of `make test`;
# a cached torch virtualenv, several GB): docs/real-training.md.
TORCH_OUT ?= out/torch
.PHONY: test-torch
test-torch: build-release
	bash scripts/test-torch.sh "$(GPUPLAN)" "$(TORCH_OUT)"

# Fuzz every trace loader (not part of `make test`): make fuzz FUZZ_SECONDS=60
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)
# Our plan fuzzer (not part of `make test`): generated rounds through every
# planner and the validator, 10^5 by default: make fuzz-plans FUZZ_PLANS=100000
FUZZ_PLANS ?= 100000
.PHONY: fuzz-plans
fuzz-plans: setup
	PROPTEST_CASES=$(FUZZ_PLANS) $(CARGO) test --release --locked -p gpuplan-solve --test fuzz_plans -- --nocapture
# The browser explorer (crates/wasm + web/): wasm via Debian's rustc-web, site via esbuild.
WEB_PORT ?= 8066
.PHONY: setup-web web serve test-web bench-web

setup-web:
	@bash scripts/setup.sh web

web: setup-web
	bash scripts/build-web.sh

serve: web
	cd web && PORT=$(WEB_PORT) node serve.mjs

test-web: web test-bin
	cd web && GPUPLAN_BIN="$(GPUPLAN)" node --test --test-concurrency=1 tests/explorer.test.mjs

# Measurements for the README's explorer table (not part of make test).
bench-web: web
	cd web && node tests/bench.mjs pollux-mip
