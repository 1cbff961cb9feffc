"""A job runtime's actors: started where the plan puts them, spares started ahead, dead
workers replaced, partitions assigned. The second layer of
:class:`ray_cluster.runtime.JobRuntime`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import ray

from ray_cluster.ps.actors import PSShard, Worker
from ray_cluster.runtime.state import RuntimeState

if TYPE_CHECKING:
    from ray.actor import ActorClass

__all__ = ["ActorFleet", "match_servers"]

log = logging.getLogger("ray_cluster.runtime")

#: The actor classes as ``@ray.remote`` made them (a type checker does not see what a class
#: decorator returns).
_WORKER = cast("ActorClass[Worker]", Worker)
_PS_SHARD = cast("ActorClass[PSShard]", PSShard)


def match_servers(current: Sequence[int | None], target: Sequence[int | None]) -> tuple[list[int],
                                                                                  list[int | None]]:
    """Which current positions to keep (in order) and which target servers still need actors."""
    left = list(target)
    keep = []
    for i, srv in enumerate(current):
        if srv in left:
            left.remove(srv)
            keep.append(i)
    return keep, left



class ActorFleet(RuntimeState):
    """Starting, reusing and replacing one job's worker and PS-shard actors."""

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
            return _WORKER.options(**opts).remote(self.job.workload, self.job.n_partitions,
                                                  self.config.batch_size)
        opts = self.placer.ps_options(self.job.job_id, server)
        return _PS_SHARD.options(**opts).remote(self.optimizer, self.n_params)

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
        _, w_add = match_servers(self.worker_servers, workers)
        if not self.shards:
            p_add = list(ps)
        elif sorted(ps, key=str) != sorted(self.shard_servers, key=str):
            p_add = match_servers(self.shard_servers, ps)[1]
        else:
            p_add = []
        return (match_servers([s for s, _ in self._spares["worker"]], w_add)[1],
                match_servers([s for s, _ in self._spares["ps"]], p_add)[1])

    def drop_spares(self) -> None:
        """Stop the spare actors no resize has used."""
        self._kill([a for k in self._spares for _, a in self._spares[k]])
        self._spares = {"worker": [], "ps": []}

    def _assign_partitions(self, which: Sequence[int]) -> list[Any]:
        """Worker ``i`` of ``k`` owns partitions ``i, i + k, i + 2k, ...`` of the ``N``."""
        k, n = len(self.workers), self.job.n_partitions
        self._generation += 1
        return [self.workers[i].set_partitions.remote(
                    list(range(i, n, k)), (self.config.seed, self._generation, i))
                for i in which]

    def _replace_worker(self, i: int) -> None:
        self._kill([self.workers[i]])
        self.workers[i] = self._create("worker", self.worker_servers[i])
        refs = [self.workers[i].set_shards.remote(self.shards, self.bounds)]
        ray.get(refs + self._assign_partitions([i]))
        self._mark(f"worker {i} lost: replaced")
