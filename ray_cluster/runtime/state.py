"""A job runtime's state: its actors, counters, checkpoint store and history, and the queries
on them. The first layer of :class:`ray_cluster.runtime.JobRuntime` (see its module); every
other layer builds on this one.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from ray_cluster.ps.actors import STATE_KEYS
from ray_cluster.ps.checkpoint import CheckpointStore
from ray_cluster.ps.devices import DeviceInfo
from ray_cluster.ps.optim import MomentumSGD
from ray_cluster.runtime.types import (
    NoPlacement,
    Placer,
    ProgressPoint,
    RuntimeConfig,
    TrainingJob,
)

__all__ = ["RuntimeState"]

log = logging.getLogger("ray_cluster.runtime")


@dataclass
class _Stats:
    """Worker-side figures since the last progress point."""

    batches: int = 0
    loss: float = 0.0
    seconds: float = 0.0
    total_batches: int = 0
    total_seconds: float = 0.0

    def add(self, out: dict[str, float]) -> None:
        self.batches += int(out["batches"])
        self.loss += out["loss"]
        self.seconds += out["seconds"]
        self.total_batches += int(out["batches"])
        self.total_seconds += out["seconds"]



class RuntimeState:
    """The state of one job's training controller and what can be read from it.

    Parameters
    ----------
    job
        The workload and the sample budget.
    config
        Mode, optimizer, learning-rate rule, checkpoints.
    placer
        Actor options per planned server (default: none).
    optimizer
        The shards' optimizer (default: momentum SGD from ``config``); benchmarks pass a
        subclass to separate transport from update cost.
    """

    def __init__(self, job: TrainingJob, config: RuntimeConfig | None = None,
                 placer: Placer | None = None, optimizer: MomentumSGD | None = None) -> None:
        self.job = job
        self.config = config or RuntimeConfig()
        self.placer = placer or NoPlacement()
        cfg = self.config
        self._tmpdir = None if cfg.checkpoint_dir else tempfile.mkdtemp(prefix="psched-ckpt-")
        self.store = CheckpointStore(cfg.checkpoint_dir or self._tmpdir or "", job.job_id,
                                     keep=cfg.keep_checkpoints)
        self.optimizer = optimizer or MomentumSGD(lr=cfg.lr, momentum=cfg.momentum,
                                                  lr_in_buffer=cfg.lr_in_buffer)
        self.n_params = int(job.workload.init_params(cfg.seed).size)
        self.shards: list[Any] = []
        self.shard_servers: list[int | None] = []
        self.bounds: list[tuple[int, int]] = []
        self.workers: list[Any] = []
        self.worker_servers: list[int | None] = []
        self.step = 0  #: updates applied (as of the last quiescent point)
        self.batches = 0  #: mini-batches applied (as of the last quiescent point)
        self.version = -1  #: last committed checkpoint version
        self.history: list[ProgressPoint] = []
        self.events: list[tuple[float, str]] = []  #: (wall_s, what) of resizes and failures
        self.rollbacks: list[tuple[int, int]] = []  #: (batches before, batches after) per rollback
        self.stats = _Stats()
        self._t0 = time.time()
        self._deadline = 0.0
        self._seg_end = 0.0
        self._stop_at = 0
        self._last_ckpt = time.time()
        self._pending: dict[Any, int] = {}
        self._failed: list[int] = []
        self._lr_workers = 0  # worker count the learning-rate schedule last saw
        self._generation = 0  # bumps on every new batch stream, keeps seeds distinct
        self._spares: dict[str, list[tuple[int | None, Any]]] = {"worker": [], "ps": []}
        self.fatal: str | None = None  #: why training cannot go on (see :data:`MAX_STRIKES`)
        self._strikes = 0  # strikes since the job last made progress (see MAX_STRIKES)
        self._errors: list[str] = []  # errors of the workload in the current segment
        self._infra = 0  # infrastructure failures in the current segment
        self._infra_row = 0  # segments in a row lost to the infrastructure, no progress
        self._resume_at = 0.0  # no new segment before this wall time (back-off)
        self._seg_batches = 0  # mini-batches applied when the segment began
        self.backoffs: list[tuple[str, float]] = []  #: (why, seconds) of every back-off
        self._devices: dict[Any, dict[str, Any]] = {}  # worker handle -> Worker.device()
        self._data_line = ""  # the workers' description of their data, as last logged

    @property
    def done(self) -> bool:
        """The sample budget is trained."""
        return self.batches >= self.job.budget

    @property
    def running(self) -> bool:
        """Training is in flight (between :meth:`begin` and the end of the slot)."""
        return bool(self._pending)

    def pending(self) -> list[Any]:
        """Object references the owner must wait on; pass each ready one to :meth:`handle`."""
        return list(self._pending)

    def progress(self) -> dict[str, Any]:
        """Per-job figures: samples trained, the history of losses and held-out accuracy,
        the measured time per mini-batch, resizes, failures and rollbacks."""
        return {
            "job_id": self.job.job_id,
            "batches": self.batches,
            "samples": self.batches * self.config.batch_size,
            "budget_batches": self.job.budget,
            "seconds_per_batch": self.seconds_per_batch(),
            "history": list(self.history),
            "events": list(self.events),
            "rollbacks": list(self.rollbacks),
        }

    def seconds_per_batch(self) -> float | None:
        """Measured wall time of one mini-batch on one worker (pull, gradient, push)."""
        s = self.stats
        return s.total_seconds / s.total_batches if s.total_batches else None

    def params(self) -> np.ndarray:
        """The full parameter vector, pulled from the shards (no step may be in flight)."""
        if not self.shards:
            raise RuntimeError("the job has no shards")
        return np.concatenate(ray.get([s.pull.remote() for s in self.shards]))

    def optimizer_state(self) -> dict[str, np.ndarray]:
        """Full ``params`` and momentum ``buffer``, gathered from the shards."""
        parts = ray.get([s.export.remote() for s in self.shards])
        return {k: np.concatenate([p[k] for p in parts]) for k in STATE_KEYS}

    def counters(self) -> tuple[int, int]:
        """``(updates, mini-batches)`` read from the shards (all shards must agree)."""
        got = set(ray.get([s.counters.remote() for s in self.shards]))
        if len(got) != 1:
            raise RuntimeError(f"shards of {self.job.job_id} disagree: {sorted(got)}")
        step, batches = got.pop()
        return int(step), int(batches)

    def worker_devices(self) -> list[dict[str, Any]]:
        """Where each worker trains, in worker order (``Worker.device()``: node, GPU ids,
        ``CUDA_VISIBLE_DEVICES``, device, name, memory), as of the last resize."""
        return [self._devices.get(w, {}) for w in self.workers]

    def device_line(self) -> str:
        """The workers' devices in one line: ``w0 cuda:0 NVIDIA H100 (79.1 GB) gpu 3 node
        1a2b3c4d; w1 ...`` (empty without workers)."""
        out = []
        for i, d in enumerate(self.worker_devices()):
            if d:
                info = DeviceInfo(**{k: v for k, v in d.items() if k != "data"})
                out.append(f"w{i} {info.line()}")
        return "; ".join(out)

    def _note_devices(self, new: Sequence[Any], found: Sequence[dict[str, Any]]) -> None:
        """After a resize: remember where the ``new`` workers train, and log every worker's
        device (once per slot the job runs) and any new description of the data."""
        known = {**self._devices, **dict(zip(new, found, strict=True))}
        self._devices = {w: known[w] for w in self.workers if w in known}
        if not self.workers:
            return
        self._mark(f"devices: {self.device_line()}")
        for d in found:
            if d.get("data") and d["data"] != self._data_line:
                self._data_line = d["data"]
                self._mark(f"data: {d['data']}")

    def _wait(self, refs: list[Any]) -> list[Any]:
        """``ray.get`` with the start-up timeout: actors that cannot be placed fail the slot
        (``GetTimeoutError``) instead of hanging it."""
        return list(ray.get(refs, timeout=self.config.start_timeout_s))

    def _kill(self, actors: Sequence[Any]) -> None:
        for a in actors:
            ray.kill(a, no_restart=True)

    def _mark(self, what: str) -> None:
        self.events.append((time.time() - self._t0, what))
        log.info("%s: %s", self.job.job_id, what)
