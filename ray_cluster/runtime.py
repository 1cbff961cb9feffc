"""One job's training controller: its PS shards and workers, resizes, checkpoints, recovery.

A :class:`JobRuntime` lives in the driver. It holds actor handles only; gradients and
parameters go worker <-> shard through the object store. Its life in one slot:

1. :meth:`JobRuntime.resize` (at the slot boundary, with no step in flight): add or remove
   workers, re-shard the PS set when its count or placement changes (parameters, optimizer
   state and counters carried over exactly), start the learning-rate ramp (Dynamic SGD);
2. :meth:`JobRuntime.begin` launches training until the slot's deadline; the owner (one job:
   :meth:`JobRuntime.run_until`; many jobs: :class:`ray_cluster.executor.RayExecutor`) waits on
   :meth:`JobRuntime.pending` and passes each finished reference to :meth:`JobRuntime.handle`;
3. :meth:`JobRuntime.end` checkpoints and evaluates.

Training is cut into *segments* (async) or *steps* (sync) that end at quiescent points with
no push in flight: the slot's deadline, the checkpoint interval, the sample budget. Only there
are checkpoints taken, so all shards are at one global version.

Failures: a dead worker is replaced on its server and training goes on (its in-flight step is
lost); a dead shard rolls the whole job back to the last committed checkpoint -- a checkpoint is
taken when the job starts, at every interval and at every slot end, so at most the steps since
the last one are lost. Such infrastructure failures are retried (with a back-off when they
repeat) and never held against the job; errors raised by the workload's own code are strikes,
at most one per slot, and :data:`MAX_STRIKES` of them fail the job.

The data it works with -- :class:`RuntimeConfig`, :class:`TrainingJob` and its sample budget,
:class:`ProgressPoint`, the :class:`Placer` protocol, :func:`worker_slots` -- lives in
:mod:`ray_cluster.runtime_types`; this module re-exports it and stays the public import path.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayError

from ray_cluster.actors import STATE_KEYS, PSShard, Worker
from ray_cluster.checkpoint import CheckpointMeta, CheckpointStore
from ray_cluster.elastic import LRScaleSchedule
from ray_cluster.optim import MomentumSGD, shard_bounds
from ray_cluster.runtime_types import (
    MODES,
    NoPlacement,
    Placer,
    ProgressPoint,
    RuntimeConfig,
    TrainingJob,
    worker_slots,
)

__all__ = [
    "MODES",
    "JobRuntime",
    "NoPlacement",
    "Placer",
    "ProgressPoint",
    "RuntimeConfig",
    "TrainingJob",
    "worker_slots",
]

log = logging.getLogger(__name__)

#: How long a liveness probe waits for an actor before calling it dead, seconds.
PING_TIMEOUT_S = 30.0
#: Strikes before a job is declared failed (a bug in the workload, bad hyper-parameters:
#: retrying cannot help). A strike is a segment in which live workers raised errors of the
#: workload and nothing was applied; after one, the job backs off until its next slot, so
#: the strikes fall in ``MAX_STRIKES`` different slots. Infrastructure failures
#: (:func:`infrastructure_failure`) are never strikes.
MAX_STRIKES = 3
#: Back-off after the second segment in a row lost to infrastructure failures (the first is
#: retried at once, after recovery), seconds; it doubles with each further such segment
#: without progress, up to :data:`INFRA_BACKOFF_MAX_S`.
INFRA_BACKOFF_S = 0.25
INFRA_BACKOFF_MAX_S = 8.0
#: Errors of the machinery rather than of the workload: a lost actor, node, object or
#: worker process. Retried with back-off, never counted as strikes.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,  # ActorDiedError, ActorUnavailableError
    ray.exceptions.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError, ...
    ray.exceptions.NodeDiedError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.RaySystemError,
    ray.exceptions.ActorUnschedulableError,
    ray.exceptions.GetTimeoutError,
    ray.exceptions.OutOfMemoryError,
)


def infrastructure_failure(err: BaseException) -> bool:
    """Whether ``err`` (a task's error, or any error in its cause chain) is a failure of the
    infrastructure (:data:`INFRASTRUCTURE_ERRORS`) rather than of the workload's code."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, INFRASTRUCTURE_ERRORS):
            return True
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return False


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


def _alive(actor: Any) -> bool:
    try:
        return bool(ray.get(actor.ping.remote(), timeout=PING_TIMEOUT_S))
    except RayError:  # dead (RayActorError), silent (GetTimeoutError) or lost otherwise
        return False


def _match(current: Sequence[int | None], target: Sequence[int | None]) -> tuple[list[int],
                                                                                  list[int | None]]:
    """Which current positions to keep (in order) and which target servers still need actors."""
    left = list(target)
    keep = []
    for i, srv in enumerate(current):
        if srv in left:
            left.remove(srv)
            keep.append(i)
    return keep, left


class JobRuntime:
    """Training controller of one job. See the module docstring.

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

    # -- queries -------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The sample budget is trained."""
        return self.batches >= self.job.budget

    @property
    def deferred_until(self) -> float | None:
        """Wall time at which a backed-off job launches its next segment within this slot
        (the owner calls :meth:`poll` then), or None."""
        if self._pending or self.fatal or self._resume_at <= 0:
            return None
        return self._resume_at if self._resume_at < self._deadline else None

    def poll(self) -> None:
        """Launch the next segment if a back-off has ended."""
        if self.deferred_until is not None and time.time() >= self._resume_at:
            self._resume_at = 0.0
            self._launch()

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
        return got.pop()

    # -- actors --------------------------------------------------------------------------
    def _new_actor(self, kind: str, server: int | None) -> Any:
        """A spare actor started earlier on ``server``, or a fresh one."""
        for i, (srv, actor) in enumerate(self._spares[kind]):
            if srv == server:
                del self._spares[kind][i]
                return actor
        return self._create(kind, server)

    def _create(self, kind: str, server: int | None) -> Any:
        if kind == "worker":
            opts = self.placer.worker_options(self.job.job_id, server)
            return Worker.options(**opts).remote(self.job.workload, self.job.n_partitions,
                                                 self.config.batch_size)
        opts = self.placer.ps_options(self.job.job_id, server)
        return PSShard.options(**opts).remote(self.optimizer, self.n_params)

    def prestart(self, workers: Sequence[int | None] = (), ps: Sequence[int | None] = (),
                 wait: bool = True) -> None:
        """Start spare actors on these servers now (workers with their data loaded, shards of a
        large job with their update kernels: :meth:`PSShard.warm`), so a later resize that
        needs them does not wait for actor start-up. ``wait``: block until they are ready."""
        fresh = [("worker", srv, self._create("worker", srv)) for srv in workers]
        fresh += [("ps", srv, self._create("ps", srv)) for srv in ps]
        refs = [a.warm.remote() for _, _, a in fresh]  # data, or the shard's update kernels
        if wait:
            self._wait(refs)
        for kind, srv, actor in fresh:
            self._spares[kind].append((srv, actor))

    def missing(self, workers: Sequence[int | None],
                ps: Sequence[int | None]) -> tuple[list[int | None], list[int | None]]:
        """Servers that would need new worker and shard actors to :meth:`resize` to this
        plan from now, less the spares already started there."""
        _, w_add = _match(self.worker_servers, workers)
        if not self.shards:
            p_add = list(ps)
        elif sorted(ps, key=str) != sorted(self.shard_servers, key=str):
            p_add = _match(self.shard_servers, ps)[1]
        else:
            p_add = []
        return (_match([s for s, _ in self._spares["worker"]], w_add)[1],
                _match([s for s, _ in self._spares["ps"]], p_add)[1])

    def drop_spares(self) -> None:
        """Stop the spare actors no resize has used."""
        self._kill([a for k in self._spares for _, a in self._spares[k]])
        self._spares = {"worker": [], "ps": []}

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

    # -- slot boundary -------------------------------------------------------------------
    def resize(self, workers: Sequence[int | None], ps: Sequence[int | None]) -> None:
        """Apply one slot's plan: a worker per entry of ``workers`` and a shard per entry of
        ``ps``, each on that server (None: anywhere). No step may be in flight.

        Empty ``workers`` and ``ps`` suspends the job (:meth:`suspend`). Workers on servers
        that stay are kept; a changed PS count or placement re-shards, carrying parameters,
        optimizer state and counters over exactly. A changed worker count starts the
        learning-rate ramp at the current update. Blocks until every actor is ready.
        """
        if self.running:
            raise RuntimeError("resize while training is in flight")
        if not workers and not ps:
            self.suspend()
            return
        if not ps:
            raise ValueError("workers need at least one PS shard")
        if len(workers) > self.job.n_partitions:
            raise ValueError(f"{len(workers)} workers > {self.job.n_partitions} partitions")
        shards_changed = True
        if not self.shards:
            self._restore(list(ps))
        elif sorted(ps, key=str) != sorted(self.shard_servers, key=str):
            self._reshard(list(ps))
        else:
            shards_changed = False
        keep, add = _match(self.worker_servers, workers)
        self._kill([w for i, w in enumerate(self.workers) if i not in keep])
        new = [self._new_actor("worker", srv) for srv in add]
        count_changed = len(workers) != len(self.workers) or bool(new)
        self.workers = [self.workers[i] for i in keep] + new
        self.worker_servers = [self.worker_servers[i] for i in keep] + list(add)
        refs = [w.set_shards.remote(self.shards, self.bounds)
                for w in (self.workers if shards_changed else new)]
        if count_changed:
            refs += self._assign_partitions(range(len(self.workers)))
        self._wait(refs)
        n = len(self.workers)
        if n and self._lr_workers and n != self._lr_workers:
            ray.get([s.on_resize.remote(self._lr_workers, n) for s in self.shards])
        if n:
            self._lr_workers = n
        self._mark(f"resize to {n} workers, {len(self.shards)} shards")

    def _assign_partitions(self, which: Sequence[int]) -> list[Any]:
        """Worker ``i`` of ``k`` owns partitions ``i, i + k, i + 2k, ...`` of the ``N``."""
        k, n = len(self.workers), self.job.n_partitions
        self._generation += 1
        return [self.workers[i].set_partitions.remote(
                    list(range(i, n, k)), (self.config.seed, self._generation, i))
                for i in which]

    def _restore(self, servers: list[int | None]) -> None:
        """Create shards from the latest checkpoint, or from the initial parameters."""
        meta = self.store.latest()
        self.bounds = shard_bounds(self.n_params, len(servers))
        self.shards = [self._new_actor("ps", srv) for srv in servers]
        self.shard_servers = servers
        if meta is None:
            init = self.job.workload.init_params(self.config.seed).astype(np.float32)
            piece = ray.put({"lo": 0, "hi": self.n_params, "params": init,
                             "buffer": np.zeros_like(init)})
            sched = LRScaleSchedule(self.config.lr_rule, self.config.ramp_steps).to_dict()
            self._wait([s.load.remote(lo, hi, 0, 0, sched, piece)
                        for s, (lo, hi) in zip(self.shards, self.bounds, strict=True)])
            self.step = self.batches = 0
            self._lr_workers = 0
            self.checkpoint()
            return
        folder = str(self.store.path(meta.version))
        sched = dict(meta.extra["schedule"])
        self._wait([s.restore.remote(folder, lo, hi, meta.step, meta.batches, sched)
                    for s, (lo, hi) in zip(self.shards, self.bounds, strict=True)])
        self.step, self.batches, self.version = meta.step, meta.batches, meta.version
        self._lr_workers = int(meta.extra.get("lr_workers", 0))
        self._generation = int(meta.extra.get("generation", 0))
        self._mark(f"restored v{meta.version} (step {meta.step})")

    def _reshard(self, servers: list[int | None]) -> None:
        """Move the parameters and optimizer state onto shards on ``servers`` (new bounds)."""
        old, old_bounds = self.shards, self.bounds
        bounds = shard_bounds(self.n_params, len(servers))  # raises before anything changes
        exports = [s.export.remote() for s in old]
        step, batches = self.counters()
        sched = ray.get(old[0].schedule_state.remote())
        keep, add = _match(self.shard_servers, servers)
        targets = [old[i] for i in keep] + [self._new_actor("ps", srv) for srv in add]
        self.shard_servers = [self.shard_servers[i] for i in keep] + add
        self.bounds = bounds
        loads = []
        for actor, (lo, hi) in zip(targets, self.bounds, strict=True):
            pieces = [e for e, (a, b) in zip(exports, old_bounds, strict=True)
                      if a < hi and lo < b]
            loads.append(actor.load.remote(lo, hi, step, batches, sched, *pieces))
        self._wait(loads)
        self._kill([s for i, s in enumerate(old) if i not in keep])
        self.shards = targets

    # -- checkpoints ---------------------------------------------------------------------
    def checkpoint(self) -> CheckpointMeta:
        """Commit one global version: every shard writes its slice, then the meta commits.

        Only at a quiescent point (no step in flight), so all shards are at the same update.
        """
        version = self.version + 1
        staging = self.store.staging(version)
        got = set(ray.get([s.save.remote(str(staging)) for s in self.shards]))
        if len(got) != 1:
            raise RuntimeError(f"inconsistent checkpoint of {self.job.job_id}: {sorted(got)}")
        step, batches = got.pop()
        meta = CheckpointMeta(
            version=version, n_params=self.n_params, keys=STATE_KEYS, step=step,
            batches=batches, n_workers=len(self.workers), n_shards=len(self.shards),
            extra={"schedule": ray.get(self.shards[0].schedule_state.remote()),
                   "lr_workers": self._lr_workers, "generation": self._generation},
        )
        self.store.commit(meta)
        self.version, self.step, self.batches = version, step, batches
        self._last_ckpt = time.time()
        return meta

    def _rollback(self) -> None:
        """A shard died: replace every shard from the last committed checkpoint."""
        lost = self.batches
        with contextlib.suppress(RayError):  # the live count, for the record
            lost = max(lost, int(ray.get(self.shards[0].counters.remote(), timeout=5)[1]))
        self._kill(self.shards)
        self.shards = []
        self._restore(self.shard_servers)
        if self.workers and self._lr_workers != len(self.workers):
            ray.get([s.on_resize.remote(self._lr_workers, len(self.workers))
                     for s in self.shards])
            self._lr_workers = len(self.workers)
        ray.get([w.set_shards.remote(self.shards, self.bounds) for w in self.workers])
        self.rollbacks.append((lost, self.batches))
        self._mark(f"shard lost: rolled back to step {self.step} "
                   f"(at least {max(0, lost - self.batches)} mini-batches lost)")

    def _replace_worker(self, i: int) -> None:
        self._kill([self.workers[i]])
        self.workers[i] = self._create("worker", self.worker_servers[i])
        refs = [self.workers[i].set_shards.remote(self.shards, self.bounds)]
        ray.get(refs + self._assign_partitions([i]))
        self._mark(f"worker {i} lost: replaced")

    # -- training ------------------------------------------------------------------------
    def begin(self, deadline: float, until_batches: int | None = None) -> None:
        """Train until wall time ``deadline`` (``time.time()`` seconds), the sample budget, or
        ``until_batches`` mini-batches applied in all, whichever comes first (async workers in
        flight may overshoot a count by at most one mini-batch each)."""
        self._deadline = deadline
        self._resume_at = 0.0  # a strike's back-off lasts until the next slot
        budget = self.job.budget
        self._stop_at = budget if until_batches is None else min(budget, until_batches)
        self._launch()

    def _launch(self) -> None:
        now = time.time()
        if (self.fatal or not self.workers or self.batches >= self._stop_at
                or now >= self._deadline or now < self._resume_at):
            return
        self._resume_at = 0.0
        self._seg_batches, self._errors, self._infra = self.batches, [], 0
        every = self.config.checkpoint_every_s
        if every is not None and now >= self._last_ckpt + every:
            self.checkpoint()
        self._seg_end = self._deadline if every is None else min(self._deadline,
                                                                 self._last_ckpt + every)
        for i, w in enumerate(self.workers):
            self._pending[self._task(w)] = i

    def _task(self, worker: Any) -> Any:
        if self.config.mode == "async":
            return worker.train.remote(self._seg_end, self._stop_at)
        return worker.sync_step.remote()

    def handle(self, ref: Any) -> None:
        """Take one finished reference from :meth:`pending`; launch what comes next."""
        i = self._pending.pop(ref)
        try:
            self.stats.add(ray.get(ref))
        except RayError as err:
            log.info("%s: worker %d failed: %s", self.job.job_id, i, type(err).__name__)
            worker_alive = _alive(self.workers[i])
            if worker_alive and not infrastructure_failure(err):  # the workload's own error
                self._errors.append(str(err).strip().splitlines()[-1][:300])
            else:
                self._infra += 1
            if (self.config.mode == "async" and not worker_alive
                    and all(_alive(s) for s in self.shards)):
                self._replace_worker(i)  # async: the others go on; restart this one now
                self._pending[self._task(self.workers[i])] = i
            else:
                self._failed.append(i)
        if self._pending:
            return
        try:
            self._settle()
        except RayError:
            self._failed.append(-1)
            self._infra += 1
            self._recover()
        self._strike()
        self._launch()

    def _strike(self) -> None:
        """End of a segment. Progress clears the record. Otherwise errors of the workload are
        a strike (:data:`MAX_STRIKES` make the job :attr:`fatal`; before that the job backs
        off until its next slot), and infrastructure failures alone are never a strike: the
        first such segment is retried at once, later ones in a row after a back-off doubling
        from :data:`INFRA_BACKOFF_S`."""
        if self.batches > self._seg_batches:
            self._strikes = self._infra_row = 0
            return
        now = time.time()
        if self._errors:
            self._strikes += 1
            if self._strikes >= MAX_STRIKES:
                self.fatal = self._errors[-1]
                self._mark(f"failed for good after {self._strikes} strikes: {self.fatal}")
                return
            self._back_off(f"strike {self._strikes}: {self._errors[-1]}",
                           max(0.0, self._deadline - now))
            self._resume_at = self._deadline  # retried in the job's next slot
        elif self._infra:
            self._infra_row += 1
            if self._infra_row == 1:
                return  # recovered (actor replaced, shards rolled back): retry at once
            wait = min(INFRA_BACKOFF_S * 2 ** (self._infra_row - 2), INFRA_BACKOFF_MAX_S)
            self._back_off(f"infrastructure failure ({self._infra_row} in a row)", wait)
            self._resume_at = now + wait

    def _back_off(self, why: str, seconds: float) -> None:
        self.backoffs.append((why, seconds))
        self._mark(f"back-off {seconds:.2f} s after {why}")

    def _settle(self) -> None:
        """Every task of the segment (or sync step) has returned."""
        if self._failed:
            self._recover()
            return
        if self.config.mode == "sync":
            got = set(ray.get([s.apply.remote() for s in self.shards]))
            if len(got) != 1:
                raise RuntimeError(f"shards of {self.job.job_id} disagree: {sorted(got)}")
            self.step, self.batches = got.pop()
        else:
            self._align_counters()

    def _recover(self) -> None:
        failed, self._failed = set(self._failed), []
        if not all(_alive(s) for s in self.shards):
            self._rollback()
        elif self.config.mode == "sync":
            ray.get([s.discard.remote() for s in self.shards])
            self.step, self.batches = self.counters()
        else:
            self._align_counters()
        for i in sorted(failed - {-1}):
            if not _alive(self.workers[i]):
                self._replace_worker(i)

    def _align_counters(self) -> None:
        """Async, at a quiescent point: read the counters; if a worker died between its pushes
        to different shards, its partial push stays applied where it landed (an asynchronous
        update of some slices, which async SGD tolerates) and every shard takes the largest
        counters, so the job is again at one global version."""
        got = ray.get([s.counters.remote() for s in self.shards])
        top = max(got)
        if len(set(got)) > 1:
            ray.get([s.set_counters.remote(*top) for s in self.shards])
            self._mark(f"partial push of a lost worker kept: counters {sorted(set(got))} -> {top}")
        self.step, self.batches = top

    def run_until(self, deadline: float, until_batches: int | None = None) -> None:
        """One job alone: :meth:`begin`, then wait on :meth:`pending` until nothing is left."""
        self.begin(deadline, until_batches)
        while True:
            until = self.deferred_until
            if not self._pending and until is None:
                return
            timeout = None if until is None else max(0.0, until - time.time())
            if self._pending:
                ready, _ = ray.wait(self.pending(), num_returns=1, timeout=timeout)
                if ready:
                    self.handle(ready[0])
            else:
                time.sleep(timeout or 0.0)  # a back-off: nothing else to wait for
            self.poll()

    def end(self) -> ProgressPoint:
        """Slot end: checkpoint, evaluate, record a progress point."""
        if self.running:
            raise RuntimeError("end of slot while training is in flight")
        if self.shards and (self.step, self.batches) != self._ckpt_counters():
            self.checkpoint()
        return self.record()

    def _ckpt_counters(self) -> tuple[int, int]:
        meta = self.store.latest()
        return (-1, -1) if meta is None else (meta.step, meta.batches)

    def record(self) -> ProgressPoint:
        """Append a progress point (held-out evaluation if configured and shards exist)."""
        s = self.stats
        ev: dict[str, float] = {}
        if self.config.evaluate and self.shards:
            ev = self.job.workload.evaluate(self.params())
        point = ProgressPoint(
            wall_s=time.time() - self._t0, batches=self.batches, step=self.step,
            train_loss=s.loss / s.batches if s.batches else None,
            eval_loss=ev.get("loss"), eval_accuracy=ev.get("accuracy"),
            workers=len(self.workers), shards=len(self.shards))
        s.batches, s.loss, s.seconds = 0, 0.0, 0.0
        self.history.append(point)
        return point

    def run_slot(self, workers: Sequence[int | None], ps: Sequence[int | None],
                 seconds: float) -> ProgressPoint:
        """Resize, train for ``seconds`` (counted from the slot boundary), end the slot."""
        deadline = time.time() + seconds
        self.resize(workers, ps)
        self.run_until(deadline)
        return self.end()

    def suspend(self) -> None:
        """Checkpoint and stop every actor; a later :meth:`resize` resumes from disk."""
        if self.running:
            raise RuntimeError("suspend while training is in flight")
        if self.shards and (self.step, self.batches) != self._ckpt_counters():
            self.checkpoint()
        self._kill(self.workers + self.shards)
        self.workers, self.worker_servers, self.shards, self.shard_servers = [], [], [], []
        self._mark("suspended")

    def close(self, remove_checkpoints: bool = False) -> None:
        """Stop every actor (spares too); drop a temporary checkpoint folder."""
        for ref in list(self._pending):
            ray.cancel(ref, force=False)
        self._pending.clear()
        spares = [a for k in self._spares for _, a in self._spares[k]]
        self._kill(self.workers + self.shards + spares)
        self.workers, self.shards, self._spares = [], [], {"worker": [], "ps": []}
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        elif remove_checkpoints:
            shutil.rmtree(self.store.folder, ignore_errors=True)
