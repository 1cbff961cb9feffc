"""Central finite differences, which the workloads' gradient tests check gradients against.
``from finite_differences import central_differences``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["central_differences"]


def central_differences(loss: Callable[[np.ndarray], float], params: np.ndarray,
                        indices: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """``(loss(params + eps e_i) - loss(params - eps e_i)) / (2 eps)`` for each ``i`` of
    ``indices``: the partial derivatives of ``loss`` there, to ``O(eps^2)``."""
    out = np.empty(len(indices))
    for k, i in enumerate(indices):
        e = np.zeros_like(params)
        e[i] = eps
        out[k] = (loss(params + e) - loss(params - e)) / (2 * eps)
    return out
