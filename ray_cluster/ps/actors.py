"""The two actors of the parameter-server runtime: PS shards and workers.

A job's parameters are one flat float32 vector (:mod:`ray_cluster.workloads.builtin`). Its ``S`` PS
shards own the contiguous slices ``[bounds[i], bounds[i+1])`` of it, each with the matching
slice of the momentum-SGD state (:mod:`ray_cluster.ps.optim`) and a copy of the learning-rate
scale schedule (:mod:`ray_cluster.ps.elastic`). Its workers each own data partitions; a step of a
worker is: pull every slice (one ``ray.get`` over all shards), compute the real gradient of one
mini-batch, push each gradient slice to its shard.

Two modes (the OASiS model is asynchronous):

``async``
    a shard applies each push at once (one push = one update = one mini-batch); workers run
    a loop of steps until a deadline or a mini-batch count (:meth:`Worker.train`).
``sync``
    bulk-synchronous: workers push into an accumulator (:meth:`PSShard.accumulate`); once every
    worker of the step has pushed, the controller calls :meth:`PSShard.apply`, which averages
    the ``k`` gradients and takes one step (one update = ``k`` mini-batches).

Arrays and the object store: a pushed slice is a contiguous view of the gradient, serialised
once into the object store and read by the shard as a zero-copy read-only view; the shard
updates its slice and momentum buffer in place, in one pass over memory (the fused kernel of
:meth:`MomentumSGD.update_inplace`, :data:`UPDATE_THREADS` threads); a pulled slice is copied
once into the store (the shard keeps mutating its own array) and read zero-copy by the worker,
which copies the slices of several shards into its parameter buffer. Nothing else is copied.
Task ordering between one caller and one actor is FIFO, so a worker's pull after its own push
sees that push applied; in async mode push and pull are one call (:meth:`PSShard.push_pull`),
one round trip per shard per step.

Devices: a worker trains on exactly the GPUs Ray assigned it (``num_gpus`` of the job's worker
demand; none: every GPU hidden from it), or on the CPU (:mod:`ray_cluster.ps.devices`); a
shard updates on the CPU. :meth:`Worker.device` says which, for the job's log.

Versions: every change of a shard's slice (an update, a load) makes a new
:meth:`PSShard.version`, unique to the shard actor. A worker keeps the slices of its last
pull or push with their versions and pulls with :meth:`PSShard.pull_if_changed`, so a shard
whose slice is unchanged since (a worker alone on its shards, starting its next segment) sends
no array. The cost: between segments a worker with one shard keeps that slice's object alive
in the store (it held it during the segment anyway).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from ray_cluster.ps.checkpoint import read_range, write_slice
from ray_cluster.ps.devices import claim_devices, placed_workload
from ray_cluster.ps.elastic import LRScaleSchedule
from ray_cluster.ps.optim import (
    FUSED_MIN_ELEMENTS,
    MomentumSGD,
    MomentumState,
    fused_kernels,
    fused_kernels_ready,
    load_fused_kernels_later,
)

if TYPE_CHECKING:  # a shard process never needs the workloads (nor what they import)
    from ray_cluster.workloads.builtin import Batch, Workload

__all__ = ["STATE_KEYS", "UPDATE_THREADS", "PSShard", "Worker"]

log = logging.getLogger(__name__)

#: Per-element arrays of a shard: what an export, a re-shard and a checkpoint carry.
STATE_KEYS: tuple[str, ...] = ("params", "buffer")

#: Threads of a shard's in-place momentum update: the cores this process may run on, at most
#: 4 (the update is bound by memory bandwidth; Ray's own copies into the object store are
#: multi-threaded too). A worker waits while its shards update, so on a server shared by a
#: worker and a shard the threads use cores that would otherwise idle.
UPDATE_THREADS: int = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count() or 1)


@ray.remote(num_cpus=0, max_restarts=0)
class PSShard:
    """One PS shard: a slice of the parameters and of the optimizer state.

    Created empty; :meth:`load` gives it a slice (from other shards' exports, re-sharding, or
    from a checkpoint). A re-created shard re-runs ``__init__``: its state survives only through
    :meth:`export` (re-sharding) and :meth:`save` (checkpoints).
    """

    def __init__(self, optimizer: MomentumSGD, job_elements: int = 0) -> None:
        self.opt = optimizer
        self.job_elements = job_elements  # the whole vector's size: says if warm() loads Numba
        self.schedule = LRScaleSchedule()
        self.lo = self.hi = 0
        self.params = np.zeros(0, dtype=np.float32)
        self.mstate = optimizer.init(0)
        self.batches = 0  # mini-batches applied
        self.acc: np.ndarray | None = None  # sync mode: sum of pushed gradients
        self.acc_count = 0
        self._acc_buf = np.zeros(0, dtype=np.float32)  # sync mode: reused for acc each step
        self._actor = str(ray.get_runtime_context().get_actor_id())  # no other shard has it
        self._changes = 0  # bumps whenever params change (load, update): see version()

    # -- state ---------------------------------------------------------------------------
    def load(self, lo: int, hi: int, step: int, batches: int, schedule: dict[str, Any],
             *pieces: dict[str, Any]) -> tuple[int, int]:
        """Take slice ``[lo, hi)`` from ``pieces`` (exports or checkpoint slices) covering it.

        Each piece is ``{"lo", "hi", "params", "buffer"}`` over its own range; ``step``,
        ``batches`` and the learning-rate ``schedule`` (``LRScaleSchedule.to_dict``) are the
        job-wide counters, equal on every shard. O(hi - lo).
        """
        params = np.empty(hi - lo, dtype=np.float32)
        buffer = np.empty(hi - lo, dtype=np.float32)
        filled = 0
        for p in pieces:
            a, b = max(lo, p["lo"]), min(hi, p["hi"])
            if a >= b:
                continue
            src = slice(a - p["lo"], b - p["lo"])
            params[a - lo:b - lo] = p["params"][src]
            buffer[a - lo:b - lo] = p["buffer"][src]
            filled += b - a
        if filled != hi - lo:
            raise ValueError(f"pieces cover {filled} of [{lo}, {hi})")
        self.lo, self.hi, self.params = lo, hi, params
        self._changes += 1
        self.mstate = MomentumState(buffer=buffer, step=step)
        self.batches = batches
        self.schedule = LRScaleSchedule.from_dict(schedule)
        self.acc, self.acc_count = None, 0
        return self.lo, self.hi

    def restore(self, folder: str, lo: int, hi: int, step: int, batches: int,
                schedule: dict[str, Any]) -> tuple[int, int]:
        """Take slice ``[lo, hi)`` from a committed checkpoint folder (any shard layout)."""
        piece = {"lo": lo, "hi": hi, **{k: read_range(folder, k, lo, hi) for k in STATE_KEYS}}
        return self.load(lo, hi, step, batches, schedule, piece)

    def export(self) -> dict[str, Any]:
        """This shard's slice with its optimizer state (copied once into the object store)."""
        return {"lo": self.lo, "hi": self.hi, "params": self.params,
                "buffer": self.mstate.buffer}

    def counters(self) -> tuple[int, int]:
        """``(updates applied, mini-batches applied)``."""
        return self.mstate.step, self.batches

    def set_counters(self, step: int, batches: int) -> None:
        """Align this shard's counters with the others' (after a lost worker's partial push)."""
        self.mstate = MomentumState(buffer=self.mstate.buffer, step=step)
        self.batches = batches

    def schedule_state(self) -> dict[str, Any]:
        return self.schedule.to_dict()

    def save(self, staging: str) -> tuple[int, int]:
        """Write this slice and its optimizer state into a checkpoint staging folder."""
        write_slice(Path(staging), self.lo, self.hi,
                    {"params": self.params, "buffer": self.mstate.buffer})
        return self.counters()

    def on_resize(self, old_workers: int, new_workers: int) -> None:
        """The worker count changes from the next update on: start the learning-rate ramp."""
        self.schedule.on_resize(old_workers, new_workers, self.mstate.step)

    def warm(self) -> str:
        """Load now what this shard's updates will use: the fused kernels if the job's vector
        has at least :data:`~ray_cluster.ps.optim.FUSED_MIN_ELEMENTS` elements (a spare started
        during the previous slot does this then); returns :meth:`update_kernel`."""
        if self.job_elements >= FUSED_MIN_ELEMENTS:
            fused_kernels()
        return self.update_kernel()

    def update_kernel(self) -> str:
        """Which kernel the next update runs: ``"fused"`` once loaded, else ``"numpy"`` (the
        same bits either way). A shard not warmed starts loading it in the background after
        its first update of a slice of at least ``FUSED_MIN_ELEMENTS`` (so that a slot
        boundary's first steps do not share the CPU with importing Numba)."""
        return "fused" if fused_kernels_ready() is not None else "numpy"

    # -- training ------------------------------------------------------------------------
    def version(self) -> tuple[str, int]:
        """Names the current ``params``: a worker holding this version holds these values."""
        return self._actor, self._changes

    def pull(self) -> np.ndarray:
        return self.params

    def pull_if_changed(self, have: tuple[str, int] | None) -> tuple[tuple[str, int],
                                                                     np.ndarray | None]:
        """``(version, params)``, with ``None`` for params the caller already holds (its
        ``have`` is the current version): a pull of unchanged parameters moves no array."""
        now = self.version()
        return now, (None if have == now else self.params)

    def push(self, grad: np.ndarray) -> int:
        """Async mode: apply one worker's gradient slice now; return mini-batches applied."""
        self._update(grad)
        self.batches += 1
        return self.batches

    def push_pull(self, grad: np.ndarray) -> tuple[int, tuple[str, int], np.ndarray]:
        """Async mode, one round trip: :meth:`push`, then the updated slice and its version."""
        return self.push(grad), self.version(), self.params

    def accumulate(self, grad: np.ndarray) -> None:
        """Sync mode: add one worker's gradient slice to this step's sum."""
        if self.acc is None:  # into a buffer kept across steps: no fresh pages per step
            if self._acc_buf.shape != grad.shape:
                self._acc_buf = np.empty(grad.shape, dtype=np.float32)
            np.copyto(self._acc_buf, grad)
            self.acc = self._acc_buf
        else:
            self.acc += grad
        self.acc_count += 1

    def apply(self) -> tuple[int, int]:
        """Sync mode: one update with the mean accumulated gradient; returns the counters."""
        if self.acc_count:
            assert self.acc is not None
            self.acc /= self.acc_count
            self._update(self.acc)
            self.batches += self.acc_count
        self.acc, self.acc_count = None, 0
        return self.counters()

    def discard(self) -> None:
        """Sync mode: drop a step whose workers did not all push (one of them died)."""
        self.acc, self.acc_count = None, 0

    def _update(self, grad: np.ndarray) -> None:
        lr_scale, factor = self.schedule.factors(self.mstate.step)
        if not self.params.flags.writeable:  # arrived zero-copy from the object store
            self.params = self.params.copy()
        if not self.mstate.buffer.flags.writeable:
            self.mstate = MomentumState(buffer=self.mstate.buffer.copy(), step=self.mstate.step)
        # in place: returned pulls were already serialised into the object store
        self.mstate = self.opt.update_inplace(self.params, grad, self.mstate, lr_scale=lr_scale,
                                              buffer_factor=factor, threads=UPDATE_THREADS)
        self._changes += 1
        if self.params.size >= FUSED_MIN_ELEMENTS and fused_kernels_ready() is None:
            load_fused_kernels_later()  # once per process; NumPy blocks until it is loaded

    def ping(self) -> bool:
        return True

    def where(self) -> tuple[str, list[Any]]:
        """``(Ray node id, GPU ids)`` of this actor."""
        ctx = ray.get_runtime_context()
        return ctx.get_node_id(), list(ray.get_gpu_ids())


@ray.remote(num_cpus=0, max_restarts=0)
class Worker:
    """One worker: owns data partitions, computes real gradients, exchanges with the shards."""

    def __init__(self, workload: Workload, n_partitions: int, batch_size: int) -> None:
        # before anything touches CUDA: the GPUs Ray assigned, or none visible at all
        gpu_ids, visible = claim_devices(ray.get_gpu_ids())
        self.workload, self.device_info = placed_workload(
            workload, gpu_ids, visible, ray.get_runtime_context().get_node_id())
        self.n_partitions = n_partitions
        self.batch_size = batch_size
        self.shards: list[Any] = []
        self.bounds: tuple[int, ...] = (0,)
        self.streams: list[Iterator[Batch]] = []
        self.turn = 0
        self.buf = np.zeros(0, dtype=np.float32)
        self._versions: list[Any] = []  # per shard: the version this worker's copy is of
        self._params: np.ndarray | None = None  # one shard: its last slice (zero-copy)

    def warm(self) -> int:
        """Load the data now (cached per process); returns the training-set size."""
        return len(self.workload.partition(1, 0))

    def device(self) -> dict[str, Any]:
        """Where this worker trains (:class:`~ray_cluster.ps.devices.DeviceInfo` as a dict),
        with ``data``: the workload's description of its data (``describe()``, e.g. the
        corpus hash of ``torch-lm``) where it has one."""
        describe = getattr(self.workload, "describe", None)
        return {**dataclasses.asdict(self.device_info),
                "data": str(describe()) if callable(describe) else ""}

    def set_shards(self, shards: Sequence[Any], bounds: Sequence[tuple[int, int]]) -> None:
        """Exchange with these shards, shard ``i`` owning ``[bounds[i][0], bounds[i][1])``."""
        self.shards = list(shards)
        self.bounds = (*(b for b, _ in bounds), bounds[-1][1])
        self.buf = np.empty(self.bounds[-1], dtype=np.float32)
        self._versions, self._params = [None] * len(self.shards), None

    def set_partitions(self, partitions: Sequence[int], seed: Sequence[int]) -> None:
        """Own these data partitions; batches are drawn from them in turn (seeded stream)."""
        rng = np.random.default_rng(list(seed))
        self.streams = [
            self.workload.batches(self.workload.partition(self.n_partitions, p),
                                  self.batch_size, rng)
            for p in partitions
        ]

    def _next_batch(self) -> Batch:
        self.turn = (self.turn + 1) % len(self.streams)
        return next(self.streams[self.turn])

    def _pull(self) -> np.ndarray:
        """The current flat parameters; shards whose slice this worker holds send none."""
        return self._take(ray.get([s.pull_if_changed.remote(v)
                                   for s, v in zip(self.shards, self._versions, strict=True)]))

    def _take(self, got: Sequence[tuple[Any, np.ndarray | None]]) -> np.ndarray:
        """The flat parameters from per-shard ``(version, slice or None)``: one shard's slice
        as is (zero-copy, read-only), else each sent slice copied into this worker's buffer
        (one copy); a slice not sent is the one already held (same version)."""
        if len(got) == 1:
            if got[0][1] is not None:
                self._params = got[0][1]
            self._versions = [got[0][0]]
            assert self._params is not None
            return self._params
        b = self.bounds
        for i, (_, part) in enumerate(got):
            if part is not None:
                self.buf[b[i]:b[i + 1]] = part
        self._versions = [v for v, _ in got]
        return self.buf

    def _slices(self, grad: np.ndarray) -> list[np.ndarray]:
        b = self.bounds
        return [grad[b[i]:b[i + 1]] for i in range(len(self.shards))]

    def train(self, deadline: float, stop_at: int) -> dict[str, float]:
        """Async mode: steps until wall time ``deadline`` or ``stop_at`` mini-batches applied.

        Returns this call's ``batches``, summed ``loss``, and ``seconds`` (wall time of the
        steps), so the caller gets the measured time per mini-batch.
        """
        t0 = time.perf_counter()
        n, loss_sum, applied = 0, 0.0, 0
        params = self._pull()
        while True:
            loss, grad = self.workload.gradient(params, self._next_batch())
            out = ray.get([s.push_pull.remote(g) for s, g in zip(self.shards, self._slices(grad),
                                                                 strict=True)])
            applied = int(out[0][0])
            n += 1
            loss_sum += float(loss)
            params = self._take([(v, p) for _, v, p in out])  # also kept for the next pull
            if time.time() >= deadline or applied >= stop_at:
                break
        return {"batches": n, "loss": loss_sum, "seconds": time.perf_counter() - t0,
                "applied": applied}

    def sync_step(self, *after: Any) -> dict[str, float]:
        """Sync mode: one step (pull, gradient, accumulate); ``after`` are the previous applies.

        Ray resolves ``after`` before the call runs, so the pull sees the last update.
        """
        t0 = time.perf_counter()
        params = self._pull()
        loss, grad = self.workload.gradient(params, self._next_batch())
        ray.get([s.accumulate.remote(g) for s, g in zip(self.shards, self._slices(grad),
                                                        strict=True)])
        return {"batches": 1, "loss": float(loss), "seconds": time.perf_counter() - t0}

    def ping(self) -> bool:
        return True

    def where(self) -> tuple[str, list[Any]]:
        """``(Ray node id, GPU ids)`` of this actor."""
        ctx = ray.get_runtime_context()
        return ctx.get_node_id(), list(ray.get_gpu_ids())
