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

demo: build-release
	@bash scripts/demo.sh "$(GPUPLAN)" "$(REPORT)"

fmt-check: setup
	$(CARGO) fmt --all -- --check

clippy: setup
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings

unit: setup
	$(CARGO) test --release --workspace --locked

deps-check: setup
	bash scripts/check-deps.sh

test: fmt-check clippy deps-check unit
	@echo "make test: all checks passed"

# Fuzz every trace loader (not part of `make test`): make fuzz FUZZ_SECONDS=60
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)
