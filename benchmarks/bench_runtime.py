"""Runtime figures of the Ray parameter server (``ray_cluster``), printed as markdown.

Three measurements, each against a baseline measured in the same run:

1. **Gradient exchange** at parameter sizes 4 MB .. 400 MB: one worker, one shard, a gradient
   that costs nothing to compute, so a step is push + the real momentum update + pull (one
   ``push_pull`` round trip). Throughput is ``2 x size / step time`` (a step moves the
   gradient to the shard and the updated parameters back), compared with a raw Ray round trip
   of the same bytes (an actor method that takes an array of that size and returns a
   preallocated one: no optimizer, no slicing, no concatenation), timed in alternating blocks
   in the same run. The raw round trips run between two actors and are timed in the calling
   one, as the step is (timed from the driver they are shown too). Step times are the
   workers' own (``Worker.train``: every step of a block, and the version check that starts
   it). The same step with an optimizer that touches no element (:class:`NoUpdate`: it
   overrides the in-place update the shards call) separates transport from update cost, and
   the in-place update alone, with the shards' thread count, is timed in this process.
2. **Slot-boundary latency**: from the ``resize`` call at a slot boundary until every worker of
   the new size has applied a push; for adding workers (1 -> 4) and for re-sharding the PS
   (1 -> 2 shards): cold (new actors in new Ray processes), new actors in Ray processes
   pre-started during the previous slot (:class:`~ray_cluster.runtime.warmpool.WarmProcesses`, which
   :class:`~ray_cluster.runtime.executor.RayExecutor` keeps filled on every node), and the job's
   actors
   pre-started during the previous slot (the executor's lookahead).
3. **Iterations per second** of the MLP on digits: the runtime (1 and 2 workers, async and
   sync) against a single-process numpy loop of the same model and optimizer.

Usage::

    .venv/bin/python benchmarks/bench_runtime.py [--sizes-mb 4 40 400] [--reps 5] [--blocks 5]
        [--only exchange boundary iterations]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray
from free_gradient import FreeGradient

from ray_cluster.ps.actors import UPDATE_THREADS
from ray_cluster.ps.optim import MomentumSGD, MomentumState
from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob
from ray_cluster.runtime.warmpool import WarmProcesses
from ray_cluster.workloads.builtin import get_workload

FAR = 600.0
SECTIONS = ["exchange", "boundary", "iterations"]  #: what ``--only`` may pick


@dataclass(frozen=True, kw_only=True)
class NoUpdate(MomentumSGD):
    """Momentum SGD that applies nothing: isolates the transport cost of a step.

    A shard calls :meth:`update_inplace`; both forms count the step and touch no element.
    """

    def update(self, params: np.ndarray, grad: np.ndarray, state: MomentumState, *,
               lr_scale: float = 1.0,
               buffer_factor: float = 1.0) -> tuple[np.ndarray, MomentumState]:
        return params, MomentumState(buffer=state.buffer, step=state.step + 1)

    def update_inplace(self, params: np.ndarray, grad: np.ndarray, state: MomentumState, *,
                       lr_scale: float = 1.0, buffer_factor: float = 1.0,
                       threads: int = 1, kernel: str = "auto") -> MomentumState:
        return MomentumState(buffer=state.buffer, step=state.step + 1)


@ray.remote(num_cpus=0)
class Echo:
    """Raw Ray transfer: take an array, return a (preallocated) array of the same size."""

    def __init__(self, n: int) -> None:
        self.out = np.zeros(n, dtype=np.float32)

    def echo(self, x: np.ndarray) -> np.ndarray:
        return self.out

    def faults(self) -> int:
        return minor_faults()


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@ray.remote(num_cpus=0)
class RawCaller:
    """The raw baseline as a worker sees it: round trips to :class:`Echo` from inside an
    actor, timed there (as :meth:`Worker.train` times its steps)."""

    def __init__(self, echo: Any, n: int) -> None:
        self.echo = echo
        self.x = np.ones(n, dtype=np.float32)

    def run(self, steps: int) -> float:
        """Mean seconds of ``steps`` round trips of the array, each way."""
        t0 = time.perf_counter()
        for _ in range(steps):
            y = ray.get(self.echo.echo.remote(self.x))
            del y
        return (time.perf_counter() - t0) / steps

    def traced(self, steps: int) -> list[tuple[float, int, int]]:
        """Per round trip: seconds and the minor page faults it cost here and in the echo."""
        out = []
        for _ in range(steps):
            mine, theirs = minor_faults(), ray.get(self.echo.faults.remote())
            t0 = time.perf_counter()
            y = ray.get(self.echo.echo.remote(self.x))
            took = time.perf_counter() - t0
            del y
            out.append((took, minor_faults() - mine, ray.get(self.echo.faults.remote()) - theirs))
        return out


def _job(job_id: str, workload: Any, partitions: int = 8, budget: int = 10**9) -> TrainingJob:
    return TrainingJob(job_id=job_id, workload=workload, n_partitions=partitions,
                       minibatches=budget // partitions, epochs=1)


def _config(ckpt: str, **kw: Any) -> RuntimeConfig:
    return RuntimeConfig(checkpoint_dir=ckpt, evaluate=False, **kw)


def bench_exchange(sizes_mb: list[float], ckpt: str, blocks: int,
                   store_bytes: int) -> list[dict[str, float]]:
    """Alternating blocks of raw round trips and runtime steps; medians of the block means.

    Every party first runs enough round trips to have touched the whole object store
    (``store_bytes`` over the size, plus two): a round trip landing on pages a process has
    not touched yet pays a minor page fault per 4 KiB page in each process (~100,000 at
    400 MB, several times the round trip itself), which would otherwise weigh on the first
    blocks of whichever party met those pages first.
    """
    rows = []
    for mb in sizes_mb:
        n = int(mb * 2**20 / 4)
        steps = max(12, int(400 / mb))  # per block: a first step paying page faults weighs less
        echo = Echo.remote(n)
        caller = RawCaller.remote(echo, n)
        x = np.ones(n, dtype=np.float32)
        warm = -(-store_bytes // (n * 4)) + 2  # round trips that touch the whole store
        for _ in range(warm):
            ray.get(echo.echo.remote(x))
        ray.get(caller.run.remote(warm))
        rts = [JobRuntime(_job(f"xchg{mb:g}{i}", FreeGradient(n_params=n)),
                          _config(ckpt, mode="async", lr=0.01), optimizer=o)
               for i, o in enumerate((None, NoUpdate(lr=0.01)))]
        raw: list[float] = []  # actor to actor, timed in the calling actor: the baseline
        raw_driver: list[float] = []  # driver to actor, timed in the driver
        run: list[list[float]] = [[], []]
        upd: list[float] = []
        try:
            for rt in rts:
                rt.resize([None], [None])  # writes the job's first checkpoint
                rt.run_until(time.time() + FAR, until_batches=warm)
            os.sync()  # those checkpoints' writeback would otherwise land in the timed blocks
            opt, p, g = MomentumSGD(lr=0.01), np.zeros(n, np.float32), np.full(n, 1e-3, np.float32)
            state = opt.init(n)
            for _ in range(blocks):
                t0 = time.perf_counter()
                for _ in range(steps):
                    y = ray.get(echo.echo.remote(x))
                    del y
                raw_driver.append((time.perf_counter() - t0) / steps)
                raw.append(ray.get(caller.run.remote(steps)))
                for rt, times in zip(rts, run, strict=True):
                    rt.record()
                    rt.run_until(time.time() + FAR, until_batches=rt.batches + steps)
                    times.append(rt.stats.seconds / rt.stats.batches)
                t0 = time.perf_counter()  # what a shard runs, in this process
                state = opt.update_inplace(p, g, state, threads=UPDATE_THREADS, kernel="fused")
                upd.append(time.perf_counter() - t0)
        finally:
            for rt in rts:
                rt.close()
            ray.kill(caller)
            ray.kill(echo)
        raw_s, step_s, bare_s = (statistics.median(raw), statistics.median(run[0]),
                                 statistics.median(run[1]))
        rows.append({"mb": mb, "raw_s": raw_s, "raw_driver_s": statistics.median(raw_driver),
                     "step_s": step_s, "update_s": min(upd),
                     "bare_s": bare_s, "raw_mbps": 2 * mb / raw_s,
                     "xchg_mbps": 2 * mb / step_s, "bare_mbps": 2 * mb / bare_s,
                     # each block's raw and runtime steps ran back to back: under a load that
                     # drifts, the median of the per-block ratios is the steadier figure
                     "paired": statistics.median(r / s for r, s in zip(raw, run[0], strict=True))})
        print(f"  exchange {mb:g} MB: raw {raw}, raw from the driver {raw_driver}, "
              f"step {run}", file=sys.stderr)
    return rows


def _boundary(rt: JobRuntime, workers: int, shards: int) -> float:
    """Seconds from the resize call until every new worker has applied a push."""
    t0 = time.perf_counter()
    rt.resize([None] * workers, [None] * shards)
    rt.run_until(time.time() + FAR, until_batches=rt.batches + workers)
    return time.perf_counter() - t0


@ray.remote(num_cpus=0)
class Bare:
    """An actor that does nothing: the cost of a Ray worker process alone."""

    def ping(self) -> bool:
        return True


def _bare_start(n: int, pool: WarmProcesses | None = None) -> float:
    """Seconds to start ``n`` empty actors at once and hear from each (the floor of a cold
    boundary that adds ``n`` actors on this machine); with ``pool``, filled first (untimed)."""
    if pool is not None:
        pool.fill([ray.get_runtime_context().get_node_id()])
    t0 = time.perf_counter()
    actors = [Bare.remote() for _ in range(n)]  # type: ignore[attr-defined]
    ray.get([a.ping.remote() for a in actors])
    took = time.perf_counter() - t0
    for a in actors:
        ray.kill(a)
    return took


#: How the actors a boundary adds are started: ``cold`` (new Ray processes), ``processes``
#: (new actors in Ray processes pre-started by :class:`WarmProcesses`, as :class:`RayExecutor`
#: keeps them), ``actors`` (the job's actors pre-started during the previous slot).
VARIANTS: tuple[str, ...] = ("cold", "processes", "actors")
VARIANT_LABEL = {"cold": "cold", "processes": "cold actors, pre-started processes",
                 "actors": "pre-started actors"}


def bench_boundary(reps: int, ckpt: str, big_mb: float) -> list[dict[str, Any]]:
    """All cold rows first: a pool's spare processes (they live ``keep_alive_s``) would
    otherwise make later cold rows warm."""
    rows: list[dict[str, Any]] = []
    pool = WarmProcesses(3, keep_alive_s=600)
    node = ray.get_runtime_context().get_node_id()
    cases = [("add workers 1 -> 4 (digits MLP)", "mlp", 4, 1, 1, 1),
             ("re-shard PS 1 -> 2 (digits MLP)", "mlp", 1, 2, 1, 1),
             (f"re-shard PS 1 -> 2 ({big_mb:g} MB params)", "big", 1, 2, 1, 1)]
    for variant in VARIANTS:
        if variant != "actors":  # baseline in the same run: Ray's own actor start-up
            for n in (3, 1):
                times = [_bare_start(n, pool if variant == "processes" else None)
                         for _ in range(reps)]
                rows.append({"case": f"baseline: start {n} empty Ray actor(s)",
                             "variant": variant, "median_s": statistics.median(times),
                             "max_s": max(times), "reps": reps})
                print(f"  bare x{n} {variant}: {times}", file=sys.stderr)
        for label, wl_name, w_new, ps_new, w_old, ps_old in cases:
            wl = (get_workload("mlp", {"hidden": 64}) if wl_name == "mlp"
                  else FreeGradient(n_params=int(big_mb * 2**20 / 4)))
            rt = JobRuntime(_job(f"b{len(rows)}", wl), _config(ckpt, mode="async", lr=0.01))
            times = []
            try:
                rt.resize([None] * w_old, [None] * ps_old)
                rt.run_until(time.time() + FAR, until_batches=rt.batches + 1)
                for _ in range(reps):
                    if variant == "actors":  # during the previous slot: the plan's actors
                        rt.prestart(workers=[None] * (w_new - w_old),
                                    ps=[None] * (ps_new - ps_old))
                    elif variant == "processes":  # during the previous slot: processes
                        pool.fill([node])
                    times.append(_boundary(rt, w_new, ps_new))
                    _boundary(rt, w_old, ps_old)  # back (shrinking: not measured)
            finally:
                rt.close()
            rows.append({"case": label, "variant": variant,
                         "median_s": statistics.median(times), "max_s": max(times),
                         "reps": reps})
            print(f"  {label} {variant}: {times}", file=sys.stderr)
    pool.close()
    order = {c[0]: i for i, c in enumerate(cases)}  # table: each case's variants together
    return sorted(rows, key=lambda r: (order.get(r["case"], -1), r["case"],
                                       VARIANTS.index(r["variant"])))


def bench_iterations(ckpt: str, seconds: float) -> list[dict[str, Any]]:
    wl = get_workload("mlp", {"hidden": 64})
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    params, state = wl.init_params(0), opt.init(wl.init_params(0).size)
    stream = wl.batches(wl.partition(1, 0), 32, np.random.default_rng(0))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, g = wl.gradient(params, next(stream))
        params, state = opt.update(params, g, state)
        n += 1
    base = n / (time.perf_counter() - t0)
    rows: list[dict[str, Any]] = [{"setup": "single-process numpy loop", "its": base}]
    for mode, workers in (("async", 1), ("async", 2), ("sync", 1), ("sync", 2)):
        rt = JobRuntime(_job(f"it-{mode}{workers}", wl), _config(ckpt, mode=mode, lr=0.05))
        try:
            rt.resize([None] * workers, [None])
            rt.run_until(time.time() + FAR, until_batches=workers)
            b0, t0 = rt.batches, time.perf_counter()
            rt.run_until(time.time() + seconds)
            its = (rt.batches - b0) / (time.perf_counter() - t0)
        finally:
            rt.close()
        rows.append({"setup": f"runtime {mode}, {workers} worker(s), 1 shard", "its": its})
    for r in rows:
        r["ratio"] = r["its"] / base
    return rows


def markdown(xchg: list[dict[str, float]], bound: list[dict[str, Any]],
             its: list[dict[str, Any]], args: argparse.Namespace) -> str:
    only = f" --only {' '.join(args.only)}" if args.only != SECTIONS else ""
    out = ["## Ray parameter-server runtime (`benchmarks/bench_runtime.py`)", "",
           f"Command: `.venv/bin/python benchmarks/bench_runtime.py --sizes-mb "
           f"{' '.join(f'{s:g}' for s in args.sizes_mb)} --reps {args.reps} "
           f"--blocks {args.blocks}{only}` "
           f"(embedded Ray, {os.cpu_count()} cores; 1-minute load average "
           f"{args.load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end).", ""]
    if xchg:
        out += _exchange_table(xchg)
    if bound:
        out += _boundary_table(bound, args.reps)
    if its:
        out += _iterations_table(its)
    return "\n".join(out) + "\n"


def _exchange_table(xchg: list[dict[str, float]]) -> list[str]:
    out = ["### Gradient exchange (1 worker, 1 shard, free gradient) vs raw Ray round trip", "",
           "Raw: a round trip of the same bytes each way between two actors, timed in the "
           "calling actor as a worker times its steps (the fractions use it); the same round "
           "trip timed from the driver is shown for comparison.", "",
           f"| params | raw round trip | raw, from the driver | runtime step "
           f"| in-place momentum update alone ({UPDATE_THREADS} threads) | step, no update "
           "| raw MB/s | exchange MB/s | fraction | fraction, no update "
           "| fraction, median of per-block ratios |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in xchg:
        out.append(f"| {r['mb']:g} MB | {r['raw_s'] * 1e3:.1f} ms | "
                   f"{r['raw_driver_s'] * 1e3:.1f} ms | {r['step_s'] * 1e3:.1f} ms"
                   f" | {r['update_s'] * 1e3:.1f} ms | {r['bare_s'] * 1e3:.1f} ms | "
                   f"{r['raw_mbps']:.0f} | {r['xchg_mbps']:.0f} | "
                   f"{r['xchg_mbps'] / r['raw_mbps']:.0%} | "
                   f"{r['bare_mbps'] / r['raw_mbps']:.0%} | {r['paired']:.0%} |")
    return [*out, ""]


def _boundary_table(bound: list[dict[str, Any]], reps: int) -> list[str]:
    out = ["### Slot boundary to training at the new size (median of "
           f"{reps})", "", "| change | actors | median | max |", "|---|---|---:|---:|"]
    for r in bound:
        out.append(f"| {r['case']} | {VARIANT_LABEL[r['variant']]} | "
                   f"{r['median_s']:.2f} s | {r['max_s']:.2f} s |")
    return [*out, ""]


def _iterations_table(its: list[dict[str, Any]]) -> list[str]:
    out = ["### Iterations per second, MLP (64 hidden) on digits, batch 32", "",
           "| setup | it/s | vs numpy loop |", "|---|---:|---:|"]
    for r in its:
        out.append(f"| {r['setup']} | {r['its']:.0f} | {r['ratio']:.2f}x |")
    return [*out, ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[4, 40, 400])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=5, help="alternating exchange blocks")
    ap.add_argument("--big-mb", type=float, default=40.0, help="params of the big re-shard")
    ap.add_argument("--its-seconds", type=float, default=3.0)
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                    help="run only these sections")
    ap.add_argument("--out", help="also write the markdown here")
    args = ap.parse_args(argv)
    args.load_start = os.getloadavg()[0]
    store = int(max(args.sizes_mb) * 2**20 * 6 + 512 * 2**20)
    ray.init(num_cpus=2, object_store_memory=store, include_dashboard=False,
             log_to_driver=False)
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as ckpt:
        try:
            xchg = (bench_exchange(args.sizes_mb, ckpt, args.blocks, store)
                    if "exchange" in args.only else [])
            bound = (bench_boundary(args.reps, ckpt, args.big_mb)
                     if "boundary" in args.only else [])
            its = bench_iterations(ckpt, args.its_seconds) if "iterations" in args.only else []
        finally:
            ray.shutdown()
    text = markdown(xchg, bound, its, args)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
