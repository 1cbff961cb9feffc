"""The plain data a job's training controller works with, and where its actors go.

:class:`RuntimeConfig` says how a job trains (mode, optimizer, learning-rate rule,
checkpoints), the same for every slot; :class:`TrainingJob` says what trains (a workload and
its sample budget); :class:`ProgressPoint` is one observation of its training; :class:`Placer`
(default :class:`NoPlacement`) gives the Ray actor options that put a worker or a PS shard on a
planned server. The controller itself is :class:`ray_cluster.runtime.JobRuntime`, which
re-exports every name here.

Sample budget and progress: a job has ``N`` data partitions (= most workers), ``M``
mini-batches per partition and ``E`` epochs, so it trains ``E N M`` mini-batches (async: one
applied push is one mini-batch; sync: one update with ``k`` workers is ``k`` mini-batches).
The executor turns mini-batches into worker-slots, see :func:`worker_slots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ray_cluster.ps.elastic import RULES
from ray_cluster.workloads.builtin import Workload

__all__ = [
    "MODES",
    "NoPlacement",
    "Placer",
    "ProgressPoint",
    "RuntimeConfig",
    "TrainingJob",
    "worker_slots",
]

MODES: tuple[str, ...] = ("async", "sync")


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig:
    """How a job trains; the same for every slot."""

    mode: str = "async"  #: "async" (OASiS model) or "sync" (bulk-synchronous)
    batch_size: int = 32  #: mini-batch size of one worker
    lr: float = 0.05  #: base learning rate (scale 1)
    momentum: float = 0.9  #: momentum mu
    lr_in_buffer: bool = False  #: momentum form, see :mod:`ray_cluster.ps.optim`
    lr_rule: str = "dynamic"  #: worker-count change rule: "dynamic", "linear" or "none"
    ramp_steps: int = 8  #: T, updates of the Dynamic SGD ramp
    checkpoint_dir: str | None = None  #: root of checkpoints; None: a temporary folder
    checkpoint_every_s: float | None = None  #: also checkpoint this often within a slot
    keep_checkpoints: int = 2  #: committed versions kept per job
    evaluate: bool = True  #: held-out loss and accuracy at each slot end
    start_timeout_s: float = 120.0  #: most seconds to wait for actors at a slot boundary
    seed: int = 0  #: parameter initialisation and batch order

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.lr_rule not in RULES:
            raise ValueError(f"lr_rule must be one of {RULES}, got {self.lr_rule!r}")
        if self.batch_size < 1 or self.ramp_steps < 1:
            raise ValueError("batch_size and ramp_steps must be at least 1")
        if self.checkpoint_every_s is not None and self.checkpoint_every_s <= 0:
            raise ValueError("checkpoint_every_s must be positive")


@dataclass(frozen=True, kw_only=True)
class TrainingJob:
    """What trains: a workload and the job's sample budget ``E N M`` mini-batches."""

    job_id: str  #: unique name (also the checkpoint folder)
    workload: Workload  #: model and data
    n_partitions: int  #: N, data partitions = most workers
    minibatches: int  #: M, mini-batches per partition per epoch
    epochs: int  #: E

    @property
    def budget(self) -> int:
        """Mini-batches to train: ``E N M``."""
        return self.epochs * self.n_partitions * self.minibatches


def worker_slots(batches: float, budget: int, work: int) -> float:
    """Mini-batches -> worker-slots: ``work * batches / budget``.

    ``Job.work = ceil(E N M (tau + 2e/b) / slot)`` worker-slots stand for ``E N M``
    mini-batches, so one mini-batch is ``work / (E N M)`` worker-slots, and the job's
    worker-slots reach ``work`` exactly when its mini-batches reach the budget.
    """
    return work * batches / budget


@dataclass(frozen=True, kw_only=True)
class ProgressPoint:
    """One observation of a job's training."""

    wall_s: float  #: seconds since the runtime started
    batches: int  #: mini-batches applied so far (samples = batches * batch_size)
    step: int  #: updates applied so far
    train_loss: float | None = None  #: mean training loss of the steps since the last point
    eval_loss: float | None = None  #: held-out loss
    eval_accuracy: float | None = None  #: held-out accuracy
    workers: int = 0  #: workers at that time
    shards: int = 0  #: PS shards at that time


class Placer(Protocol):
    """Ray actor options placing a job's worker or shard on a planned server."""

    def worker_options(self, job_id: str, server: int | None) -> dict[str, Any]: ...

    def ps_options(self, job_id: str, server: int | None) -> dict[str, Any]: ...


class NoPlacement:
    """Anywhere, using no resources (a single-machine Ray)."""

    def worker_options(self, job_id: str, server: int | None) -> dict[str, Any]:
        return {}

    def ps_options(self, job_id: str, server: int | None) -> dict[str, Any]:
        return {}
