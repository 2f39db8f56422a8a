#!/usr/bin/env python3
"""A real data-parallel trainer in numpy alone, on gpuplan.job (docs/job-protocol.md, "The job library").

    name = "numpy-mlp"
    command = "PYTHONPATH=python exec python3 examples/numpy_train.py --examples 200000"
    min_gpus = 1
    max_gpus = 2
    batch_size = 64
    max_batch_size = 256

A one-hidden-layer MLP (tanh, softmax) learns a 10-class problem whose labels
come from a fixed random teacher network, generated from --seed (no
download). Every rank computes the gradients of its share of the step's
batch; the ranks exchange them through gpuplan.job.StarGroup (TCP through
rank 0, no torch) and average them, so each rank applies the same SGD step.
Gradient noise comes from the replicas' gradients, the accumulation
micro-batches', or, on one rank without accumulation, the two halves of the
micro-batch. On SIGTERM all ranks stop at the next step, rank 0 checkpoints
and reports it, and they exit 143; the next attempt resumes from the
checkpoint with whatever world size and batch gpuplan gives it. Rank 0 logs
one JSON line per step (``gpuplan.job {"event": "step", "loss": ...}``).

``make test`` runs it under ``gpuplan serve`` (python/tests/test_job.py).
"""
import argparse
import os

# One BLAS thread per rank: ranks share the machine's cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time  # noqa: E402

import numpy as np  # noqa: E402

from gpuplan.job import Job  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--examples", type=float, default=200_000, help="progress (examples at M0) to train for")
p.add_argument("--lr", type=float, default=0.2, help="SGD learning rate at the job's initial batch (M0)")
p.add_argument("--lr-rule", default="sqrt", choices=["none", "linear", "sqrt", "adascale"])
p.add_argument("--checkpoint-interval-s", type=float, default=30.0)
p.add_argument("--report-every", type=int, default=10)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--dim", type=int, default=64, help="input features")
p.add_argument("--hidden", type=int, default=128)
p.add_argument("--classes", type=int, default=10)
p.add_argument("--dataset", type=int, default=20_000, help="training examples")
p.add_argument("--sleep-per-example-s", type=float, default=0.0,
               help="extra seconds per example of each micro-batch (tests: a slower model on a fast machine)")
a = p.parse_args()


def make_data(seed, n, dim, classes):
    """A learnable problem: inputs N(0, 1), labels the argmax of a fixed random teacher MLP."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 1 / np.sqrt(dim), (dim, 32))
    w2 = rng.normal(0, 1, (32, classes))
    x = rng.normal(0, 1, (n + 2000, dim))
    y = np.argmax(np.tanh(x @ w1) @ w2, axis=1)
    return x[:n], y[:n], x[n:], y[n:]


def init_params(seed, dim, hidden, classes):
    rng = np.random.default_rng(seed + 1)
    return {
        "w1": rng.normal(0, 1 / np.sqrt(dim), (dim, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.normal(0, 1 / np.sqrt(hidden), (hidden, classes)),
        "b2": np.zeros(classes),
    }


NAMES = ("w1", "b1", "w2", "b2")


def flatten(g):
    return np.concatenate([g[k].ravel() for k in NAMES])


def unflatten(flat, like):
    out, i = {}, 0
    for k in NAMES:
        n = like[k].size
        out[k] = flat[i:i + n].reshape(like[k].shape)
        i += n
    return out


def forward(params, x):
    h = np.tanh(x @ params["w1"] + params["b1"])
    z = h @ params["w2"] + params["b2"]
    z -= z.max(axis=1, keepdims=True)
    prob = np.exp(z)
    prob /= prob.sum(axis=1, keepdims=True)
    return h, prob


def loss_and_grad(params, x, y):
    """Mean cross-entropy of (x, y) and its gradient, flat."""
    h, prob = forward(params, x)
    n = len(y)
    loss = -np.mean(np.log(prob[np.arange(n), y] + 1e-12))
    dz = prob
    dz[np.arange(n), y] -= 1
    dz /= n
    dh = (dz @ params["w2"].T) * (1 - h * h)
    g = {"w1": x.T @ dh, "b1": dh.sum(0), "w2": h.T @ dz, "b2": dz.sum(0)}
    return loss, flatten(g)


def eval_loss(params, x, y):
    _, prob = forward(params, x)
    return float(-np.mean(np.log(prob[np.arange(len(y)), y] + 1e-12))), float(np.mean(prob.argmax(1) == y))


x_train, y_train, x_test, y_test = make_data(a.seed, a.dataset, a.dim, a.classes)

with Job(total_progress=a.examples, lr_rule=a.lr_rule, checkpoint_interval_s=a.checkpoint_interval_s,
         report_every=a.report_every, group="star") as job:
    state = job.restore(default={"params": init_params(a.seed, a.dim, a.hidden, a.classes)})
    params = state["params"]
    per_rank = job.local_bsz * job.micro_steps
    while job.progress < a.examples:
        if job.should_stop():
            job.stop(state)
        with job.step() as st:
            # The step's global batch depends on the step alone, so a resumed
            # job sees the data it would have seen; each rank takes its share.
            rng = np.random.default_rng([a.seed, job.step_count])
            idx = rng.integers(0, a.dataset, job.batch_size)[job.rank * per_rank:(job.rank + 1) * per_rank]
            # Micro-batches; on one rank without accumulation, two halves of
            # the micro-batch: two independent gradients for the noise.
            bounds = np.cumsum([0] + job.split_sizes())
            pieces = [idx[lo:hi] for lo, hi in zip(bounds, bounds[1:])]
            grads, losses, sizes = [], [], []
            for piece in pieces:
                with st.accum():
                    loss, g = loss_and_grad(params, x_train[piece], y_train[piece])
                    if a.sleep_per_example_s:
                        time.sleep(a.sleep_per_example_s * len(piece))
                grads.append(g)
                losses.append(loss)
                sizes.append(len(piece))
            w = np.asarray(sizes, float) / sum(sizes)
            local = np.tensordot(w, np.stack(grads), axes=1)
            local_loss = float(w @ np.asarray(losses))
            if job.world_size > 1:
                # Every rank's gradient and loss, then their mean: what all-reduce gives.
                parts = job.group.allgather(np.append(local, local_loss).astype(np.float64).tobytes())
                rows = np.stack([np.frombuffer(x, dtype=np.float64) for x in parts])
                replicas, step_loss = rows[:, :-1], float(rows[:, -1].mean())
                mean = replicas.mean(0)
                job.report_gradients(list(replicas), per_rank)
            else:
                mean, step_loss = local, local_loss
                if len(grads) > 1:
                    job.report_gradients(grads, sizes)
            lr = job.lr(a.lr)
            params = {k: params[k] - lr * v for k, v in unflatten(mean, params).items()}
            state["params"] = params
            st.loss = round(step_loss, 6)
            st.extra["lr"] = round(lr, 6)
            if (job.step_count + 1) % 10 == 0 and job.is_chief:
                with st.untimed():
                    st.extra["eval_loss"], st.extra["eval_acc"] = (round(v, 6) for v in eval_loss(params, x_test, y_test))
        if job.checkpoint_due():
            job.checkpoint(state)
    final_loss, final_acc = eval_loss(params, x_test, y_test)
    job.log("final", eval_loss=round(final_loss, 6), eval_acc=round(final_acc, 4))
    job.done()
