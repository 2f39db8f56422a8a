#!/usr/bin/env python3
"""A stand-in for a training job that follows the gpuplan job protocol.

It "trains" by sleeping: each optimizer step takes the time a Pollux-style
model gives for its local batch and world size, and processes
GPUPLAN_BATCH_SIZE examples. It resumes from its checkpoint, checkpoints and
exits 143 on SIGTERM, reports step times and gradient statistics to the
daemon, and when it has processed --examples examples creates
GPUPLAN_DONE_FILE and exits 0. The daemon's
tests run it; it needs only the Python standard library.

With --lock-dir it also checks the daemon's promises: every rank holds an
exclusive flock on its (job, rank) and on its GPU while it runs, so two
copies of one job, or two jobs on one GPU, at the same time are caught and
logged to LOCK_DIR/conflicts.log.
"""
import argparse
import fcntl
import json
import os
import signal
import sys
import time
import urllib.request

p = argparse.ArgumentParser()
p.add_argument("--examples", type=int, default=20000, help="examples to process in total")
p.add_argument("--step-s", type=float, default=0.05, help="compute seconds of a step at 32 examples per GPU")
p.add_argument("--lock-dir", default=None)
p.add_argument("--crash-at", type=int, default=None, help="exit 1 at this step (tests)")
p.add_argument("--term-s", type=float, default=0.0, help="seconds a checkpoint on SIGTERM takes (tests)")
a = p.parse_args()

env = os.environ
rank, local_rank, world = int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("WORLD_SIZE", 1))
name = env.get("GPUPLAN_JOB_NAME", "job")
batch = int(env.get("GPUPLAN_BATCH_SIZE", 32))
local = int(env.get("GPUPLAN_LOCAL_BSZ", 0)) or max(1, batch // world)
accum = int(env.get("GPUPLAN_ACCUM_STEPS", 0))
visible = env.get("CUDA_VISIBLE_DEVICES", "").split(",")
my_gpu = visible[local_rank] if local_rank < len(visible) else "none"
# Under Slurm device indices repeat across nodes (0-3 on each), so the lock names the node.
node = env.get("SLURMD_NODENAME", "")
gpu_key = f"{node}-{my_gpu}" if node else my_gpu
ckpt_dir = env.get("GPUPLAN_CHECKPOINT_DIR", ".")
ckpt = os.path.join(ckpt_dir, "state.json")

locks = []
if a.lock_dir:
    os.makedirs(a.lock_dir, exist_ok=True)
    for key in (f"job-{name}-rank-{rank}", f"gpu-{gpu_key}"):
        f = open(os.path.join(a.lock_dir, key + ".lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            with open(os.path.join(a.lock_dir, "conflicts.log"), "a") as c:
                c.write(f"{time.time():.3f} {name} rank {rank} could not lock {key}\n")
            sys.exit(3)
        locks.append(f)
    with open(os.path.join(a.lock_dir, "starts.log"), "a") as s:
        s.write(json.dumps({"job": name, "rank": rank, "world": world, "gpu": my_gpu,
                            "visible": visible, "attempt": env.get("GPUPLAN_ATTEMPT"), "node": node,
                            "batch": batch, "t": time.time()}) + "\n")

stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)

done_examples, step = 0, 0
try:
    with open(ckpt) as f:
        s = json.load(f)
        done_examples, step = s["examples"], s["step"]
except (OSError, ValueError, KeyError):
    pass


def save():
    if rank != 0:
        return
    tmp = ckpt + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"examples": done_examples, "step": step}, f)
    os.replace(tmp, ckpt)


def job_token():
    """The job's token: in the 0600 file the daemon names (never in the environment)."""
    path = env.get("GPUPLAN_JOB_TOKEN_FILE")
    if not path:
        return None
    with open(path) as f:
        return f.read().strip()


def report(step_time, accum_time):
    url, token = env.get("GPUPLAN_REPORT_URL"), job_token()
    if rank != 0 or not url:
        return
    body = json.dumps({"step": step, "step_time_s": step_time, "accum_time_s": accum_time,
                       "local_bsz": local, "accum_steps": accum, "grad_sqr": 1.0,
                       "grad_var": 4.0, "progress": done_examples}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        urllib.request.urlopen(req, timeout=1).read()
    except Exception:
        pass  # the daemon may be restarting; training goes on


print(f"{name} rank {rank}/{world} on {my_gpu}: batch {batch} = {world} x {local} x {accum + 1}, from step {step}", flush=True)
compute = a.step_s * (0.5 + 0.5 * local / 32)
sync = 0.0 if world == 1 else a.step_s * (0.3 + 0.05 * (world - 2))
step_time = accum * compute + max(compute, sync) + 0.1 * min(compute, sync)
while done_examples < a.examples:
    if stop:
        time.sleep(a.term_s)
        save()
        print(f"{name} rank {rank}: SIGTERM at step {step}, checkpointed", flush=True)
        sys.exit(143)
    if a.crash_at is not None and step >= a.crash_at:
        print(f"{name} rank {rank}: simulated crash at step {step}", flush=True)
        sys.exit(1)
    time.sleep(step_time)
    step += 1
    done_examples += batch
    save()
    report(step_time, compute)
# Done: say so before anything else (a stop arriving now must not undo it),
# and keep a late SIGTERM from killing the interpreter while it shuts down.
signal.signal(signal.SIGTERM, signal.SIG_IGN)
done_file = env.get("GPUPLAN_DONE_FILE")
if done_file and rank == 0:
    open(done_file, "w").close()
print(f"{name} rank {rank}: done after {step} steps", flush=True)
if a.lock_dir and rank == 0:
    with open(os.path.join(a.lock_dir, "done.log"), "a") as d:
        d.write(name + "\n")
