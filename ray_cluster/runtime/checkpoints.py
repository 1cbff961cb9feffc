"""A job runtime's checkpoints: one global version committed at quiescent points, shards
restored from the latest, re-sharded onto new servers, rolled back when a shard dies. The
third layer of :class:`ray_cluster.runtime.JobRuntime`.
"""

from __future__ import annotations

import contextlib
import logging
import time

import numpy as np
import ray
from ray.exceptions import RayError

from ray_cluster.ps.actors import STATE_KEYS
from ray_cluster.ps.checkpoint import CheckpointMeta
from ray_cluster.ps.elastic import LRScaleSchedule
from ray_cluster.ps.optim import shard_bounds
from ray_cluster.runtime.fleet import ActorFleet, match_servers

__all__ = ["Checkpoints"]

log = logging.getLogger("ray_cluster.runtime")


class Checkpoints(ActorFleet):
    """Consistent checkpoints of one job's shards, and the PS set built from them."""

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

    def _ckpt_counters(self) -> tuple[int, int]:
        meta = self.store.latest()
        return (-1, -1) if meta is None else (meta.step, meta.batches)

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
        keep, add = match_servers(self.shard_servers, servers)
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
