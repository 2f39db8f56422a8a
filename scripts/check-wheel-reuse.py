#!/usr/bin/env python3
"""Does the wheel's build reuse what `cargo test --workspace` compiled?

maturin builds crates/py alone (`-p gpuplan-py`, the features in
python/pyproject.toml). Cargo turns on a dependency's features by the
packages it builds, so a dependency that the workspace's other members or
dev-dependencies give more features gets compiled a second time for the
wheel, and everything above it too: HiGHS's C++ (through bindgen's
itertools), serde, our own crates. crates/py/Cargo.toml lists the
workspace's features for those ("feature parity"). This script compares
the two unit graphs and names every dependency whose features differ, with
the line to add; `scripts/test-py.sh` runs it before maturin.

The unit graph is unstable Cargo output: read with RUSTC_BOOTSTRAP=1, in a
target directory of its own (nothing is compiled).
    check-wheel-reuse.py        (exit 1 on a difference)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wheel_features():
    """The features maturin turns on (python/pyproject.toml)."""
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        m = re.search(r"^features\s*=\s*\[([^\]]*)\]", f.read(), re.M)
    names = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return ",".join("gpuplan-py/" + n for n in names)


def unit_graph(args, target_dir):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1", CARGO_TARGET_DIR=target_dir)
    out = subprocess.run(
        ["cargo", *args, "--release", "--locked", "--unit-graph", "-Z", "unstable-options"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)["units"]


def identities(units):
    """Each unit's identity: what it is, its features and its dependencies'
    identities (as Cargo's hash of a unit covers), and whether it runs on
    the host (a build script's or proc-macro's dependency)."""
    memo = {}

    def ident(i):
        if i not in memo:
            u = units[i]
            deps = tuple(sorted(ident(d["index"]) for d in u["dependencies"]))
            memo[i] = (u["pkg_id"], u["target"]["name"], u["mode"], tuple(u["features"]),
                       json.dumps(u["profile"], sort_keys=True), deps)
        return memo[i]

    host = set()
    stack = [i for i, u in enumerate(units)
             if "proc-macro" in u["target"]["kind"] or u["target"]["kind"] == ["custom-build"]]
    while stack:
        i = stack.pop()
        if i not in host:
            host.add(i)
            stack.extend(d["index"] for d in units[i]["dependencies"])
    return [(ident(i), i in host) for i in range(len(units))]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ws = identities(unit_graph(["test", "--workspace", "--no-run"], tmp))
        py = identities(unit_graph(["build", "-p", "gpuplan-py", "--lib", "--features", wheel_features()], tmp))
    ws_ids = {i for i, _ in ws}
    ws_pkgs = {i[0] for i, _ in ws}
    by_kind = {}
    for (i, host) in ws:
        by_kind.setdefault((i[0], i[1], i[2], host), set()).add(i[3])
    problems = []
    for (i, host) in sorted(set(py)):
        pkg, name, mode, feats = i[0], i[1], i[2], i[3]
        if i in ws_ids or pkg not in ws_pkgs or name == "_gpuplan":
            continue  # reused, only the wheel's (pyo3 and its own), or crates/py itself
        theirs = by_kind.get((pkg, name, mode, host), set())
        if feats not in theirs and mode == "build" and "custom-build" not in name:
            short = pkg.split("#")[-1]
            want = sorted(theirs, key=len)[-1] if theirs else ()
            problems.append(f"  {short} ({'host' if host else 'target'}): wheel {list(feats)}, workspace {list(want)}"
                            f" -> crates/py/Cargo.toml [{'build-dependencies' if host else 'dependencies'}]")
    if problems:
        print("check-wheel-reuse: maturin would compile these dependencies again, with other features than"
              " `cargo test --workspace` (and everything above them):", file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    print("check-wheel-reuse: the wheel reuses the workspace's dependencies")


if __name__ == "__main__":
    main()
