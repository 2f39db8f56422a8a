#!/usr/bin/env bash
# Installs what gpuplan needs on a fresh Debian machine, idempotently:
# nothing is installed twice, and nothing at all if everything is present.
#   setup.sh native   cargo + rustfmt/clippy, cmake and clang (HiGHS builds from C++),
#                     python3 and slurm-wlm (the executor's end-to-end tests)
#   setup.sh py       native + a virtualenv with maturin and pytest pinned in
#                     python/requirements-dev.txt (~/.cache/gpuplan/py-venv, or $PY_VENV)
#   setup.sh web      native + Debian's rustc-web (wasm32 std source), wasm-ld-16,
#                     chromium (browser tests), node/npm, wasm-bindgen-cli, npm ci in web/
set -euo pipefail
what="${1:-native}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

apt_missing=()
need_apt() { dpkg -s "$1" >/dev/null 2>&1 || apt_missing+=("$1"); }

case "$what" in
  native|py)
    need_apt cmake; need_apt clang; need_apt pkg-config
    # The executor's end-to-end tests run examples/sleep_train.py.
    need_apt python3
    # tests/slurm.rs starts a real two-node Slurm cluster (scripts/slurm-cluster.sh).
    need_apt slurm-wlm
    # ... with job accounting (ACCOUNTING=1), for `trace import-slurm`'s test.
    need_apt slurmdbd; need_apt mariadb-server
    # The Python package's build and tests make virtualenvs (Debian splits venv out).
    if [ "$what" = py ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_apt python3-venv; fi
    ;;
  web)
    need_apt cmake; need_apt clang; need_apt pkg-config
    need_apt rustc-web; need_apt cargo-web; need_apt rust-web-src; need_apt lld-16
    need_apt chromium
    command -v node >/dev/null 2>&1 || need_apt nodejs
    command -v npm >/dev/null 2>&1 || need_apt npm
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

if [ "$what" = web ]; then
  # The CLI must equal the wasm-bindgen crate version pinned (with =) in Cargo.lock.
  here="$(cd "$(dirname "$0")/.." && pwd)"
  want="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/version = |"/, ""); print; exit}' "$here/Cargo.lock")"
  have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
  if [ "$have" != "$want" ]; then
    echo "setup: installing wasm-bindgen-cli $want (cargo install, a few minutes)"
    cargo install wasm-bindgen-cli --version "$want"
  fi
  lock="$here/web/package-lock.json"
  stamp="$here/web/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
    echo "setup: npm ci in web/"
    (cd "$here/web" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

if [ "$what" = py ]; then
  # The build tools of the wheel, pinned; reinstalled only when the pins change.
  here="$(cd "$(dirname "$0")/.." && pwd)"
  venv="${PY_VENV:-$HOME/.cache/gpuplan/py-venv}"
  req="$here/python/requirements-dev.txt"
  if ! cmp -s "$req" "$venv/.requirements-dev.txt"; then
    echo "setup: python tools ($(grep -v '^#' "$req" | tr '\n' ' ')) into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/.requirements-dev.txt"
  fi
fi
