"""A user's own training code for psched's runtime: least-squares classification of the
digits, written against the :class:`ray_cluster.workloads.data.Workload` protocol and nothing
else of psched's but its data loader.

Run it with a service that allows import paths, this folder on the path of every Ray
process (docs/jobspec.md, "Your own training code")::

    PYTHONPATH=examples/workloads psched serve --allow-import --history traces/run_small.csv &
    psched submit examples/workloads/least-squares.toml
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ray_cluster.workloads.data import Batch, Partition, load_dataset

__all__ = ["LeastSquaresDigits"]


@dataclass(frozen=True, kw_only=True)
class LeastSquaresDigits:
    """A linear model fitted to one-hot targets by squared loss, with an L2 penalty.

    The parameters are one flat float32 vector (a parameter server shards it by slicing):
    the ``(64 + 1) x 10`` weights and biases, row-major. The hyper-parameters are the fields;
    the job spec's ``[hparams]`` table sets them (``l2 = 0.001``).
    """

    name: ClassVar[str] = "least-squares-digits"
    l2: float = 1e-3  #: weight of the L2 penalty
    split_seed: int = 0  #: seed of the train / held-out split

    def _data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        d = load_dataset("digits", split_seed=self.split_seed)
        # pixels over sqrt(64): the squared loss's curvature stays near 1, so SGD with
        # momentum at the runtime's learning rate (0.05, momentum 0.9) is stable
        return d.x_train / 8.0, d.y_train, d.x_test / 8.0, d.y_test

    def init_params(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return (0.01 * rng.standard_normal(65 * 10)).astype(np.float32)

    def partition(self, n_partitions: int, index: int) -> Partition:
        n = self._data()[1].size
        return Partition(index=index, n_partitions=n_partitions,
                         rows=np.arange(index, n, n_partitions, dtype=np.int64))

    def batches(self, part: Partition, batch_size: int,
                rng: np.random.Generator) -> Iterator[Batch]:
        x, y, _, _ = self._data()
        while True:
            order = rng.permutation(part.rows)
            for k in range(0, order.size - batch_size + 1, batch_size):
                take = order[k:k + batch_size]
                yield Batch(x=x[take], y=y[take])

    def _loss_grad(self, params: np.ndarray, x: np.ndarray,
                   y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        w = params.astype(np.float64).reshape(65, 10)
        x1 = np.hstack([x, np.ones((x.shape[0], 1))])
        err = x1 @ w - np.eye(10)[y]
        loss = 0.5 * float(np.mean(np.sum(err**2, axis=1))) + 0.5 * self.l2 * float(
            np.sum(w**2))
        grad = x1.T @ err / x.shape[0] + self.l2 * w
        return loss, grad, x1 @ w

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        loss, grad, _ = self._loss_grad(params, batch.x, batch.y)
        return loss, grad.astype(np.float32).ravel()

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        _, _, x, y = self._data()
        loss, _, scores = self._loss_grad(params, x, y)
        return {"loss": loss, "accuracy": float(np.mean(np.argmax(scores, axis=1) == y))}
