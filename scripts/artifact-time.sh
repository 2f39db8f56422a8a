#!/usr/bin/env bash
# Times the Pollux artifact's own simulator on this machine. The speed
# targets are ratios to it (issue 17: "28 s (100x)"), and the machines we
# are lent differ by up to 2x, so state a speed-up against the artifact
# timed on the same machine, the same day, idle.
#
#   scripts/artifact-time.sh ARTIFACT_DIR [WORKLOAD [POLICY]]
#
# ARTIFACT_DIR holds the artifact's simulator/ (petuum/adaptdl, branch
# osdi21-artifact, commit c793c70; its code is not in this repository:
# `git -C ADAPTDL_CLONE archive osdi21-artifact simulator | tar x -C DIR`).
# WORKLOAD defaults to workloads/workload-6.csv (relative to simulator/),
# POLICY to pollux. The first run makes a virtualenv in ARTIFACT_DIR/.venv
# with versions that still run the 2021 code on Python 3.11 (its pinned
# numpy 1.19 and pandas 1.1 do not build there; numpy >= 1.24 lacks
# np.float, pandas >= 2 lacks DataFrame.append). Prints the wall, user and
# system seconds and the artifact's average JCT.
set -euo pipefail
dir=$(cd "${1:?usage: artifact-time.sh ARTIFACT_DIR [WORKLOAD [POLICY]]}" && pwd)
workload=${2:-workloads/workload-6.csv}
policy=${3:-pollux}
[ -f "$dir/simulator/simulator.py" ] || { echo "artifact-time.sh: no simulator/simulator.py in $dir" >&2; exit 2; }
venv=$dir/.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy==1.23.5 pandas==1.5.3 scipy==1.9.3 pymoo==0.4.2.2 autograd==1.9.1 dill==0.3.8
fi
log=$(mktemp)
trap 'rm -f "$log" "$log.time"' EXIT
cd "$dir/simulator"
/usr/bin/time -f "%e s wall, %U s user, %S s system" -o "$log.time" \
  "$venv/bin/python" simulator.py "$workload" --policy "$policy" > "$log" 2>/dev/null
cat "$log.time"
grep '^Average JCT' "$log" | tail -1
