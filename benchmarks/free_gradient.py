"""A workload whose gradient costs no compute, for timing the gradient exchange alone
(``bench_runtime.py`` on the CPU, ``bench_gpu_lm.py`` across a GPU's bus)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ray_cluster.workloads.builtin import Batch, Partition

__all__ = ["FreeGradient"]

_GRAD: dict[int, np.ndarray] = {}


@dataclass(frozen=True, kw_only=True)
class FreeGradient:
    """A workload of ``n_params`` parameters whose gradient costs nothing (a fixed vector)."""

    name: ClassVar[str] = "free-gradient"
    n_params: int  #: parameters (float32)

    def init_params(self, seed: int) -> np.ndarray:
        return np.zeros(self.n_params, dtype=np.float32)

    def partition(self, n_partitions: int, index: int) -> Partition:
        return Partition(index=index, n_partitions=n_partitions, rows=np.zeros(1, np.int64))

    def batches(self, part: Partition, batch_size: int,
                rng: np.random.Generator) -> Iterator[Batch]:
        batch = Batch(x=np.zeros((1, 1)), y=np.zeros(1, np.int64))
        while True:
            yield batch

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        if self.n_params not in _GRAD:
            _GRAD[self.n_params] = np.full(self.n_params, 1e-3, dtype=np.float32)
        return 0.0, _GRAD[self.n_params]

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        return {}
