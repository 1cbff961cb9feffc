"""Would pipelining the exchange in chunks beat the memory-bandwidth bound at 400 MB? (No.)

An experiment kept for its negative result (``BENCHMARKS.md`` section 5). The runtime's async
step at large sizes is a raw round trip plus the momentum update, one after the other. Cutting
the pushed gradient into ``k`` chunks, each its own call to the same shard (Ray runs one
caller's calls to an actor in order), lets the worker copy chunk ``i + 1`` into the object store
while the shard updates chunk ``i``, and lets the worker copy returned chunks into its buffer while
the shard works on later ones. The catch: both sides are bound by the same memory bandwidth, and
the worker must re-assemble the chunks (one more copy). This script measures exactly that, with
the runtime's own in-place momentum update, against a raw round trip in the same run.

Usage::

    .venv/bin/python benchmarks/exp_chunked_exchange.py [--mb 400] [--chunks 0 4 8 16] [--blocks 5]

It also prints what explains the bound: memory bandwidth of a copy and of the update, alone
and at once in two processes, and the minor page faults of raw round trips that land on
object-store pages a process has not touched yet (the first ones) against later ones.

``0`` chunks is the runtime's shape: one call, the updated slice returned as is. The runtime's
own pair (``ray_cluster.actors.Worker`` training against a ``PSShard``, with versions, the
learning-rate schedule and its bookkeeping) is timed in the same blocks, to show what that
bookkeeping costs over the reduced step.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import bench_runtime  # this folder: the raw round trip and the free gradient
import ray
from bench_runtime import Echo, RawCaller
from ray import cloudpickle

from ray_cluster.actors import UPDATE_THREADS, PSShard, Worker
from ray_cluster.elastic import LRScaleSchedule
from ray_cluster.optim import MomentumSGD, MomentumState, fused_kernels


@ray.remote(num_cpus=0)
class Shard:
    """A PS shard reduced to the exchange: parameters, momentum, the in-place update."""

    def __init__(self, n: int) -> None:
        self.opt = MomentumSGD(lr=0.01, momentum=0.9)
        self.params = np.zeros(n, np.float32)
        self.state = self.opt.init(n)
        fused_kernels()  # as a shard with a large slice has them: the update is the fused one

    def push_pull(self, grad: np.ndarray) -> np.ndarray:
        self.state = self.opt.update_inplace(self.params, grad, self.state,
                                             threads=UPDATE_THREADS)
        return self.params

    def push_pull_chunk(self, lo: int, hi: int, grad: np.ndarray) -> np.ndarray:
        """The same update on ``[lo, hi)`` only (bit-identical per element)."""
        part = MomentumState(buffer=self.state.buffer[lo:hi], step=self.state.step)
        self.opt.update_inplace(self.params[lo:hi], grad, part, threads=UPDATE_THREADS)
        return self.params[lo:hi]


@ray.remote(num_cpus=0)
class Pusher:
    """A worker reduced to the exchange, timed in the actor like ``Worker.train``."""

    def __init__(self, shard: Any, n: int) -> None:
        self.shard = shard
        self.grad = np.full(n, 1e-3, np.float32)
        self.buf = np.empty(n, np.float32)

    def run(self, steps: int, chunks: int) -> float:
        n = self.grad.size
        cuts = [n * i // max(chunks, 1) for i in range(max(chunks, 1) + 1)]
        t0 = time.perf_counter()
        for _ in range(steps):
            if chunks == 0:
                held = ray.get(self.shard.push_pull.remote(self.grad))
                del held
                continue
            pieces = list(itertools.pairwise(cuts))
            refs = [self.shard.push_pull_chunk.remote(a, b, self.grad[a:b]) for a, b in pieces]
            for (a, b), ref in zip(pieces, refs, strict=True):
                self.buf[a:b] = ray.get(ref)  # while the shard works on later chunks
        return (time.perf_counter() - t0) / steps


@ray.remote(num_cpus=0)
class Streamer:
    """Memory bandwidth: ``n``-float copies or in-place momentum updates, in a loop."""

    def __init__(self, n: int) -> None:
        self.a, self.b = np.ones(n, np.float32), np.zeros(n, np.float32)
        self.opt = MomentumSGD(lr=0.01, momentum=0.9)
        self.state = self.opt.init(n)
        fused_kernels()

    def run(self, what: str, reps: int) -> float:
        """Mean seconds of one copy (``what="copy"``) or one update (``"update"``)."""
        t0 = time.perf_counter()
        for _ in range(reps):
            if what == "copy":
                np.copyto(self.b, self.a)
            else:
                self.state = self.opt.update_inplace(self.b, self.a, self.state,
                                                     threads=UPDATE_THREADS)
        return (time.perf_counter() - t0) / reps


cloudpickle.register_pickle_by_value(bench_runtime)  # Ray workers lack this folder


def _memory(n: int) -> None:
    """Copy and update alone, then both at once in two processes: GB/s of memory traffic
    (a copy reads and writes ``4 n`` bytes, an update reads three and writes two vectors)."""
    gb = {"copy": 2 * 4 * n / 1e9, "update": 5 * 4 * n / 1e9}
    a, b = Streamer.remote(n), Streamer.remote(n)
    ray.get([a.run.remote("copy", 2), b.run.remote("update", 2)])  # pages touched
    alone = {"copy": ray.get(a.run.remote("copy", 8)),
             "update": ray.get(b.run.remote("update", 4))}
    both = ray.get([a.run.remote("copy", 8), b.run.remote("update", 4)])
    print("| stream | alone | GB/s | with the other running | GB/s |")
    print("|---|---:|---:|---:|---:|")
    for (what, t), t2 in zip(alone.items(), both, strict=True):
        print(f"| {what} | {t * 1e3:.1f} ms | {gb[what] / t:.1f} | {t2 * 1e3:.1f} ms "
              f"| {gb[what] / t2:.1f} |")
    print(f"| together | | | | {gb['copy'] / both[0] + gb['update'] / both[1]:.1f} |")
    print()
    for actor in (a, b):
        ray.kill(actor)


def _runtime_pair(n: int) -> Any:
    """The runtime's worker and one shard of ``n`` parameters, wired as a job's would be."""
    FreeGradient = bench_runtime.FreeGradient  # a gradient that costs nothing
    shard = PSShard.remote(MomentumSGD(lr=0.01, momentum=0.9), n)
    ray.get(shard.warm.remote())  # its update kernels, as a spare of a large job has them
    piece = {"lo": 0, "hi": n, "params": np.zeros(n, np.float32),
             "buffer": np.zeros(n, np.float32)}
    ray.get(shard.load.remote(0, n, 0, 0, LRScaleSchedule().to_dict(), piece))
    worker = Worker.remote(FreeGradient(n_params=n), 1, 1)
    ray.get([worker.set_shards.remote([shard], [(0, n)]),
             worker.set_partitions.remote([0], [0])])
    return worker


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=400.0)
    ap.add_argument("--chunks", type=int, nargs="+", default=[0, 4, 8, 16])
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4, help="steps per block")
    args = ap.parse_args(argv)
    n = int(args.mb * 2**20 / 4)
    store = int(args.mb * 2**20 * 6 + 512 * 2**20)
    ray.init(num_cpus=2, object_store_memory=store, include_dashboard=False,
             log_to_driver=False)
    try:
        shard = Shard.remote(n)
        pusher = Pusher.remote(shard, n)
        raw_caller = RawCaller.remote(Echo.remote(n), n)
        worker, applied = _runtime_pair(n), 0
        warm = store // (n * 4) + 2  # every party touches the whole object store once
        _memory(n)
        trace = ray.get(raw_caller.traced.remote(2 * warm))  # first touches, then none
        print("| raw round trip | ms | minor faults, caller | minor faults, echo |")
        print("|---:|---:|---:|---:|")
        for i, (took, mine, theirs) in enumerate(trace):
            print(f"| {i + 1} | {took * 1e3:.0f} | {mine} | {theirs} |")
        print()
        for k in args.chunks:
            ray.get(pusher.run.remote(warm, k))
        applied += warm
        ray.get(worker.train.remote(time.time() + 600, applied))
        raw, steps, runtime = [], {k: [] for k in args.chunks}, []
        for _ in range(args.blocks):  # alternating blocks: a drifting load hits all alike
            raw.append(ray.get(raw_caller.run.remote(args.steps)))
            for k in args.chunks:
                steps[k].append(ray.get(pusher.run.remote(args.steps, k)))
            applied += args.steps
            out = ray.get(worker.train.remote(time.time() + 600, applied))
            runtime.append(out["seconds"] / out["batches"])
    finally:
        ray.shutdown()
    r = statistics.median(raw)
    print(f"| {args.mb:g} MB | chunks | step | fraction of raw ({r * 1e3:.1f} ms) |")
    print("|---:|---:|---:|---:|")
    for k in args.chunks:
        s = statistics.median(steps[k])
        print(f"| | {k or 'none (the runtime shape)'} | {s * 1e3:.1f} ms | {r / s:.0%} |")
    s = statistics.median(runtime)
    print(f"| | the runtime's Worker + PSShard | {s * 1e3:.1f} ms | {r / s:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
