"""One job's training controller on Ray (:class:`JobRuntime`) and the data it works with.

The public import path: re-exports :mod:`ray_cluster.runtime.job` (the class, built in
layers: state, fleet, checkpoints, boundary, training) and :mod:`ray_cluster.runtime.types`.
"""

from ray_cluster.runtime.job import JobRuntime
from ray_cluster.runtime.training import MAX_STRIKES, PING_TIMEOUT_S, infrastructure_failure
from ray_cluster.runtime.types import (
    MODES,
    NoPlacement,
    Placer,
    ProgressPoint,
    RuntimeConfig,
    TrainingJob,
    worker_slots,
)

__all__ = [
    "MAX_STRIKES",
    "MODES",
    "PING_TIMEOUT_S",
    "JobRuntime",
    "NoPlacement",
    "Placer",
    "ProgressPoint",
    "RuntimeConfig",
    "TrainingJob",
    "infrastructure_failure",
    "worker_slots",
]
