"""Old import path of :mod:`ray_cluster.runtime.types` (re-exported)."""

from ray_cluster.runtime.types import (
    MODES,
    NoPlacement,
    Placer,
    ProgressPoint,
    RuntimeConfig,
    TrainingJob,
    worker_slots,
)

__all__ = ["MODES", "NoPlacement", "Placer", "ProgressPoint", "RuntimeConfig", "TrainingJob",
           "worker_slots"]
