#!/usr/bin/env python3
"""A minimal PyTorch DDP job that follows the gpuplan job protocol.

    name = "ddp-mnist-like"
    command = "python3 examples/pytorch_ddp.py --examples 1000000"
    min_gpus = 1
    max_gpus = 8
    batch_size = 128
    max_batch_size = 2048

One process per GPU (gpuplan starts them); rendezvous through the env://
variables gpuplan sets; checkpoint and exit 143 on SIGTERM; resume from
GPUPLAN_CHECKPOINT_DIR; rank 0 reports step times and gradient statistics.
The gradient statistics follow Pollux: with several replicas, the variance
of the per-replica gradients around their mean estimates tr(Σ); with one
replica, successive accumulation micro-batches play that part.
"""
import argparse
import json
import os
import signal
import sys
import time
import urllib.request

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--examples", type=int, default=1_000_000)
a = p.parse_args()
env = os.environ
rank, local_rank, world = int(env["RANK"]), int(env["LOCAL_RANK"]), int(env["WORLD_SIZE"])
local_bsz = int(env["GPUPLAN_LOCAL_BSZ"])
accum = int(env["GPUPLAN_ACCUM_STEPS"])
m0 = int(env.get("GPUPLAN_BATCH_SIZE", local_bsz * world * (accum + 1)))
ckpt = os.path.join(env["GPUPLAN_CHECKPOINT_DIR"], "model.pt")

use_cuda = torch.cuda.is_available()
device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
if use_cuda:
    torch.cuda.set_device(device)
dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")

model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
state = {"examples": 0, "step": 0}
if os.path.exists(ckpt):
    saved = torch.load(ckpt, map_location=device)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    state = saved["state"]

stop = False
signal.signal(signal.SIGTERM, lambda *_: globals().__setitem__("stop", True))


def save():
    if rank == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)


def report(body):
    # The job's token is in the 0600 file the daemon names, never in the environment.
    with open(env["GPUPLAN_JOB_TOKEN_FILE"]) as f:
        token = f.read().strip()
    req = urllib.request.Request(env["GPUPLAN_REPORT_URL"], data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}"})
    try:
        urllib.request.urlopen(req, timeout=2).read()
    except Exception:
        pass  # the daemon may be restarting


params = list(model.parameters())
for p_ in params:
    p_.grad = torch.zeros_like(p_)


def flat_grad():
    return torch.cat([p.grad.reshape(-1) for p in params])


def set_grad(flat):
    i = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[i:i + n].view_as(p))
        i += n


# Gradients are averaged by hand (what DDP does), so the per-replica
# gradients are at hand for the noise estimate.
batch = world * local_bsz * (accum + 1)
while state["examples"] < a.examples:
    # Stop together: any rank that got SIGTERM makes all of them checkpoint.
    flag = torch.tensor([1.0 if stop else 0.0], device=device)
    dist.all_reduce(flag)
    if flag.item() > 0:
        save()
        sys.exit(143)
    t0 = time.time()
    micro = []
    for i in range(accum + 1):
        x = torch.randn(local_bsz, 1, 28, 28, device=device)
        y = torch.randint(0, 10, (local_bsz,), device=device)
        prev = flat_grad().clone() if i > 0 else None
        (nn.functional.cross_entropy(model(x), y) / (accum + 1)).backward()
        now = flat_grad()
        micro.append((now - prev if prev is not None else now.clone()) * (accum + 1))
    t_accum = (time.time() - t0) / (accum + 1)
    local = flat_grad()
    mean = local.clone()
    dist.all_reduce(mean)
    mean /= world
    set_grad(mean)
    opt.step()
    opt.zero_grad(set_to_none=False)
    for p_ in params:
        p_.grad.zero_()
    if use_cuda:
        torch.cuda.synchronize()
    step_time = time.time() - t0
    state["step"] += 1
    state["examples"] += batch
    # Pollux's estimate: the spread of independent gradients around their
    # mean gives tr(Sigma) at their batch size; scale it to M0.
    if world > 1:
        sq_local = (local * local).sum().reshape(1)
        dist.all_reduce(sq_local)
        spread = (float(sq_local) / world - float((mean * mean).sum())) * world / (world - 1)
        per_batch = local_bsz * (accum + 1)
        var, sqr = spread * per_batch / m0, float((mean * mean).sum()) - spread / world
    elif accum > 0:
        g = torch.stack(micro)
        spread = float(((g - g.mean(0)) ** 2).sum(1).mean()) * (accum + 1) / accum
        var, sqr = spread * local_bsz / m0, float((mean * mean).sum()) - spread / (accum + 1)
    else:
        var, sqr = None, None  # one GPU without accumulation: nothing to compare
    if rank == 0 and state["step"] % 10 == 0:
        body = {"step": state["step"], "step_time_s": step_time, "accum_time_s": t_accum,
                "local_bsz": local_bsz, "accum_steps": accum, "progress": state["examples"]}
        if var is not None:
            body.update(grad_sqr=max(sqr, 0.0), grad_var=max(var, 0.0))
        report(body)
save()
# Done: tell gpuplan before shutting down, so a stop that arrives while the
# process exits cannot turn completion into a relaunch.
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if rank == 0 and os.environ.get("GPUPLAN_DONE_FILE"):
    open(os.environ["GPUPLAN_DONE_FILE"], "w").close()
dist.destroy_process_group()
