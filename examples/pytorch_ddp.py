#!/usr/bin/env python3
"""A data-parallel PyTorch job on gpuplan.job (docs/job-protocol.md, "The job library").

    name = "torch-mlp"
    command = "PYTHONPATH=python exec python3 examples/pytorch_ddp.py --examples 400000"
    min_gpus = 1
    max_gpus = 4
    batch_size = 64
    max_batch_size = 512

A three-layer MLP learns a 10-class problem whose labels come from a fixed
random teacher network over Gaussian inputs, generated from --seed at start
(no download; the same data on every rank and attempt). One process per GPU
(gpuplan starts them); gpuplan.job.torch_init joins them (NCCL on GPUs, gloo
on CPUs) and torch_train_step averages the gradients across ranks and
measures the gradient noise from the replicas, the accumulation
micro-batches, or the two halves of the micro-batch. On SIGTERM all ranks
stop at the next step and rank 0 checkpoints (model, optimizer, the job's
counters) and exits 143; the next attempt resumes with its new world size,
batch and learning rate. Rank 0 prints one JSON line per step
(``gpuplan.job {"event": "step", "loss": ...}``), for plots.
"""
import argparse
import os
import time

# One intra-op thread per rank: ranks share the machine's cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from gpuplan.job import Job, catch_sigterm, torch_init, torch_train_step  # noqa: E402

# Importing torch takes seconds; a stop during it must not kill the rank.
catch_sigterm()
import torch  # noqa: E402
from torch import nn  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--examples", type=float, default=400_000, help="progress (examples) to train for")
p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate at the job's initial batch (M0)")
p.add_argument("--lr-rule", default="sqrt", choices=["none", "linear", "sqrt", "adascale"])
p.add_argument("--checkpoint-interval-s", type=float, default=30.0)
p.add_argument("--report-every", type=int, default=10)
p.add_argument("--eval-every", type=int, default=20, help="steps between held-out evaluations (rank 0)")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--dim", type=int, default=128)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--classes", type=int, default=10)
p.add_argument("--dataset", type=int, default=50_000)
p.add_argument("--sleep-per-example-s", type=float, default=0.0,
               help="extra compute seconds per example, standing in for an accelerator's time when fake GPUs "
                    "share a few CPU cores (docs/real-training.md)")
a = p.parse_args()


def make_data(seed, n, dim, classes):
    """Inputs N(0, 1); labels the argmax of a fixed random teacher MLP: learnable, not memorisable at once."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(dim, 64, generator=g) / dim**0.5
    w2 = torch.randn(64, classes, generator=g)
    x = torch.randn(n + 2000, dim, generator=g)
    y = (torch.tanh(x @ w1) @ w2).argmax(1)
    return x[:n], y[:n], x[n:], y[n:]


with Job(total_progress=a.examples, lr_rule=a.lr_rule, checkpoint_interval_s=a.checkpoint_interval_s,
         report_every=a.report_every) as job:
    device = torch_init(job)
    torch.set_num_threads(1)
    x, y, x_test, y_test = (t.to(device) for t in make_data(a.seed, a.dataset, a.dim, a.classes))
    torch.manual_seed(a.seed + 1)
    model = nn.Sequential(nn.Linear(a.dim, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    saved = job.restore(default=None)
    if saved is not None:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])

    def snapshot():
        return {"model": model.state_dict(), "opt": opt.state_dict()}

    def evaluate():
        with torch.no_grad():
            out = model(x_test)
            return float(nn.functional.cross_entropy(out, y_test)), float((out.argmax(1) == y_test).float().mean())

    def loss_fn(out, target):
        if a.sleep_per_example_s:
            time.sleep(a.sleep_per_example_s * len(target))
        return nn.functional.cross_entropy(out, target)

    b, per_rank = job.local_bsz, job.local_bsz * job.micro_steps
    while job.progress < a.examples:
        if job.should_stop():
            job.stop(snapshot())
        with job.step() as st:
            # The step's global batch depends on the step alone: a resumed job sees the same stream.
            g = torch.Generator().manual_seed(a.seed * 1_000_003 + job.step_count)
            idx = torch.randint(0, a.dataset, (job.batch_size,), generator=g)[job.rank * per_rank:(job.rank + 1) * per_rank]
            idx = idx.to(device)
            micro = [(x[idx[i * b:(i + 1) * b]], y[idx[i * b:(i + 1) * b]]) for i in range(job.micro_steps)]
            lr = job.lr(a.lr)
            torch_train_step(job, st, model, opt, loss_fn, micro, lr=lr)
            st.loss = round(st.loss, 6)
            st.extra["lr"] = round(lr, 6)
            if (job.step_count + 1) % a.eval_every == 0 and job.is_chief:
                with st.untimed():
                    st.extra["eval_loss"], st.extra["eval_acc"] = (round(v, 6) for v in evaluate())
        if job.checkpoint_due():
            job.checkpoint(snapshot())
    if job.is_chief:
        loss, acc = evaluate()
        job.log("final", eval_loss=round(loss, 6), eval_acc=round(acc, 4))
    job.done()
