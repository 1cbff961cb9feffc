"""One job's training controller: its PS shards and workers, resizes, checkpoints, recovery.

A :class:`JobRuntime` lives in the driver. It holds actor handles only; gradients and
parameters go worker <-> shard through the object store. Its life in one slot:

1. :meth:`JobRuntime.resize` (at the slot boundary, with no step in flight): add or remove
   workers, re-shard the PS set when its count or placement changes (parameters, optimizer
   state and counters carried over exactly), start the learning-rate ramp (Dynamic SGD);
2. :meth:`JobRuntime.begin` launches training until the slot's deadline; the owner (one job:
   :meth:`JobRuntime.run_until`; many jobs: :class:`ray_cluster.runtime.executor.RayExecutor`)
   waits on
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
at most one per slot, and :data:`~ray_cluster.runtime.MAX_STRIKES` of them fail the job.

The class is built in layers, one module per role, each using only the layers below it:
:mod:`~ray_cluster.runtime.state` (actors, counters, history, queries) <-
:mod:`~ray_cluster.runtime.fleet` (starting, reusing, replacing actors) <-
:mod:`~ray_cluster.runtime.checkpoints` (commit, restore, re-shard, roll back) <-
:mod:`~ray_cluster.runtime.boundary` (resize, suspend, close) <-
:mod:`~ray_cluster.runtime.training` (segments, failures, strikes, slot end).
The data it works with -- :class:`RuntimeConfig`, :class:`TrainingJob` and its sample budget,
:class:`ProgressPoint`, the :class:`Placer` protocol, :func:`worker_slots` -- lives in
:mod:`ray_cluster.runtime.types`; :mod:`ray_cluster.runtime` re-exports it all and stays the
public import path.
"""

from __future__ import annotations

from ray_cluster.runtime.training import Training

__all__ = ["JobRuntime"]


class JobRuntime(Training):
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
