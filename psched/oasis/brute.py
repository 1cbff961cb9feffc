"""Brute force over every schedule of one job: the ground truth for tests on tiny instances.

Enumerates, per window slot, every placement of ``n`` workers on the worker servers and every
PS count ``ceil(b/B n) <= k <= n`` with every placement of those PS, checking each server's
residual capacity resource by resource; then every vector of worker counts over the window
that sums to ``W``. Shares nothing with the greedy (Theorem 1) or the recursions.

Ties are broken by the tie rule of :mod:`psched.oasis.schedule`, written here directly over
the enumerated schedules (no recursion): the highest payoff; among payoffs within
``TIE_RTOL`` of it the earliest completion; among the schedules completing there within
``ARG_RTOL`` of their least cost, the reverse-lexicographically greatest worker counts.

Complexity: exponential -- O(Tw N^(H + K)) placements and O(N^Tw) count vectors; only for
a handful of servers, slots and workers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from psched.oasis.ledger import JobInputs, PoolInputs
from psched.oasis.schedule import ARG_RTOL, TIE_RTOL, Best

__all__ = ["brute_slot_cost", "solve_brute"]


def _cheapest(pool: PoolInputs, i: int, k: int) -> float:
    """Least cost of any placement of ``k`` containers in window slot ``i``."""
    n_srv = pool.servers.size
    best = math.inf
    for y in itertools.product(range(k + 1), repeat=n_srv):
        if sum(y) != k:
            continue
        ok = all(np.all(c * pool.demand <= pool.resid[i, h] + 1e-9)
                 for h, c in enumerate(y) if c)
        if ok:
            cost = sum(c * float(np.dot(pool.price[i, h], pool.norm)) for h, c in enumerate(y))
            best = min(best, cost)
    return best


def brute_slot_cost(inp: JobInputs, i: int, n: int) -> float:
    """Least cost of ``n`` workers and any admissible number of PS in window slot ``i``."""
    w = _cheapest(inp.workers, i, n)
    if n == 0 or w == math.inf:
        return w
    lo = int(inp.ps_needed[n])
    return w + min(_cheapest(inp.ps, i, k) for k in range(lo, n + 1))


def solve_brute(inp: JobInputs, floor: float = -math.inf) -> Best:
    """Best schedule by enumeration; payoff ``max(floor, optimum)`` in cost units.

    The schedule is the one the tie rule picks (module docstring); ``None`` if no schedule
    beats ``floor``.
    """
    work, n_max, n_slots = inp.job.work, inp.job.max_workers, inp.n_slots
    table = [[brute_slot_cost(inp, i, n) for n in range(n_max + 1)] for i in range(n_slots)]
    found: list[tuple[float, int, float, tuple[int, ...]]] = []  # payoff, last, cost, counts
    for counts in itertools.product(range(n_max + 1), repeat=n_slots):
        if sum(counts) != work:
            continue
        cost = sum(table[i][n] for i, n in enumerate(counts))
        if not math.isfinite(cost):
            continue
        last = max(i for i, n in enumerate(counts) if n > 0)
        found.append((float(inp.util[last]) - cost, last, cost, counts))
    if not found:
        return Best(payoff=floor, counts=None)
    top = max(f[0] for f in found)
    if not top > floor + (TIE_RTOL * abs(floor) if math.isfinite(floor) else 0.0):
        return Best(payoff=floor, counts=None)
    tied = [f for f in found if f[0] >= top - TIE_RTOL * abs(top)]
    first = min(f[1] for f in tied)
    at_first = [f for f in found if f[1] == first]
    least = min(f[2] for f in at_first)
    cheapest = [f for f in at_first if f[2] <= least + ARG_RTOL * least]
    pick = max(cheapest, key=lambda f: f[3][::-1])
    return Best(payoff=pick[0], counts=np.array(pick[3], dtype=np.int64))
