"""Identical servers of a pool as one, where that is exact, and placement back onto them.

A pool of ``H`` identical servers (capacity ``C``) can be modelled as one server of capacity
``H C`` without losing or adding a schedule when, for the demands ``d_i`` of every job:

1. one resource ``g`` decides every fit: ``d_i^r / C^r <= d_i^g / C^g`` for every ``r`` (a
   server full in ``g`` is within capacity in every other resource), and
2. the sizes ``d_i^g`` form a divisible chain that divides ``C^g`` (each distinct size divides
   the next larger one and the largest divides ``C^g``).

Then first-fit decreasing by ``d^g`` packs any multiset of workers whose total fits ``H C^g``
into the ``H`` servers (with divisible sizes every bin but the last is filled exactly), so the
aggregated capacity row is exact: :func:`exact_aggregate` checks 1 and 2, :func:`pack` places.
The Fig. 5 worker pool (GPU 4, CPU 16, 64 GB; workers 1-2 GPU, 1-4 CPU, 2-8 GB) qualifies.

Complexity: :func:`exact_aggregate` O(jobs x R); :func:`pack` O(workers x H).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["binding_resource", "exact_aggregate", "pack"]

_TOL = 1e-9


def _divides(a: float, b: float) -> bool:
    q = b / a
    return abs(q - round(q)) <= 1e-9 * max(1.0, q)


def binding_resource(cap: np.ndarray, demands: Sequence[np.ndarray]) -> int | None:
    """The resource ``g`` that decides every fit (condition 1), or None."""
    used = [d for d in demands if np.any(d > 0)]
    if not used:
        return 0
    for g in range(cap.size):
        if cap[g] <= 0:
            continue
        share = [d / np.where(cap > 0, cap, np.inf) for d in used]
        if all(d[g] > 0 and np.all(s <= s[g] + _TOL) and np.all((cap > 0) | (d == 0))
               for d, s in zip(used, share, strict=True)):
            return g
    return None


def exact_aggregate(cap: np.ndarray, demands: Sequence[np.ndarray]) -> bool:
    """Can the pool's servers (rows of ``cap``) be one server of the summed capacity, exactly?

    Parameters
    ----------
    cap : H x R capacities of the pool's servers.
    demands : one demand vector (R,) per job (a worker's, or a PS's).
    """
    if cap.shape[0] <= 1:
        return False  # nothing to gain
    if not np.allclose(cap, cap[0], rtol=0.0, atol=_TOL):
        return False
    g = binding_resource(cap[0], demands)
    if g is None:
        return False
    sizes = sorted({round(float(d[g]), 9) for d in demands if np.any(d > 0)})
    chain = [*sizes, float(cap[0, g])]
    return all(_divides(a, b) for a, b in itertools.pairwise(chain))


def pack(cap: np.ndarray, n_servers: int, counts: dict[Hashable, tuple[np.ndarray, int]]
         ) -> dict[Hashable, np.ndarray]:
    """Place ``counts`` (key -> (demand of one, how many)) on ``n_servers`` identical servers.

    First-fit decreasing by the binding resource (:func:`binding_resource`); returns key ->
    per-server counts. Raises ValueError if they do not fit (never, when
    :func:`exact_aggregate` held and the total fits the summed capacity).
    """
    g = binding_resource(cap, [d for d, _ in counts.values()])
    g = 0 if g is None else g
    free = np.full(n_servers, float(cap[g]))
    out = {k: np.zeros(n_servers, dtype=np.int64) for k in counts}
    for key in sorted(counts, key=lambda k: -float(counts[k][0][g])):
        size, n = float(counts[key][0][g]), counts[key][1]
        for _ in range(n):
            fits = np.flatnonzero(free >= size - _TOL)
            if fits.size == 0:
                raise ValueError(f"cannot place {n} of {key!r} on {n_servers} servers")
            free[fits[0]] -= size
            out[key][fits[0]] += 1
    return out
