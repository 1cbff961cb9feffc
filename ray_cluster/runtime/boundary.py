"""A job runtime at a slot boundary: resized to the slot's plan, suspended, closed. The fourth
layer of :class:`ray_cluster.runtime.JobRuntime`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Sequence

import ray
from ray.exceptions import RayError

from ray_cluster.runtime.checkpoints import Checkpoints
from ray_cluster.runtime.fleet import match_servers

__all__ = ["SlotBoundary"]

log = logging.getLogger("ray_cluster.runtime")


class SlotBoundary(Checkpoints):
    """What one job's runtime does between slots."""

    _released = False  #: workers were stopped by :meth:`release_workers` since the last resize

    def release_workers(self, workers: Sequence[int | None]) -> None:
        """Stop the workers that a :meth:`resize` to ``workers`` would not keep, at once. An
        executor calls it for every job before it resizes any, so that a worker's server (a
        GPU) that one job leaves is free when another job's new worker starts there, in any
        order (without it the other's start waits for the GPU until it times out). No step
        may be in flight. O(workers)."""
        if self.running:
            raise RuntimeError("release while training is in flight")
        keep, _ = match_servers(self.worker_servers, workers)
        if len(keep) == len(self.workers):
            return
        self._kill([w for i, w in enumerate(self.workers) if i not in keep])
        self.workers = [self.workers[i] for i in keep]
        self.worker_servers = [self.worker_servers[i] for i in keep]
        self._released = True

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
        keep, add = match_servers(self.worker_servers, workers)
        self._kill([w for i, w in enumerate(self.workers) if i not in keep])
        new = [self._new_actor("worker", srv) for srv in add]
        count_changed = len(workers) != len(self.workers) or bool(new) or self._released
        self._released = False
        self.workers = [self.workers[i] for i in keep] + new
        self.worker_servers = [self.worker_servers[i] for i in keep] + list(add)
        refs = [w.set_shards.remote(self.shards, self.bounds)
                for w in (self.workers if shards_changed else new)]
        if count_changed:
            refs += self._assign_partitions(range(len(self.workers)))
        unknown = [w for w in self.workers if w not in self._devices]  # where new ones train
        found = self._wait(refs + [w.device.remote() for w in unknown])[len(refs):]
        self._note_devices(unknown, found)
        n = len(self.workers)
        if n and self._lr_workers and n != self._lr_workers:
            ray.get([s.on_resize.remote(self._lr_workers, n) for s in self.shards])
        if n:
            self._lr_workers = n
        self._mark(f"resize to {n} workers, {len(self.shards)} shards")

    def suspend(self) -> None:
        """Checkpoint and stop every actor; a later :meth:`resize` resumes from disk."""
        if self.running:
            raise RuntimeError("suspend while training is in flight")
        if self.shards and (self.step, self.batches) != self._ckpt_counters():
            self.checkpoint()
        self._kill(self.workers + self.shards)
        self.workers, self.worker_servers, self.shards, self.shard_servers = [], [], [], []
        self._mark("suspended")

    def abandon(self, why: str) -> None:
        """Give up the job's actors without a checkpoint (a node they used was lost, or
        Ray failed under them): pending tasks are cancelled and every actor, spares too, is
        killed for good, so none is left running if its node comes back. The next
        :meth:`resize` restores the shards from the latest committed checkpoint; the steps
        since it are lost (at most one checkpoint interval)."""
        for ref in list(self._pending):
            with contextlib.suppress(RayError, ValueError):
                ray.cancel(ref, force=True)
        self._pending.clear()
        self._failed = []
        self._resume_at = 0.0  # nothing to resume in this slot: no actors
        spares = [a for k in self._spares for _, a in self._spares[k]]
        for actor in self.workers + self.shards + spares:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(actor, no_restart=True)
        self.workers, self.worker_servers, self.shards, self.shard_servers = [], [], [], []
        self._spares = {"worker": [], "ps": []}
        meta = self.store.latest()
        if meta is not None:
            self.step, self.batches, self.version = meta.step, meta.batches, meta.version
        self._mark(f"abandoned its actors ({why}); resumes from checkpoint "
                   f"v{self.version} (step {self.step})")

    def uses(self, servers: set[int]) -> bool:
        """True if an actor of the job (spares too) is placed on one of ``servers``."""
        placed = set(self.worker_servers) | set(self.shard_servers)
        placed |= {s for k in self._spares for s, _ in self._spares[k]}
        return bool(placed & servers)

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
