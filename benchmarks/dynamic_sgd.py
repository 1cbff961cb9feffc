"""Dynamic mini-batch SGD vs the immediate linear rule vs no rescaling, synchronous mode.

Experiment of ``shared/papers/dynamic_sgd.md`` (Lin et al., arXiv 1904.12043): under one sample
budget, train

* ``fixed``   — the final worker count ``k`` from the start, learning rate ``k * eta``;
* ``linear``  — 1 worker, then ``k`` workers at a switch point, learning rate jumps to ``k * eta``;
* ``none``    — the same change, learning rate stays ``eta``;
* ``dynamic`` — the same change, Dynamic SGD: the scale ramps from 1 to ``k`` over 8 steps;
* ``dynamic-long`` — the same ramp over ``T = 1 / (1 - mu)`` steps (10 or 100), the time scale
  of the momentum buffer (our addition, not in the paper);

for momentum 0.9 and 0.99, jumps 1 -> 16 and 1 -> 32, on ``digits`` and ``digits-hard`` (numpy
MLP), over several seeds; report the mean and spread of the final held-out accuracy and loss,
the held-out loss spike after the switch, and loss curves (PNG).

SIMULATION: synchronous data-parallel SGD with ``k`` workers of per-worker batch ``b`` is
exactly one SGD step on the ``k * b`` batch averaged, so each step here draws ``k`` per-worker
batches of ``b`` from the training stream and takes one step on their union, in one process.
The update uses the runtime's own :class:`ray_cluster.ps.optim.MomentumSGD` (LR outside the
buffer, PyTorch form) and :class:`ray_cluster.ps.elastic.LRScaleSchedule`.

Choice of learning rate and batch: per-worker batch ``b = 8``; ``eta = lr_eff * (1 - mu)`` so
both momenta have the same effective step ``eta / (1 - mu) = lr_eff = 0.05`` at one worker and
``0.05 k`` after the switch. An exploration on seed 0 (``lr_eff`` 0.02 .. 0.4) picked the regime
where the comparison says something: at 0.05 keeping the LR (``none``) ends clearly below the
fixed run (so scaling the LR matters at this budget) while the linearly scaled fixed run is
still stable at ``k = 32``; at 0.1 - 0.2 ``none`` caught up with or beat every scaled run (see
``results/dynamic_sgd_highlr.md``), at 0.4 the fixed ``mu = 0.9, k = 32`` run degraded. The
switch comes after 20 % of the budget (12,000 of 60,000 samples on digits, about 11 passes;
30,000 of 150,000 on digits-hard, about 3 of its 10,800 images each).

Usage::

    python benchmarks/dynamic_sgd.py            # full grid, 5 seeds (a few minutes, 1 core)
    python benchmarks/dynamic_sgd.py --quick    # smoke run: one task, one momentum, 2 seeds
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ray_cluster.ps.elastic import LRScaleSchedule
from ray_cluster.ps.optim import MomentumSGD, MomentumState
from ray_cluster.workloads.builtin import MLP, Batch

METHODS = ("fixed", "linear", "none", "dynamic", "dynamic-long")
ELASTIC = METHODS[1:]
RAMP_STEPS = 8  # T of the paper for "dynamic"; "dynamic-long" uses T = 1 / (1 - mu)
SPIKE_WINDOW = 40  # least steps after the switch in which the held-out loss spike is measured


def spike_window(mu: float) -> int:
    """Steps after the switch evaluated one by one: 40, or twice the momentum time scale."""
    return max(SPIKE_WINDOW, 2 * round(1 / (1 - mu)))


@dataclass(frozen=True, kw_only=True)
class Task:
    """One workload and its budget."""

    dataset: str                #: workload dataset
    batch: int                  #: per-worker batch b
    budget: int                 #: samples processed by every run
    switch: int                 #: samples processed on 1 worker before the change
    lr_eff: float               #: eta / (1 - mu): effective base learning rate at 1 worker


TASKS = {
    "digits": Task(dataset="digits", batch=8, budget=60_000, switch=12_000, lr_eff=0.05),
    "digits-hard": Task(dataset="digits-hard", batch=8, budget=150_000, switch=30_000,
                        lr_eff=0.05),
}
N_EVALS = 100  # held-out evaluations over the budget, plus every step of the spike window

Curve = list[tuple[int, int, float, float]]  # (samples seen, step, held-out loss, accuracy)


@dataclass(kw_only=True)
class Run:
    """A training run in progress (mutable: one per branch)."""

    params: np.ndarray          #: flat float32 parameters
    state: MomentumState        #: optimizer state
    seen: int                   #: samples processed
    curve: Curve                #: held-out evaluations so far


def advance(wl: MLP, opt: MomentumSGD, sched: LRScaleSchedule, run: Run, *, workers: int,
            batch: int, until: int, stream: Iterator[Batch], t0: int, every: int,
            window: int) -> None:
    """Synchronous steps with ``workers`` workers of batch ``batch`` until ``until`` samples.

    One step draws ``workers`` per-worker batches and takes one step on their union (the
    average of the workers' gradients). O(steps * workers * batch * model size).
    """
    while run.seen + workers * batch <= until:
        parts = list(itertools.islice(stream, workers))
        union = Batch(x=np.concatenate([p.x for p in parts]),
                      y=np.concatenate([p.y for p in parts]))
        _, grad = wl.gradient(run.params, union)
        lr_scale, factor = sched.factors(run.state.step)
        run.params, run.state = opt.update(run.params, grad, run.state, lr_scale=lr_scale,
                                           buffer_factor=factor)
        before, run.seen = run.seen, run.seen + workers * batch
        in_window = t0 >= 0 and run.state.step - t0 <= window
        if in_window or run.seen // every > before // every:
            ev = wl.evaluate(run.params)
            run.curve.append((run.seen, run.state.step, ev["loss"], ev["accuracy"]))


def run_cell(task: Task, mu: float, ks: Sequence[int], seed: int) -> list[dict[str, Any]]:
    """All methods and jumps for one (task, momentum, seed).

    The 1-worker phase before the switch is the same for ``linear``, ``none`` and ``dynamic``
    (scale 1 under every rule) and for every ``k``: it is trained once and branched.
    """
    wl = MLP(dataset=task.dataset, hidden=64)
    eta, every, window = task.lr_eff * (1.0 - mu), task.budget // N_EVALS, spike_window(mu)
    p0 = wl.init_params(seed)
    part = wl.partition(1, 0)
    rows: list[dict[str, Any]] = []

    def finish(method: str, k: int, run: Run, t0: int, wall: float) -> None:
        ev = wl.evaluate(run.params)
        pre = [c[2] for c in run.curve if c[1] <= t0]
        post = [c[2] for c in run.curve if t0 < c[1] <= t0 + window]
        spike = max(post) - pre[-1] if t0 >= 0 and pre and post else float("nan")
        rows.append({"task": task.dataset, "momentum": mu, "k": k, "method": method,
                     "seed": seed, "accuracy": ev["accuracy"], "loss": ev["loss"],
                     "spike": spike, "steps": run.state.step, "wall_s": wall,
                     "curve": run.curve})

    # 1-worker phase, shared by the three elastic methods
    opt = MomentumSGD(lr=eta, momentum=mu)
    tic = time.perf_counter()
    head = Run(params=p0, state=opt.init(p0.size), seen=0, curve=[])
    advance(wl, opt, LRScaleSchedule(rule="none"), head, workers=1, batch=task.batch,
            until=task.switch, stream=wl.batches(part, task.batch, np.random.default_rng(
                [seed, 1])), t0=-1, every=every, window=window)
    if not head.curve or head.curve[-1][1] != head.state.step:  # the spike's baseline
        ev = wl.evaluate(head.params)
        head.curve.append((head.seen, head.state.step, ev["loss"], ev["accuracy"]))
    head_wall = time.perf_counter() - tic
    for k in ks:
        for method in ELASTIC:
            tic = time.perf_counter()
            ramp = round(1 / (1 - mu)) if method == "dynamic-long" else RAMP_STEPS
            sched = LRScaleSchedule(rule=method.removesuffix("-long"), ramp_steps=ramp)
            t0 = head.state.step
            sched.on_resize(1, k, t0)
            run = Run(params=head.params, state=head.state, seen=head.seen,
                      curve=list(head.curve))
            advance(wl, opt, sched, run, workers=k, batch=task.batch, until=task.budget,
                    stream=wl.batches(part, task.batch, np.random.default_rng([seed, 2])),
                    t0=t0, every=every, window=window)
            finish(method, k, run, t0, head_wall + time.perf_counter() - tic)
        tic = time.perf_counter()
        fixed_opt = MomentumSGD(lr=eta * k, momentum=mu)
        run = Run(params=p0, state=fixed_opt.init(p0.size), seen=0, curve=[])
        advance(wl, fixed_opt, LRScaleSchedule(rule="none"), run, workers=k, batch=task.batch,
                until=task.budget, stream=wl.batches(part, task.batch, np.random.default_rng(
                    [seed, 3])), t0=-1, every=every, window=window)
        finish("fixed", k, run, -1, time.perf_counter() - tic)
    return rows


def summarize(rows: list[dict[str, Any]]) -> str:
    """Markdown tables, mean ± std over seeds: final held-out accuracy (%) with the post-switch
    held-out loss spike, then final held-out loss."""
    spiked = [m for m in ELASTIC if m != "none"]
    acc_t = ["| task | μ | jump | " + " | ".join(f"{m} acc %" for m in METHODS)
             + " | dynamic − fixed (pts) | " + " | ".join(f"spike {m}" for m in spiked) + " |",
             "|---" * (4 + len(METHODS) + len(spiked)) + "|"]
    loss_t = ["| task | μ | jump | " + " | ".join(f"{m} loss" for m in METHODS) + " |",
              "|---" * (3 + len(METHODS)) + "|"]
    for task, mu, k in sorted({(r["task"], r["momentum"], r["k"]) for r in rows}):
        cell = {m: [r for r in rows if (r["task"], r["momentum"], r["k"], r["method"])
                    == (task, mu, k, m)] for m in METHODS}
        col = {(m, f): np.array([r[f] for r in cell[m]]) for m in METHODS
               for f in ("accuracy", "loss", "spike")}
        gap = 100 * (col["dynamic", "accuracy"].mean() - col["fixed", "accuracy"].mean())
        head = f"| {task} | {mu} | 1→{k} | "
        acc_t.append(head + " | ".join(f"{100 * col[m, 'accuracy'].mean():.1f} ± "
                                       f"{100 * col[m, 'accuracy'].std():.1f}" for m in METHODS)
                     + f" | {gap:+.1f} | " + " | ".join(
                         f"{col[m, 'spike'].mean():.2f} ± {col[m, 'spike'].std():.2f}"
                         for m in spiked) + " |")
        loss_t.append(head + " | ".join(f"{col[m, 'loss'].mean():.3f} ± "
                                        f"{col[m, 'loss'].std():.3f}" for m in METHODS) + " |")
    return "\n".join([*acc_t, "", *loss_t])


def plot(rows: list[dict[str, Any]], task: Task, path: Path) -> None:
    """Mean held-out loss vs samples (top rows) and vs steps after the switch (bottom rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mus = sorted({r["momentum"] for r in rows if r["task"] == task.dataset})
    ks = sorted({r["k"] for r in rows if r["task"] == task.dataset})
    fig, axes = plt.subplots(2 * len(mus), len(ks), figsize=(5 * len(ks), 3.4 * 2 * len(mus)),
                             squeeze=False)
    colors = {"fixed": "k", "linear": "tab:red", "none": "tab:gray", "dynamic": "tab:blue",
              "dynamic-long": "tab:green"}
    for i, mu in enumerate(mus):
        for j, k in enumerate(ks):
            full, zoom = axes[2 * i][j], axes[2 * i + 1][j]
            for m in METHODS:
                runs = [r for r in rows if (r["task"], r["momentum"], r["k"], r["method"])
                        == (task.dataset, mu, k, m)]
                curves = np.array([[c[2] for c in r["curve"]] for r in runs])
                xs = np.array([c[0] for c in runs[0]["curve"]])
                steps = np.array([c[1] for c in runs[0]["curve"]])
                full.plot(xs, curves.mean(axis=0), color=colors[m], label=m, lw=1.2)
                if m != "fixed":
                    t0 = steps[xs <= task.switch].max() if (xs <= task.switch).any() else 0
                    sel = (steps >= t0 - 5) & (steps <= t0 + spike_window(mu))
                    zoom.plot(steps[sel] - t0, curves.mean(axis=0)[sel], color=colors[m],
                              label=m, marker=".", lw=1)
            full.axvline(task.switch, color="0.7", ls=":")
            full.set(yscale="log", xlabel="samples", ylabel="held-out loss",
                     title=f"{task.dataset}, μ={mu}, 1→{k} (mean of {len(runs)} seeds)")
            zoom.set(xlabel="steps after the switch", ylabel="held-out loss",
                     title=f"around the switch, μ={mu}, 1→{k}")
            full.legend(fontsize=8)
            zoom.legend(fontsize=8)
    fig.suptitle("SIMULATED synchronous data-parallel SGD\n(k workers of batch b = one step on "
                 "the k·b batch)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: digits, μ=0.9, 1→16")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--lr-eff", type=float, default=None,
                    help="override lr_eff = eta / (1 - mu) of every task")
    ap.add_argument("--tag", default="", help="suffix of the output files")
    args = ap.parse_args(argv)
    tasks, mus, ks, seeds = dict(TASKS), [0.9, 0.99], [16, 32], range(args.seeds)
    if args.quick:  # a third of the digits budget, one momentum, one jump, two seeds
        t = TASKS["digits"]
        tasks = {"digits": dataclasses.replace(t, budget=t.budget // 3, switch=t.switch // 3)}
        mus, ks, seeds = [0.9], [16], range(min(args.seeds, 2))
    if args.lr_eff is not None:
        tasks = {n: dataclasses.replace(t, lr_eff=args.lr_eff) for n, t in tasks.items()}
    print("SIMULATED synchronous data-parallel SGD: k workers of batch b = one step on the "
          "k*b batch, in one process; optimizer and LR schedule are ray_cluster.ps.optim / "
          "ray_cluster.ps.elastic (LR outside the buffer).")
    for name, t in tasks.items():
        print(f"  {name}: b={t.batch}, budget={t.budget} samples, switch at {t.switch}, "
              f"eta = {t.lr_eff} * (1 - mu), ramp T={RAMP_STEPS} (dynamic-long: T=1/(1-mu))")
    tic = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name, mu, seed in itertools.product(tasks, mus, seeds):
        with threadpool_limits(limits=1):  # tiny matrices: BLAS threads only contend
            rows += run_cell(tasks[name], mu, ks, seed)
        print(f"  done {name} mu={mu} seed={seed} ({time.perf_counter() - tic:.0f} s)",
              flush=True)
    wall = time.perf_counter() - tic
    args.out.mkdir(parents=True, exist_ok=True)
    stem = ("dynamic_sgd_quick" if args.quick else "dynamic_sgd") + args.tag
    fields = ["task", "momentum", "k", "method", "seed", "accuracy", "loss", "spike", "steps",
              "wall_s"]
    with open(args.out / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    table = summarize(rows)
    note = (f"SIMULATED synchronous data-parallel SGD (k workers of batch b = one step on the "
            f"k*b batch, one process); seeds: {len(seeds)}; "
            + "; ".join(f"{n}: b={t.batch}, budget {t.budget} samples, switch at {t.switch}, "
                        f"eta/(1-mu) = {t.lr_eff}" for n, t in tasks.items())
            + f"; ramp T={RAMP_STEPS}, dynamic-long T=1/(1-mu). Spike: largest rise of the "
              "held-out loss over its value at the switch, within max(40, 2/(1-mu)) steps.")
    (args.out / f"{stem}.md").write_text(note + "\n\n" + table + "\n")
    for name in tasks:
        plot(rows, tasks[name], args.out / f"{stem}_{name}.png")
    print(table)
    print(f"{len(rows)} runs in {wall:.1f} s; results in {args.out}/{stem}.*")


if __name__ == "__main__":
    main()
