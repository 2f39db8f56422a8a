#!/usr/bin/env bash
# Installs what gpuplan needs on a fresh Debian machine, idempotently:
# nothing is installed twice, and nothing at all if everything is present.
#   setup.sh native   cargo + rustfmt/clippy, cmake and clang (HiGHS builds from C++)
set -euo pipefail
what="${1:-native}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

apt_missing=()
need_apt() { dpkg -s "$1" >/dev/null 2>&1 || apt_missing+=("$1"); }

case "$what" in
  native)
    need_apt cmake; need_apt clang; need_apt pkg-config
    # The executor's end-to-end tests run examples/sleep_train.py.
    need_apt python3
    ;;
  *) echo "setup.sh: unknown target '$what'" >&2; exit 2 ;;
esac

if ((${#apt_missing[@]})); then
  echo "setup: installing ${apt_missing[*]} (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing the Rust toolchain (rustup)"
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt -c clippy
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
